import { HerdEngine, MemoryStore } from '../../lib/index.js';
import { describeInvalidationEdges } from './invalidation-edges.scenarios.js';

// Engines sharing one memory store stand for pods sharing one store.
describeInvalidationEdges('memory store', async ({ count, policy }) => {
  const store = new MemoryStore();
  const engines = Array.from({ length: count }, () => new HerdEngine({ store, policy }));
  return {
    engines,
    close: async () => {
      await Promise.all(engines.map((engine) => engine.close()));
      await store.close();
    },
  };
});
