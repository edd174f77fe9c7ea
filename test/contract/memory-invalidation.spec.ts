import { HerdEngine, MemoryStore } from '../../lib/index.js';
import { describeInvalidation } from './invalidation.scenarios.js';

// Engines sharing one memory store stand for pods sharing one store; each has its own clock.
describeInvalidation('memory store', async ({ count, policy, clockOffsetsMs }) => {
  const store = new MemoryStore();
  const engines = Array.from({ length: count }, (_, i) => {
    const offsetMs = clockOffsetsMs?.[i] ?? 0;
    return new HerdEngine({ store, policy, now: () => Date.now() + offsetMs });
  });
  return {
    engines,
    close: async () => {
      await Promise.all(engines.map((engine) => engine.close()));
      await store.close();
    },
  };
});
