import { describe, it } from '@jest/globals';
import { HerdEngine, MemoryStore } from '../../lib/index.js';
import { MODEL_POLICY, MODEL_TIMEOUT_MS, checkModel } from './engine.model.js';

describe('engine model on the memory store', () => {
  it(
    'keeps every promise of invalidation, expiry, leases and cleanup under random interleavings of 2-3 engines',
    async () => {
      await checkModel(async ({ offsetsMs }) => {
        const store = new MemoryStore();
        const engines = offsetsMs.map(
          (offsetMs) =>
            new HerdEngine({ store, policy: MODEL_POLICY, now: () => Date.now() + offsetMs }),
        );
        return {
          engines,
          watchers: () => store.watchers,
          close: async () => {
            await Promise.all(engines.map((engine) => engine.close()));
            await store.close();
          },
        };
      }, 25);
    },
    MODEL_TIMEOUT_MS,
  );
});
