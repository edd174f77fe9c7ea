import { type CachePolicy, HerdEngine } from '../../lib/index.js';
import { RedisStore, type RedisStoreOptions } from '../../lib/redis.js';
import { FaultProxy } from '../helpers/fault-proxy.js';
import type { RedisServer } from '../helpers/redis-server.js';
import { SplitConnections } from '../helpers/split-connections.js';
import {
  MODEL_POLICY,
  type ModelCluster,
  type ModelFaults,
  type ModelSetup,
} from './engine.model.js';

/** How the pods of a Redis model cluster reach their server. */
export interface RedisModelOptions {
  readonly server: RedisServer;
  readonly namespace: string;
  readonly store: Omit<RedisStoreOptions, 'url' | 'client' | 'namespace'>;
  /** Default MODEL_POLICY. */
  readonly policy?: CachePolicy;
}

/**
 * Pods over one redis-server for a model scenario, with the server's faults: each pod's commands go
 * straight to Redis and its notifications through a proxy that delays them as the scenario says.
 */
export async function redisModelCluster(
  setup: ModelSetup,
  options: RedisModelOptions,
): Promise<ModelCluster> {
  const { server } = options;
  const proxies: FaultProxy[] = [];
  const clients: SplitConnections[] = [];
  const stores: RedisStore[] = [];
  for (let pod = 0; pod < setup.offsetsMs.length; pod += 1) {
    const notifications = await FaultProxy.start(server);
    notifications.delay(setup.notificationDelaysMs[pod] ?? 0, 'toClient');
    proxies.push(notifications);
    const client = new SplitConnections(
      { host: server.host, port: server.port, enableOfflineQueue: false, maxRetriesPerRequest: 0 },
      notifications.port,
    );
    client.on('error', () => undefined);
    clients.push(client);
    stores.push(new RedisStore({ ...options.store, client, namespace: options.namespace }));
  }
  await Promise.all(stores.map((store) => store.ready(10_000)));
  const engines = stores.map(
    (store, i) =>
      new HerdEngine({
        store,
        policy: options.policy ?? MODEL_POLICY,
        now: () => Date.now() + setup.offsetsMs[i]!,
      }),
  );
  const faults = new ServerFaults(server);
  return {
    engines,
    faults,
    watchers: () => stores.reduce((sum, store) => sum + store.watchers, 0),
    close: async () => {
      await faults.settled();
      await Promise.all(engines.map((engine) => engine.close()));
      await Promise.all(stores.map((store) => store.close()));
      for (const client of clients) client.disconnect();
      await Promise.all(proxies.map((proxy) => proxy.stop()));
    },
  };
}

/** Stalls and restarts of one redis-server, one at a time. */
class ServerFaults implements ModelFaults {
  /** The last fault started; the next one starts when it ends. */
  #last: Promise<void> = Promise.resolve();

  constructor(private readonly server: RedisServer) {}

  stall(durationMs: number): Promise<void> {
    return this.#then(() => this.server.pause(durationMs));
  }

  restart(): Promise<void> {
    return this.#then(async () => {
      await this.server.kill();
      await this.server.restart();
    });
  }

  /** Resolves once every fault started so far has ended (the server runs, thawed). */
  settled(): Promise<void> {
    return this.#last;
  }

  #then(fault: () => Promise<void>): Promise<void> {
    this.#last = this.#last.then(fault, fault);
    return this.#last;
  }
}
