import { HerdEngine, MemoryStore } from '../../lib/index.js';
import { describeAdaptiveCaching } from './adaptive-caching.scenarios.js';

// Engines sharing one memory store stand for pods sharing one store.
describeAdaptiveCaching('memory store', async ({ count, policy }) => {
  const store = new MemoryStore();
  const engines = Array.from({ length: count }, () => new HerdEngine({ store, policy }));
  return {
    engines,
    storedTtlMs: async (key) => {
      const found = await store.get(key);
      return found.entry === undefined || typeof found.entry === 'symbol'
        ? undefined
        : found.entry.hardExpireAt - Date.now();
    },
    close: async () => {
      await Promise.all(engines.map((engine) => engine.close()));
      await store.close();
    },
  };
});
