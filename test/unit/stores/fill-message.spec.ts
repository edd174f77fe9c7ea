import { describe, expect, it } from '@jest/globals';
import {
  MAX_BROADCAST_ENVELOPE,
  MESSAGE_FORMAT_VERSION,
  decodeLaterFormat,
  decodeFillMessage,
  encodeFillMessage,
} from '../../../lib/stores/redis/fill-message.js';

describe('fill messages', () => {
  it.each(['plain', 'with\nnewlines\n', 'ünïcødé 🦄', '12\n34', 'x'.repeat(10_000)])(
    'round-trips the key %#',
    (key) => {
      expect(decodeFillMessage(encodeFillMessage('release', 7, key))).toEqual({
        kind: 'release',
        key,
        version: 7,
        envelope: undefined,
      });
      expect(
        decodeFillMessage(encodeFillMessage('fill', 1764600000123456, key, '{"v":2}')),
      ).toEqual({
        kind: 'fill',
        key,
        version: 1764600000123456,
        envelope: '{"v":2}',
      });
    },
  );

  it.each(['fill', 'write', 'stale', 'delete', 'release'] as const)(
    'round-trips the kind %s',
    (kind) => {
      expect(decodeFillMessage(encodeFillMessage(kind, 3, 'k'))).toMatchObject({
        kind,
        version: 3,
      });
    },
  );

  it('leaves out an envelope too large to broadcast', () => {
    const large = 'x'.repeat(MAX_BROADCAST_ENVELOPE + 1);
    expect(decodeFillMessage(encodeFillMessage('fill', 1, 'k', large))).toMatchObject({
      key: 'k',
      envelope: undefined,
    });
  });

  it.each([
    '',
    'no newline',
    'f:1:\nk',
    'f:1:x\nk',
    'f:1:5\nabc',
    'f:1:-1\nk',
    'q:1:1\nk',
    'f::1\nk',
    'f:x:1\nk',
    '1\nk',
  ])('ignores a foreign message %p', (message) => {
    expect(decodeFillMessage(message)).toBeUndefined();
  });
});

describe('messages of a later format', () => {
  it('are recognised by their marker, with the change they announce', () => {
    expect(decodeLaterFormat('@2:7:1\nkanything a later release adds')).toEqual({
      format: 2,
      change: { key: 'k', version: 7 },
    });
    expect(decodeFillMessage('@2:7:1\nk')).toBeUndefined();
  });

  it('without a readable change, are still of a later format (every copy then goes)', () => {
    expect(decodeLaterFormat('@9:something else')).toEqual({ format: 9, change: undefined });
  });

  it.each(['@1:7:1\nk', '@:7:1\nk', 'f:7:1\nk', 'h:id:1', '@x:1'])(
    'are not what %p is',
    (message) => {
      expect(decodeLaterFormat(message)).toBeUndefined();
    },
  );

  it('this release never publishes: its messages carry no marker', () => {
    expect(MESSAGE_FORMAT_VERSION).toBe(1);
    expect(encodeFillMessage('write', 1, 'k', '{}').startsWith('@')).toBe(false);
  });
});
