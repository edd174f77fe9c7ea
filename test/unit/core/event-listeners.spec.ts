import { afterEach, describe, expect, it, jest } from '@jest/globals';
import { HerdEngine, type HerdEvent, MemoryStore } from '../../../lib/index.js';
import { flush } from '../../helpers/deferred.js';

describe('event listeners that do not want reads', () => {
  afterEach(() => {
    jest.restoreAllMocks();
  });

  it('get every load event, and hits do no work for them', async () => {
    const engine = new HerdEngine({ store: new MemoryStore() });
    const events: HerdEvent['type'][] = [];
    engine.onEvent((event) => events.push(event.type), { reads: false });
    await engine.getOrLoad('k', () => 'v');
    expect(events).toEqual(['lease-acquired', 'load-ok']);
    await flush(); // the load's lease release

    // herd-guard's clock reads for read durations (the memory store's LRU keeps a clock of its own).
    let clockReads = 0;
    const now = performance.now.bind(performance);
    jest.spyOn(performance, 'now').mockImplementation(() => {
      if (!String(new Error().stack).includes('lru-cache')) clockReads += 1;
      return now();
    });
    for (let i = 0; i < 10; i += 1) await engine.getOrLoad('k', () => 'other');
    expect(clockReads).toBe(0);
    expect(events).toEqual(['lease-acquired', 'load-ok']);
    expect(engine.stats().reads.fresh).toBe(10);
    await engine.close();
  });

  it('leave reads to the listeners that want them', async () => {
    const engine = new HerdEngine({ store: new MemoryStore() });
    const loads: HerdEvent['type'][] = [];
    const all: HerdEvent['type'][] = [];
    const stop = engine.onEvent((event) => loads.push(event.type), { reads: false });
    engine.onEvent((event) => all.push(event.type));
    await engine.getOrLoad('k', () => 'v');
    await engine.getOrLoad('k', () => 'v');
    expect(loads).toEqual(['lease-acquired', 'load-ok']);
    expect(all).toEqual(['lease-acquired', 'load-ok', 'read', 'read']);
    stop();
    await engine.getOrLoad('k', () => 'v');
    expect(loads).toHaveLength(2);
    await engine.close();
  });
});
