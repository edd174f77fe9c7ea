import { afterEach, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { UnstorableKeys } from '../../../lib/interceptors/unstorable-keys.js';

describe('UnstorableKeys', () => {
  beforeEach(() => {
    jest.useFakeTimers({ now: 1_000_000 });
  });

  afterEach(() => {
    jest.useRealTimers();
  });

  it('passes a key through until its window ends, then lets it be tried again', () => {
    const keys = new UnstorableKeys();
    keys.add('k', 5_000);
    expect(keys.has('k')).toBe(true);
    jest.advanceTimersByTime(4_999);
    expect(keys.has('k')).toBe(true);
    jest.advanceTimersByTime(1);
    expect(keys.has('k')).toBe(false);
    expect(keys.has('other')).toBe(false);
  });

  it('forgets the oldest window first once it holds its most keys', () => {
    const keys = new UnstorableKeys();
    for (let i = 0; i <= 1000; i += 1) keys.add(`k${i}`, 60_000);
    expect(keys.has('k0')).toBe(false);
    expect(keys.has('k1')).toBe(true);
    expect(keys.has('k1000')).toBe(true);
  });
});
