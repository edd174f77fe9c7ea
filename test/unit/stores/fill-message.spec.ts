import { describe, expect, it } from '@jest/globals';
import {
  MAX_BROADCAST_ENVELOPE,
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
