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
      expect(decodeFillMessage(encodeFillMessage(key))).toEqual({ key, envelope: undefined });
      expect(decodeFillMessage(encodeFillMessage(key, '{"v":1}'))).toEqual({ key, envelope: '{"v":1}' });
    },
  );

  it('leaves out an envelope too large to broadcast', () => {
    const large = 'x'.repeat(MAX_BROADCAST_ENVELOPE + 1);
    expect(decodeFillMessage(encodeFillMessage('k', large))).toEqual({ key: 'k', envelope: undefined });
  });

  it.each(['', 'no newline', '\nk', 'x\nk', '5\nabc', '-1\nk'])('ignores a foreign message %p', (message) => {
    expect(decodeFillMessage(message)).toBeUndefined();
  });
});
