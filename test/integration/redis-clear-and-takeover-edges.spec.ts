import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { HerdEngine } from '../../lib/index.js';
import { RedisStore } from '../../lib/redis.js';
import { isClearMessage } from '../../lib/stores/redis/fill-message.js';
import { told } from '../helpers/notifications.js';
import { type Pod, startPods, stopPods } from '../helpers/pods.js';
import { RedisServer, stopAllRedisServers } from '../helpers/redis-server.js';

/*
 * Edges of clear(), loader-chosen TTLs and stuck takeovers on a real Redis: a clear whose
 * notification is lost, a TTL longer than Redis can store, a clear with Redis unreachable, a
 * takeover asked right after a delete.
 */
let run = 0;
let opened: Pod[] = [];
let server: RedisServer;

beforeAll(async () => {
  server = await RedisServer.start();
});

afterEach(async () => {
  await stopPods(opened);
  opened = [];
});

afterAll(async () => {
  await stopAllRedisServers();
});

/** A row read at the start of each load. */
function row(initial: string) {
  const state = { value: initial, loads: 0 };
  const loader = async (): Promise<string> => {
    state.loads += 1;
    return state.value;
  };
  return { state, loader };
}

describe('clear() whose notification does not go out', () => {
  it('serves no pre-clear value as fresh on another pod once Redis applied the clear', async () => {
    const namespace = `break-clear${(run += 1)}`;
    // The clearing pod's connection: the clear markers reach Redis, then the PUBLISH that tells the
    // other pods fails (what a connection reset or a command timeout right after the marker write
    // does; the marker script itself publishes nothing).
    const client = server.client();
    const publish = client.publish.bind(client);
    let dropClearMessages = false;
    client.publish = ((channel: string, message: string) =>
      dropClearMessages && isClearMessage(String(message))
        ? Promise.reject(new Error('connection reset by peer'))
        : publish(channel, message)) as typeof client.publish;
    const clearingStore = new RedisStore({ client, namespace });
    const clearing = new HerdEngine({ store: clearingStore, policy: { soft: '1h' } });
    const [reader] = await startPods({
      count: 1,
      url: server.url,
      namespace,
      policy: { soft: '1h' },
    });
    opened.push(reader!, { store: clearingStore, engine: clearing });
    expect(await clearingStore.ready(10_000)).toBe(true);

    const { state, loader } = row('old');
    await expect(reader!.engine.getOrLoad('k', loader)).resolves.toBe('old');
    expect(reader!.store.nearCache.entries).toBe(1);
    state.value = 'new';

    dropClearMessages = true;
    // Whether clear() reports a failure or not, Redis applied it (the markers were written).
    await clearing.clear('delete').catch(() => undefined);
    const raw = server.client();
    try {
      const marker = await raw.get(clearingStore.keys.for('k').marker);
      expect(marker).toMatch(/^\d+:\d+$/);
    } finally {
      raw.disconnect();
    }
    // Redis's word now: 'k' is gone. A copy is only as fresh as the store's word for it.
    await told(server, reader!.store);
    const read = await reader!.engine.read('k', loader);
    expect({ value: read.value, path: read.path }).not.toEqual({ value: 'old', path: 'fresh' });
  });
});

describe('a TTL a loader chooses that Redis cannot store', () => {
  it('caches a value whose loader chooses a lifetime longer than Redis can store', async () => {
    const [pod] = await startPods({
      count: 1,
      url: server.url,
      namespace: `break-ttl${(run += 1)}`,
      policy: { soft: '1m' },
    });
    opened.push(pod!);
    const { state, loader } = row('v');
    // A lifetime the policy check accepts (a finite number of ms) but Redis's PX cannot hold; what
    // ttlFromCacheControl asked for on `max-age=99999999999999999` before it was capped.
    const chooser = async (context: { setPolicy(policy: { soft: number }): void }) => {
      context.setPolicy({ soft: 1e20 });
      return loader();
    };
    await expect(pod!.engine.getOrLoad('k', chooser)).resolves.toBe('v');
    await expect(pod!.engine.read('k', chooser)).resolves.toMatchObject({
      value: 'v',
      path: 'fresh',
    });
    expect(state.loads).toBe(1);
  });
});

describe('clear() while Redis is unreachable', () => {
  it('rejects instead of resolving as if every key were cleared', async () => {
    const scratch = await RedisServer.start();
    const [pod] = await startPods({
      count: 1,
      url: scratch.url,
      namespace: `break-down${(run += 1)}`,
      store: { commandTimeout: '200ms' },
    });
    opened.push(pod!);
    await scratch.kill();
    await expect(pod!.engine.clear('delete')).rejects.toThrow();
  });
});

describe('a stuck takeover asked right after a delete', () => {
  it("does not store the hung holder's pre-delete value as fresh", async () => {
    const namespace = `break-stuck${(run += 1)}`;
    const policy = { soft: '1h', waitTimeout: '1s' } as const;
    const [holder, deleter] = await startPods({ count: 2, url: server.url, namespace, policy });
    opened.push(holder!, deleter!);
    // The follower's connection: a delete from another pod lands in the round trip between its
    // last look at the holder and its takeover attempt (modelled by sending it just before).
    const client = server.client();
    const followerStore = new RedisStore({ client, namespace });
    const follower = new HerdEngine({ store: followerStore, policy });
    opened.push({ store: followerStore, engine: follower });
    expect(await followerStore.ready(10_000)).toBe(true);
    const commands = client as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>;
    const acquire = commands['herdGuardAcquire']!.bind(client);
    let deleted = false;
    commands['herdGuardAcquire'] = async (...args: unknown[]) => {
      // The arguments end with takeoverFrom and the kind of takeover (see ACQUIRE_LEASE).
      if (!deleted && args.at(-1) === 'stuck' && args.at(-2) !== '') {
        deleted = true;
        await deleter!.engine.delete('k');
      }
      return acquire(...args);
    };

    let releaseHolder!: () => void;
    const holderGate = new Promise<void>((resolve) => (releaseHolder = resolve));
    let releaseRescuer!: () => void;
    const rescuerGate = new Promise<void>((resolve) => (releaseRescuer = resolve));
    let rescuerStarted = false;
    const hung = holder!.engine.getOrLoad('k', async () => {
      await holderGate;
      return 'loaded before the delete';
    });
    await new Promise((resolve) => setTimeout(resolve, 50));
    const waiting = follower.getOrLoad('k', async () => {
      rescuerStarted = true;
      await rescuerGate;
      return 'rescuer';
    });
    const deadline = Date.now() + 5_000;
    while (!(deleted && rescuerStarted) && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 20));
    expect(deleted && rescuerStarted).toBe(true);
    releaseHolder();
    await hung.catch(() => undefined);
    await told(server, deleter!.store);
    const read = await deleter!.engine.peek<string>('k');
    releaseRescuer();
    await waiting.catch(() => undefined);
    expect({ value: read?.value, path: read?.path }).not.toEqual({
      value: 'loaded before the delete',
      path: 'fresh',
    });
  });
});
