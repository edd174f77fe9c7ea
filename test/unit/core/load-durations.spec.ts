import { describe, expect, it } from '@jest/globals';
import type { Entry } from '../../../lib/index.js';
import { LoadDurations, MIN_STUCK_MS, STUCK_FACTOR } from '../../../lib/core/load-durations.js';

function loaded(version: number, loadMs: number): Entry {
  return { value: 'v', version, createdAt: 0, softExpireAt: 1, hardExpireAt: 2, loadMs };
}

describe('LoadDurations: when a lease holder counts as stuck', () => {
  it('deems a holder of a key whose loads it never saw stuck after MIN_STUCK_MS, at most waitTimeout', () => {
    expect(new LoadDurations().stuckAfterMs('k', 5_000)).toBe(MIN_STUCK_MS);
    expect(new LoadDurations().stuckAfterMs('k', 300)).toBe(300);
  });

  it('deems a holder stuck after a few times the usual load time, at least MIN_STUCK_MS and at most waitTimeout', () => {
    const durations = new LoadDurations();
    durations.record('fast', loaded(1, 100));
    durations.record('slow', loaded(1, 600));
    durations.record('slower', loaded(1, 4_000));
    expect(durations.stuckAfterMs('fast', 5_000)).toBe(MIN_STUCK_MS);
    expect(durations.stuckAfterMs('slow', 5_000)).toBe(STUCK_FACTOR * 600);
    expect(durations.stuckAfterMs('slower', 5_000)).toBe(5_000);
    // A waitTimeout below the floor is the bound.
    expect(durations.stuckAfterMs('fast', 300)).toBe(300);
  });

  it('does not count a value written with set() (load time 0) as a load: a slow key stays slow', () => {
    const durations = new LoadDurations();
    durations.record('written', loaded(1, 0));
    expect(durations.usualMs('written')).toBeUndefined();
    durations.record('slow', loaded(1, 3_000));
    for (let version = 2; version < 20; version += 1) durations.record('slow', loaded(version, 0));
    expect(durations.usualMs('slow')).toBe(3_000);
  });

  it('counts each load once (by version) and smooths a key load time over its loads', () => {
    const durations = new LoadDurations();
    durations.record('k', loaded(1, 100));
    // The same entry seen again by other fills is not another load.
    for (let i = 0; i < 10; i += 1) durations.record('k', loaded(1, 100));
    durations.record('k', loaded(2, 500));
    expect(durations.usualMs('k')).toBe(200);
  });

  it('remembers a bounded number of keys, dropping the least recently recorded', () => {
    const durations = new LoadDurations(3);
    for (const key of ['a', 'b', 'c']) durations.record(key, loaded(1, 10));
    durations.record('a', loaded(2, 10));
    durations.record('d', loaded(1, 10));
    expect(durations.size).toBe(3);
    expect(durations.usualMs('b')).toBeUndefined();
    expect(durations.usualMs('a')).toBe(10);
    for (let i = 0; i < 10_000; i += 1) durations.record(`key-${i}`, loaded(1, 10));
    expect(durations.size).toBe(3);
  });
});
