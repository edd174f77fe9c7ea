import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import type { Redis } from 'ioredis';
import { CLUSTER_SLOTS, slotOfTag, tagOfSlot } from '../../lib/stores/redis/cluster-slots.js';
import {
  encodeClearMessage,
  encodeFillMessage,
  isClearMessage,
} from '../../lib/stores/redis/fill-message.js';
import { RedisKeys } from '../../lib/stores/redis/redis-keys.js';
import {
  previousDecodeFillMessage,
  previousEnvelope,
} from '../fixtures/format-v2/previous-decoders.js';
import { deferred, until } from '../helpers/deferred.js';
import { told } from '../helpers/notifications.js';
import { type Pod, startPods, stopPods } from '../helpers/pods.js';
import { RedisClusterFixture, RedisServer, stopAllRedisServers } from '../helpers/redis-server.js';

/*
 * clear() on Redis: pods with near caches, a Redis Cluster (a marker per slot), and what a pod of
 * the previous release makes of it. The scenarios every store passes are in
 * test/contract/invalidation.scenarios.ts.
 */
let run = 0;
let opened: Pod[] = [];

afterEach(async () => {
  await stopPods(opened);
  opened = [];
});

afterAll(async () => {
  await stopAllRedisServers();
});

/** A row read at the start of each load, the value a load returns. */
function row(initial: string) {
  const state = { value: initial, loads: 0 };
  const loader = (gate?: Promise<void>) => async (): Promise<string> => {
    state.loads += 1;
    const seen = state.value;
    if (gate !== undefined) await gate;
    return seen;
  };
  return { state, loader };
}

async function idle(pods: readonly Pod[]): Promise<void> {
  await until(
    () =>
      pods.every(
        ({ engine }) => engine.activity().inflight === 0 && engine.activity().pendingStoreOps === 0,
      ),
    5_000,
    'every pod to be idle',
  );
}

describe('clear() on Redis with near caches', () => {
  let server: RedisServer;

  beforeAll(async () => {
    server = await RedisServer.start();
  });

  const pods = async (count: number): Promise<Pod[]> => {
    const started = await startPods({
      count,
      url: server.url,
      namespace: `clear${(run += 1)}`,
      policy: { soft: '1h' },
    });
    opened.push(...started);
    return started;
  };

  it.each(['expire', 'delete'] as const)(
    "serves no pre-clear value as fresh on any pod after clear('%s') returned and was heard",
    async (mode) => {
      const all = await pods(3);
      const { state, loader } = row('old');
      const keys = ['a', 'b', 'c'];
      for (const pod of all) for (const key of keys) await pod.engine.getOrLoad(key, loader());
      expect(all.every((pod) => pod.store.nearCache.entries === keys.length)).toBe(true);
      state.value = 'new';
      await all[0]!.engine.clear(mode);
      // The clearing pod at once; the others once the notification reached them.
      expect(all[0]!.store.nearCache.entries).toBe(0);
      for (const pod of all.slice(1)) await told(server, pod.store);
      for (const pod of all) {
        for (const key of keys) {
          const read = await pod.engine.read(key, loader());
          expect(read.path === 'fresh' && read.value === 'old').toBe(false);
          if (mode === 'delete') expect(read.value).toBe('new');
        }
      }
      await idle(all);
      for (const pod of all.slice(1)) await told(server, pod.store);
      for (const pod of all)
        for (const key of keys)
          await expect(pod.engine.read(key, loader())).resolves.toMatchObject({
            value: 'new',
            path: 'fresh',
          });
      expect(state.loads).toBe(keys.length * 2);
    },
  );

  it('fences a load running on another pod across clear(), and its near cache keeps no copy of it', async () => {
    const [loading, clearing] = await pods(2);
    const { state, loader } = row('old');
    const gate = deferred();
    const before = loading!.engine.getOrLoad('k', loader(gate.promise));
    await until(() => state.loads === 1);
    state.value = 'new';
    await clearing!.engine.clear('delete');
    await told(server, loading!.store);
    gate.resolve();
    await expect(before).resolves.toBe('old');
    await idle([loading!, clearing!]);
    for (const pod of [loading!, clearing!])
      await expect(pod.engine.read('k', loader())).resolves.toMatchObject({ value: 'new' });
    await told(server, loading!.store);
    await expect(loading!.engine.read('k', loader())).resolves.toMatchObject({
      value: 'new',
      path: 'fresh',
    });
  });

  it('applies a clear to a key at its next touch only: one settle, then plain reads', async () => {
    const [pod] = await pods(1);
    await pod!.engine.getOrLoad('k', async () => 'v');
    const raw = server.client();
    try {
      const layout = pod!.store.keys.for('k');
      await expect(raw.get(layout.cleared)).resolves.toBeNull();
      await pod!.engine.clear('expire');
      await expect(raw.get(layout.marker)).resolves.toMatch(/^\d+:0$/);
      // Untouched keys are not visited: the value is still the pre-clear envelope.
      await expect(raw.get(layout.value)).resolves.toContain('"i":0');
      await expect(pod!.engine.read('k', async () => 'w')).resolves.toMatchObject({
        path: 'stale',
      });
      await expect(raw.get(layout.cleared)).resolves.toBe(
        (await raw.get(layout.marker))!.split(':')[0],
      );
      await expect(raw.pttl(layout.cleared)).resolves.toBeGreaterThan(0);
    } finally {
      raw.disconnect();
    }
  });

  it.each([
    ['keeps', false],
    ['does not keep', true],
  ])(
    '%s the envelope of a fill notification heard just after a clear (clear heard: %s)',
    async (_label, clearFirst) => {
      // On a Cluster a fill published on another node before the clear may arrive after it.
      const [pod] = await pods(1);
      const raw = server.client();
      const watch = pod!.store.watchFill('k');
      try {
        if (clearFirst) await raw.publish(pod!.store.keys.channel, encodeClearMessage(1));
        const now = Date.now();
        const envelope = previousEnvelope({
          version: 5,
          value: 'before the clear',
          createdAt: now,
          softExpireAt: now + 3_600_000,
          hardExpireAt: now + 7_200_000,
        });
        await raw.publish(pod!.store.keys.channel, encodeFillMessage('fill', 5, 'k', envelope));
        await told(server, pod!.store);
        expect(pod!.store.nearCache.entries).toBe(clearFirst ? 0 : 1);
      } finally {
        watch.close();
        raw.disconnect();
      }
    },
  );

  it('publishes one message, which the previous release ignores', async () => {
    const [pod] = await pods(1);
    const raw = server.client();
    const messages: string[] = [];
    raw.on('message', (_channel: string, message: string) => messages.push(message));
    try {
      await raw.subscribe(pod!.store.keys.channel);
      await pod!.engine.clear();
      await until(() => messages.some(isClearMessage), 5_000, 'the clear message');
      const clear = messages.find(isClearMessage)!;
      expect(previousDecodeFillMessage(clear)).toBeUndefined();
    } finally {
      raw.disconnect();
    }
  });
});

describe('clear() on a Redis Cluster (3 masters)', () => {
  let cluster: RedisClusterFixture;

  beforeAll(async () => {
    cluster = await RedisClusterFixture.start();
  });

  describe('slots', () => {
    let node: Redis;
    /** The slot of a key, as Redis Cluster computes it. */
    const slotOf = async (key: string): Promise<number> =>
      Number(await node.call('CLUSTER', 'KEYSLOT', key));

    beforeAll(() => {
      node = cluster.servers[0]!.client();
    });

    afterAll(() => {
      node.disconnect();
    });

    it('hashes a tag to the slot Redis Cluster gives it', async () => {
      for (const tag of ['k', 'product:1', '#abc', 'user:x', 'a'.repeat(128)])
        expect(slotOfTag(tag)).toBe(await slotOf(`{${tag}}`));
    });

    it('has a tag for every slot, that lands on it', async () => {
      const tags = Array.from({ length: CLUSTER_SLOTS }, (_, slot) => tagOfSlot(slot));
      const slots = await Promise.all(tags.map((tag) => slotOf(`x:{${tag}}`)));
      expect(slots).toEqual(Array.from({ length: CLUSTER_SLOTS }, (_, slot) => slot));
    });

    it("puts a key's clear marker in the key's slot, and one marker without a Cluster", async () => {
      const keys = new RedisKeys('ns', { cluster: true });
      for (const key of ['a', 'product:9', 'x'.repeat(300)]) {
        const layout = keys.for(key);
        expect(await slotOf(layout.marker)).toBe(await slotOf(layout.value));
      }
      expect(keys.markers()).toHaveLength(CLUSTER_SLOTS);
      expect(new RedisKeys('ns').markers()).toEqual(['ns:c']);
      expect(new RedisKeys('ns').for('a').marker).toBe('ns:c');
    });
  });

  it('clears keys in every slot, fences a running load, and leaves later writes alone', async () => {
    const pods = await startPods({
      count: 2,
      clusterNodes: cluster.nodes,
      namespace: 'cleared',
      policy: { soft: '1h' },
    });
    opened.push(...pods);
    const [first, second] = [pods[0]!, pods[1]!];
    const keys = Array.from({ length: 30 }, (_, i) => `product:${i}`);
    const { state, loader } = row('old');
    for (const key of keys) await first.engine.getOrLoad(key, loader());
    state.value = 'new';
    await second.engine.clear('expire');
    // The other pod's copies go when the notification reaches it (through the cluster bus).
    await until(() => first.store.nearCache.entries === 0, 5_000, 'the clear notification');
    for (const key of keys)
      await expect(first.engine.read(key, loader())).resolves.toMatchObject({
        value: 'old',
        path: 'stale',
      });
    await idle(pods);
    for (const key of keys)
      await expect(second.engine.read(key, loader())).resolves.toMatchObject({
        value: 'new',
        path: 'fresh',
      });

    const gate = deferred();
    const running = first.engine.getOrLoad('slow', loader(gate.promise));
    await until(() => state.loads === keys.length * 2 + 1);
    state.value = 'newer';
    await second.engine.clear('delete');
    await second.engine.set('written', 'after');
    gate.resolve();
    await expect(running).resolves.toBe('new');
    await idle(pods);
    for (const pod of pods) {
      await expect(pod.engine.peek(keys[0]!)).resolves.toBeUndefined();
      await expect(pod.engine.read('slow', loader())).resolves.toMatchObject({ value: 'newer' });
      await expect(pod.engine.read('written', loader())).resolves.toMatchObject({
        value: 'after',
        path: 'fresh',
      });
    }
  });
});
