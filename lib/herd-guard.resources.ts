import { HerdEngine } from './core/herd-engine.js';
import { validateModuleOptions } from './herd-guard-options.validator.js';
import type { HerdGuardModuleOptions } from './interfaces/herd-guard-module-options.interface.js';
import type { HerdStore } from './stores/herd-store.interface.js';
import { MemoryStore } from './stores/memory/memory.store.js';

/** What one module instance runs on. Written once at module start, closed once on shutdown. */
export interface HerdGuardResources {
  readonly options: HerdGuardModuleOptions;
  readonly engine: HerdEngine;
  /** The store the module opened (memory or Redis), closed on shutdown; `undefined` for a store you passed. */
  readonly ownedStore: HerdStore | undefined;
}

/** Validates the options, then opens the store (unless one was given) and the engine over it. */
export async function openResources(input: unknown): Promise<HerdGuardResources> {
  const options = validateModuleOptions(input);
  const ownedStore = options.store === undefined ? await openStore(options) : undefined;
  const store = options.store ?? (ownedStore as HerdStore);
  try {
    return { options, engine: new HerdEngine({ store, policy: options.policy }), ownedStore };
  } catch (error) {
    await ownedStore?.close();
    throw error;
  }
}

/** Stops the engine (running loaders see their signal fire), then closes the store the module opened. */
export async function closeResources(resources: HerdGuardResources): Promise<void> {
  await resources.engine.close();
  await resources.ownedStore?.close();
}

async function openStore(options: HerdGuardModuleOptions): Promise<HerdStore> {
  if (options.redis === undefined) return new MemoryStore(options.memory);
  // Loaded only when Redis is configured, so this module does not tie an app to ioredis.
  const { RedisStore } = await import('./stores/redis/redis.store.js');
  const redis = typeof options.redis === 'string' ? { url: options.redis } : options.redis;
  const store = new RedisStore(options.namespace === undefined ? redis : { namespace: options.namespace, ...redis });
  // Let the first requests find a connection; Redis being down is not fatal (the store starts degraded).
  await store.ready();
  return store;
}
