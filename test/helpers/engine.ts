import { HerdEngine, type HerdEngineOptions, MemoryStore } from '../../lib/index.js';

/** An engine over a store of its own in memory, as the module opens by default. */
export function memoryEngine(options: Omit<HerdEngineOptions, 'store'> = {}): HerdEngine {
  return new HerdEngine({ store: new MemoryStore(), ...options });
}
