import { describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { HerdEvent } from '../../lib/index.js';
import { keyPart } from '../../lib/stores/redis/fill-message.js';
import {
  previousDecodeEntry,
  previousDecodeFillMessage,
  previousEnvelope,
} from '../fixtures/format-v2/previous-decoders.js';
import {
  PREVIOUS_ACQUIRE_LEASE,
  PREVIOUS_FILL,
  PREVIOUS_INVALIDATE,
  PREVIOUS_SET_VALUE,
} from '../fixtures/format-v2/previous-scripts.js';
import { counted } from '../helpers/counted.js';
import { until } from '../helpers/deferred.js';
import { told } from '../helpers/notifications.js';
import { type RedisPod, useRedisServer } from '../helpers/redis-fixture.js';

/*
 * A rolling deploy runs two consecutive releases on one namespace. The previous release is played
 * by its own scripts and decoders, copied in test/fixtures/format-v2; a later release, by
 * envelopes and notifications of a format this one does not know.
 */
const redis = useRedisServer();
const HOUR_MS = 3_600_000;

let run = 0;

/** A pod of this release, and a raw connection standing for a pod of the previous one. */
async function setup() {
  run += 1;
  const namespace = `upgrade${run}`;
  const pod = await redis.pod({ url: redis.server.url, namespace });
  const raw = redis.server.client();
  redis.closeAfterTest({ close: async () => void raw.disconnect() });
  return { pod, raw, previous: new PreviousPod(raw, pod) };
}

/** What a pod of the previous release sends, through its own scripts. */
class PreviousPod {
  constructor(
    private readonly raw: Redis,
    private readonly pod: RedisPod,
  ) {}

  layout(key: string) {
    return this.pod.store.keys.for(key);
  }

  async acquire(key: string): Promise<{ token: string; fence: string }> {
    const { lease, version, value } = this.layout(key);
    const token = randomBytes(16).toString('base64url');
    const reply = (await this.raw.eval(
      PREVIOUS_ACQUIRE_LEASE,
      3,
      lease,
      version,
      value,
      token,
      10_000,
      '',
      'forced',
    )) as [number, string];
    expect(reply[0]).toBe(1);
    return { token, fence: reply[1] };
  }

  fill(key: string, lease: { token: string; fence: string }, value: unknown): Promise<unknown> {
    const layout = this.layout(key);
    const envelope = previousEnvelope({ version: Number(lease.fence), value, ...times() });
    return this.raw.eval(
      PREVIOUS_FILL,
      3,
      layout.value,
      layout.lease,
      layout.version,
      envelope,
      HOUR_MS,
      lease.fence,
      lease.token,
      this.pod.store.keys.channel,
      keyPart(key),
      16_384,
    );
  }

  set(key: string, value: unknown): Promise<unknown> {
    const layout = this.layout(key);
    const envelope = previousEnvelope({ version: 0, value, ...times() });
    return this.raw.eval(
      PREVIOUS_SET_VALUE,
      3,
      layout.value,
      layout.lease,
      layout.version,
      envelope,
      HOUR_MS,
      this.pod.store.keys.channel,
      keyPart(key),
      16_384,
    );
  }

  expire(key: string): Promise<unknown> {
    const layout = this.layout(key);
    return this.raw.eval(
      PREVIOUS_INVALIDATE,
      3,
      layout.value,
      layout.lease,
      layout.version,
      'stale',
      this.pod.store.keys.channel,
      keyPart(key),
    );
  }
}

function times() {
  const now = Date.now();
  return { createdAt: now, softExpireAt: now + HOUR_MS, hardExpireAt: now + 2 * HOUR_MS };
}

/** An envelope of a later release: a format this one does not know, under `version`. */
function laterEnvelope(version: number, value: unknown): string {
  const now = Date.now();
  return `{"v":3,"n":${version},"i":0,"c":${now},"s":${now + HOUR_MS},"h":${now + 2 * HOUR_MS},"d":0,"w":{"inputs":[]},"x":${JSON.stringify(value)}}`;
}

function events(pod: RedisPod): HerdEvent[] {
  const seen: HerdEvent[] = [];
  pod.engine.onEvent((event) => seen.push(event));
  return seen;
}

describe('the previous release and this one on one namespace', () => {
  it("this release reads the previous release's envelopes and notifications", async () => {
    const { pod, previous } = await setup();
    await previous.set('price', 100);
    await expect(pod.engine.read('price', () => 0)).resolves.toMatchObject({
      value: 100,
      path: 'fresh',
    });
    await previous.set('price', 200);
    await told(redis.server, pod.store);
    await expect(pod.engine.read('price', () => 0)).resolves.toMatchObject({
      value: 200,
      path: 'fresh',
    });
    await previous.expire('price');
    await told(redis.server, pod.store);
    await expect(pod.engine.peek('price')).resolves.toMatchObject({ value: 200, path: 'stale' });
  });

  it("the previous release reads this release's envelopes and notifications", async () => {
    const { pod, raw } = await setup();
    const heard: string[] = [];
    const listener = redis.server.client();
    redis.closeAfterTest({ close: async () => void listener.disconnect() });
    listener.on('message', (_channel: string, message: string) => heard.push(message));
    await listener.subscribe(pod.store.keys.channel);
    await pod.engine.getOrLoad('loaded', () => ({ id: 1 }));
    await pod.engine.set('written', 'v');
    await pod.engine.expire('written');
    const layout = pod.store.keys.for('loaded');
    expect(previousDecodeEntry(await raw.get(layout.value))).toMatchObject({ value: { id: 1 } });
    await until(() => heard.filter((message) => !message.startsWith('h:')).length >= 3);
    const decoded = heard.filter((m) => !m.startsWith('h:')).map(previousDecodeFillMessage);
    expect(decoded).toEqual([
      expect.objectContaining({ kind: 'fill', key: 'loaded', envelope: expect.any(String) }),
      expect.objectContaining({ kind: 'write', key: 'written', envelope: expect.any(String) }),
      expect.objectContaining({ kind: 'stale', key: 'written' }),
    ]);
    expect(previousDecodeEntry(decoded[1]!.envelope)).toMatchObject({ value: 'v' });
  });

  it("a previous-release pod's load answers this release's followers, and is not overwritten", async () => {
    const { pod, previous } = await setup();
    const lease = await previous.acquire('report');
    const loader = counted(() => 'loaded here');
    const followers = Promise.all([1, 2, 3].map(() => pod.engine.getOrLoad('report', loader)));
    await until(() => pod.store.watchers > 0, 5_000, 'a follower waiting');
    await expect(previous.fill('report', lease, 'by the previous release')).resolves.toBe(1);
    await expect(followers).resolves.toEqual(Array(3).fill('by the previous release'));
    expect(loader.calls).toBe(0);
  });
});

describe('clear() while the previous release runs', () => {
  it('is not seen by the previous release, but what it stores without knowing is served stale here', async () => {
    const { pod, previous, raw } = await setup();
    const lease = await previous.acquire('report');
    await pod.engine.clear('expire');
    // Its scripts know no clear marker: a load granted before the clear is stored, a write lands.
    await expect(previous.fill('report', lease, 'loaded before')).resolves.toBe(1);
    await previous.set('price', 200);
    const written = previousDecodeEntry(await raw.get(pod.store.keys.for('price').value));
    expect(written).toMatchObject({ value: 200 });
    expect(written?.invalidated).toBeUndefined();
    // Here, both predate the clear as far as the store can tell: stale once, then reloaded.
    await expect(pod.engine.read('report', () => 'reloaded')).resolves.toMatchObject({
      value: 'loaded before',
      path: 'stale',
    });
    await expect(pod.engine.read('price', () => 300)).resolves.toMatchObject({
      value: 200,
      path: 'stale',
    });
    await until(() => pod.engine.activity().inflight === 0);
    await expect(pod.engine.read('report', () => 'again')).resolves.toMatchObject({
      value: 'reloaded',
      path: 'fresh',
    });
    // And the previous release reads what this one reloaded.
    expect(previousDecodeEntry(await raw.get(pod.store.keys.for('price').value))).toMatchObject({
      value: 300,
    });
  });
});

describe('a format of a later release', () => {
  it('is a miss, and a load here never overwrites it (nor reports it corrupt)', async () => {
    const { pod, raw } = await setup();
    const seen = events(pod);
    const layout = pod.store.keys.for('k');
    const later = laterEnvelope(4_000_000_000_000_000, 'from a later release');
    await raw.set(layout.value, later, 'PX', HOUR_MS);
    await raw.set(layout.version, '4000000000000000', 'PX', HOUR_MS);
    await expect(pod.engine.read('k', () => 'loaded here')).resolves.toMatchObject({
      value: 'loaded here',
      path: 'miss',
    });
    await expect(raw.get(layout.value)).resolves.toBe(later);
    await expect(pod.engine.read('k', () => 'loaded again')).resolves.toMatchObject({
      value: 'loaded again',
      path: 'miss',
    });
    await expect(raw.get(layout.value)).resolves.toBe(later);
    expect(seen.filter((event) => event.type === 'corrupt-entry')).toEqual([]);
  });

  it('is deleted, not rewritten, by an invalidation here (this release cannot mark it stale)', async () => {
    const { pod, raw } = await setup();
    const layout = pod.store.keys.for('k');
    await raw.set(layout.value, laterEnvelope(5, 'later'), 'PX', HOUR_MS);
    await expect(pod.engine.expire('k')).resolves.toBe(true);
    await expect(raw.get(layout.value)).resolves.toBeNull();
  });

  it('in a notification drops the copy it replaces: the copy no longer answers', async () => {
    const { pod, raw } = await setup();
    await pod.engine.set('k', 'old');
    const layout = pod.store.keys.for('k');
    const version = Number(await raw.get(layout.version)) + 1;
    const later = laterEnvelope(version, 'later');
    await raw.set(layout.value, later, 'PX', HOUR_MS);
    await raw.set(layout.version, String(version), 'PX', HOUR_MS);
    // A later release publishing this release's message format, with its own envelope in it.
    await raw.publish(pod.store.keys.channel, `w:${version}:${keyPart('k')}${later}`);
    await told(redis.server, pod.store);
    await expect(pod.engine.read('k', () => 'loaded here')).resolves.toMatchObject({
      value: 'loaded here',
      path: 'miss',
    });
  });

  it("as a notification format of its own, drops the key's copy and wakes its followers", async () => {
    const { pod, raw } = await setup();
    await pod.engine.set('k', 'old');
    const layout = pod.store.keys.for('k');
    // Changed behind this pod's back; only the later release's message tells it.
    const version = Number(await raw.get(layout.version)) + 1;
    await raw.set(layout.value, previousEnvelope({ version, value: 'new', ...times() }));
    await raw.set(layout.version, String(version));
    const watch = pod.store.watchFill('k');
    const woken = watch.next(5_000);
    await raw.publish(pod.store.keys.channel, `@3:${version}:${keyPart('k')}\u0000anything`);
    await expect(woken).resolves.toBe(true);
    watch.close();
    await expect(pod.engine.read('k', () => 'loaded here')).resolves.toMatchObject({
      value: 'new',
      path: 'fresh',
    });
  });

  it('as a notification this release cannot parse at all, drops every copy', async () => {
    const { pod, raw } = await setup();
    await pod.engine.set('a', 'old a');
    await pod.engine.set('b', 'old b');
    for (const key of ['a', 'b']) {
      const layout = pod.store.keys.for(key);
      const version = Number(await raw.get(layout.version)) + 1;
      await raw.set(layout.value, previousEnvelope({ version, value: `new ${key}`, ...times() }));
      await raw.set(layout.version, String(version));
    }
    await raw.publish(pod.store.keys.channel, '@3:something else entirely');
    await told(redis.server, pod.store);
    await expect(pod.engine.getOrLoad('a', () => 'x')).resolves.toBe('new a');
    await expect(pod.engine.getOrLoad('b', () => 'x')).resolves.toBe('new b');
  });
});
