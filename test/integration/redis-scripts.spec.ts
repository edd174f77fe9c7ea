import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import type { Redis } from 'ioredis';
import {
  ACQUIRE_LEASE,
  ADD_TO_INDEX,
  EXTEND_LEASE,
  END_LEASE,
  HEDGE,
  FILL,
  INDEX_MEMBERS,
  INVALIDATED_AT,
  INVALIDATE,
  RELEASE_LEASE,
  type RedisScript,
  SET_VALUE,
  type ScriptTarget,
} from '../../lib/stores/redis/redis-scripts.js';
import { sleep, until } from '../helpers/deferred.js';
import { RedisServer, stopAllRedisServers } from '../helpers/redis-server.js';

/*
 * Each script run by EVAL with its KEYS and ARGV written out here in wire order, pinning what Redis
 * receives (the script's `args` must lay its call out exactly so) and what it answers: reply
 * shapes, stored bytes, TTLs and published messages.
 */

/**
 * A version above Redis TIME in microseconds (until 2096): a script that advances it from here
 * gives exactly the next integer.
 */
const V = 4_000_000_000_000_000;
const KEY = 'k';
const KEY_PART = '1\nk';
/** Longer than MAX_BROADCAST_ENVELOPE: not broadcast. */
const LARGE = 'x'.repeat(16_384);

let server: RedisServer;
let client: Redis;
let subscriber: Redis;
let run = 0;
let keys: {
  value: string;
  lease: string;
  version: string;
  cleared: string;
  marker: string;
  index: string;
  channel: string;
};
let messages: string[] = [];

beforeAll(async () => {
  server = await RedisServer.start();
  client = server.client();
  subscriber = server.client();
  subscriber.on('message', (_channel: string, message: string) => messages.push(message));
});

beforeEach(async () => {
  run += 1;
  const base = `scripts${run}:{k}`;
  keys = {
    value: `${base}:v`,
    lease: `${base}:l`,
    version: `${base}:n`,
    cleared: `${base}:c`,
    marker: `scripts${run}:c`,
    index: `${base}:i`,
    channel: `scripts${run}:fill`,
  };
  await subscriber.subscribe(keys.channel);
  messages = [];
});

afterEach(async () => {
  await subscriber.unsubscribe(keys.channel);
});

afterAll(async () => {
  subscriber.disconnect();
  client.disconnect();
  await stopAllRedisServers();
});

/** Runs `script` for `call`, once its `args` is checked to lay the call out as `keyNames` then `argv`. */
function evalScript<Call>(
  script: RedisScript<Call>,
  call: Call,
  wire: { keys: string[]; argv: Array<string | number> },
): Promise<unknown> {
  expect(script.numberOfKeys).toBe(wire.keys.length);
  expect(script.args(call)).toEqual([...wire.keys, ...wire.argv]);
  return client.eval(script.lua, wire.keys.length, ...wire.keys, ...wire.argv);
}

function layout() {
  const { value, lease, version, cleared, marker } = keys;
  return { value, lease, version, cleared, marker };
}

function target(): ScriptTarget {
  return { key: KEY, layout: layout(), channel: keys.channel };
}

/** The messages published on the channel so far: a marker published now arrives after them. */
async function published(): Promise<string[]> {
  const marker = `marker-${Math.random()}`;
  await client.publish(keys.channel, marker);
  await until(() => messages.includes(marker), 5_000, 'the marker message');
  return messages.filter((message) => message !== marker);
}

function envelope(version: number | string, invalidated: 0 | 1 = 0, value = 'x'): string {
  return `{"v":2,"n":${version},"i":${invalidated},"c":1,"s":2,"h":3,"d":0,"x":${JSON.stringify(value)}}`;
}

describe('ACQUIRE_LEASE (KEYS lease, version, value; ARGV token, ttl ms, takeover from, takeover)', () => {
  const acquire = (token: string, takeoverFrom?: number, takeover: 'stuck' | 'forced' = 'forced') =>
    evalScript(
      ACQUIRE_LEASE,
      { layout: layout(), token, ttlMs: 5_000, takeoverFrom, takeover },
      {
        keys: [keys.lease, keys.version, keys.value, keys.cleared, keys.marker],
        argv: [token, 5_000, takeoverFrom === undefined ? '' : String(takeoverFrom), takeover],
      },
    );

  it('grants a free lease: {1, next version, envelope, 0, nil}, the version kept for an hour', async () => {
    await client.set(keys.version, String(V));
    await client.set(keys.value, envelope(V));
    await expect(acquire('t1')).resolves.toEqual([1, String(V + 1), envelope(V), 0, null]);
    await expect(client.get(keys.lease)).resolves.toBe('t1');
    expect(await client.pttl(keys.lease)).toBeGreaterThan(4_000);
    await expect(client.get(keys.version)).resolves.toBe(String(V + 1));
    expect(await client.pttl(keys.version)).toBeGreaterThan(3_590_000);
  });

  it('starts an absent version above Redis TIME and answers an absent value as nil', async () => {
    const [granted, version, current, repaired] = (await acquire('t1')) as [
      number,
      string,
      unknown,
      number,
    ];
    expect([granted, current, repaired]).toEqual([1, null, 0]);
    expect(version).toMatch(/^\d{16}$/);
    expect(Number(version)).toBeGreaterThan(Date.now() * 1_000 - 60_000_000);
    await expect(client.get(keys.version)).resolves.toBe(version);
  });

  it('refuses a held lease: {0, current version, envelope, 0, nil}', async () => {
    await client.set(keys.version, String(V));
    await client.set(keys.lease, 'holder');
    await expect(acquire('t1')).resolves.toEqual([0, String(V), null, 0, null]);
    await expect(client.get(keys.lease)).resolves.toBe('holder');
    await expect(client.get(keys.version)).resolves.toBe(String(V));
  });

  it('answers version 0 when the version key is absent and the lease is held', async () => {
    await client.set(keys.lease, 'holder');
    await expect(acquire('t1')).resolves.toEqual([0, '0', null, 0, null]);
  });

  it('takes over a held lease still at the given version, and not at another', async () => {
    await client.set(keys.version, String(V));
    await client.set(keys.lease, 'holder');
    await expect(acquire('t1', V - 1)).resolves.toEqual([0, String(V), null, 0, null]);
    await expect(acquire('t1', V)).resolves.toEqual([1, String(V + 1), null, 0, null]);
    await expect(client.get(keys.lease)).resolves.toBe('t1');
  });

  it('does not take over as stuck a lease already taken over as stuck, but does when forced', async () => {
    await client.set(keys.version, String(V));
    await client.set(keys.lease, `s.${V - 1}.rescuer`);
    await expect(acquire(`s.${V}.t1`, V, 'stuck')).resolves.toEqual([0, String(V), null, 0, null]);
    await expect(acquire('t2', V, 'forced')).resolves.toEqual([1, String(V + 1), null, 0, null]);
    await expect(client.get(keys.lease)).resolves.toBe('t2');
  });

  it('removes foreign data at the lease key (repaired 1) and reports foreign data at the value key', async () => {
    await client.set(keys.version, String(V));
    await client.hset(keys.lease, 'field', 'value');
    await client.hset(keys.value, 'field', 'value');
    await expect(acquire('t1')).resolves.toEqual([1, String(V + 1), 'herd-guard:foreign', 1, null]);
    await expect(client.get(keys.lease)).resolves.toBe('t1');
  });

  it('refuses while an outcome record is held and answers the record; a takeover as stuck does not pass it', async () => {
    await client.set(keys.version, String(V));
    const pass = `o.p.${V}.0.0.`;
    await client.set(keys.lease, pass, 'PX', 5_000);
    await expect(acquire('t1')).resolves.toEqual([0, String(V), null, 0, pass]);
    await expect(acquire(`s.${V}.t1`, V, 'stuck')).resolves.toEqual([0, String(V), null, 0, pass]);
    await expect(client.get(keys.lease)).resolves.toBe(pass);
  });

  it("lets one lease in after a failure's retry time and hands it the failure record", async () => {
    await client.set(keys.version, String(V));
    const retryAt = Date.now() + 60_000;
    const held = `o.f.${V}.${retryAt}.2.{"name":"Error","message":"db down"}`;
    await client.set(keys.lease, held, 'PX', 120_000);
    await expect(acquire('t1')).resolves.toEqual([0, String(V), null, 0, held]);
    const due = `o.f.${V}.${Date.now() - 1}.2.{"name":"Error","message":"db down"}`;
    await client.set(keys.lease, due, 'PX', 120_000);
    // A takeover as stuck from another version is refused, and leaves the due record in place.
    await expect(acquire(`s.${V - 1}.t0`, V - 1, 'stuck')).resolves.toEqual([
      0,
      String(V),
      null,
      0,
      due,
    ]);
    await expect(client.get(keys.lease)).resolves.toBe(due);
    await expect(acquire('t1')).resolves.toEqual([1, String(V + 1), null, 0, due]);
    await expect(acquire('t2')).resolves.toEqual([0, String(V + 1), null, 0, null]);
    await expect(client.get(keys.lease)).resolves.toBe('t1');
  });
});

describe('FILL (KEYS value, lease, version; ARGV envelope, px ms, fence, token, channel, key part, max broadcast)', () => {
  const fill = (body: string, token: string, fence: number) =>
    evalScript(
      FILL,
      { target: target(), envelope: body, ttlMs: 60_000, fence, token },
      {
        keys: [keys.value, keys.lease, keys.version, keys.cleared, keys.marker],
        argv: [body, 60_000, String(fence), token, keys.channel, KEY_PART, 16_384],
      },
    );

  it('writes at the fence as given, releases the lease and broadcasts f:<version>:<key part><envelope>', async () => {
    await client.set(keys.version, String(V));
    await client.set(keys.lease, 't1');
    await expect(fill(envelope(7), 't1', V)).resolves.toBe(1);
    await expect(client.get(keys.value)).resolves.toBe(envelope(7));
    expect(await client.pttl(keys.value)).toBeGreaterThan(59_000);
    await expect(client.exists(keys.lease)).resolves.toBe(0);
    await expect(published()).resolves.toEqual([`f:${V}:${KEY_PART}${envelope(7)}`]);
  });

  it('leaves out an envelope longer than the max broadcast', async () => {
    await client.set(keys.version, String(V));
    await expect(fill(envelope(V, 0, LARGE), 'other', V)).resolves.toBe(1);
    await expect(client.exists(keys.lease)).resolves.toBe(0);
    await expect(published()).resolves.toEqual([`f:${V}:${KEY_PART}`]);
  });

  it('writes nothing past the fence; releases its own lease with r:<fence>:<key part>', async () => {
    await client.set(keys.version, String(V + 1));
    await client.set(keys.lease, 't1');
    await expect(fill(envelope(V), 't1', V)).resolves.toBe(0);
    await expect(client.exists(keys.value)).resolves.toBe(0);
    await expect(client.exists(keys.lease)).resolves.toBe(0);
    await expect(published()).resolves.toEqual([`r:${V}:${KEY_PART}`]);
  });

  it('never writes over an envelope of a later format; releases its own lease with r:', async () => {
    const later = envelope(V).replace('{"v":2,', '{"v":3,');
    await client.set(keys.version, String(V));
    await client.set(keys.value, later);
    await client.set(keys.lease, 't1');
    await expect(fill(envelope(V), 't1', V)).resolves.toBe(0);
    await expect(client.get(keys.value)).resolves.toBe(later);
    await expect(client.exists(keys.lease)).resolves.toBe(0);
    await expect(published()).resolves.toEqual([`r:${V}:${KEY_PART}`]);
  });

  it("writes nothing past the fence and leaves another's lease, silently", async () => {
    await client.set(keys.version, String(V + 1));
    await client.set(keys.lease, 'other');
    await expect(fill(envelope(V), 't1', V)).resolves.toBe(0);
    await expect(client.exists(keys.value)).resolves.toBe(0);
    await expect(client.get(keys.lease)).resolves.toBe('other');
    await expect(published()).resolves.toEqual([]);
  });

  it('writes under the current version while the lease taken over as stuck from its fence is held', async () => {
    await client.set(keys.version, String(V + 1));
    await client.set(keys.lease, `s.${V}.rescuer`);
    await expect(fill(envelope(V, 1), 'slow', V)).resolves.toBe(1);
    await expect(client.get(keys.value)).resolves.toBe(envelope(V + 1, 1));
    await expect(client.get(keys.lease)).resolves.toBe(`s.${V}.rescuer`);
    await expect(published()).resolves.toEqual([`f:${V + 1}:${KEY_PART}${envelope(V + 1, 1)}`]);
  });

  it('rewrites the version of a rescued envelope without an "i" field too', async () => {
    await client.set(keys.version, String(V + 1));
    await client.set(keys.lease, `s.${V}.rescuer`);
    await expect(fill(`{"v":2,"n":${V},"x":1}`, 'slow', V)).resolves.toBe(1);
    await expect(client.get(keys.value)).resolves.toBe(`{"v":2,"n":${V + 1},"x":1}`);
  });

  it('does not write a rescued envelope without the header, nor under a stuck takeover from another fence', async () => {
    await client.set(keys.version, String(V + 1));
    await client.set(keys.lease, `s.${V}.rescuer`);
    await expect(fill('{"n":1,"v":2}', 'slow', V)).resolves.toBe(0);
    await client.set(keys.lease, `s.${V - 1}.rescuer`);
    await expect(fill(envelope(V), 'slow', V)).resolves.toBe(0);
    await expect(client.exists(keys.value)).resolves.toBe(0);
    await expect(published()).resolves.toEqual([]);
  });
});

describe('SET_VALUE (KEYS value, lease, version; ARGV envelope, px ms, channel, key part, max broadcast)', () => {
  const set = (body: string) =>
    evalScript(
      SET_VALUE,
      { target: target(), envelope: body, ttlMs: 60_000 },
      {
        keys: [keys.value, keys.lease, keys.version, keys.cleared, keys.marker],
        argv: [body, 60_000, keys.channel, KEY_PART, 16_384],
      },
    );

  it('writes the envelope under the next version, revokes the lease and broadcasts w:<version>:...', async () => {
    await client.set(keys.version, String(V));
    await client.set(keys.lease, 'holder');
    await expect(set(envelope(7, 1))).resolves.toBe(String(V + 1));
    await expect(client.get(keys.value)).resolves.toBe(envelope(V + 1, 1));
    expect(await client.pttl(keys.value)).toBeGreaterThan(59_000);
    await expect(client.exists(keys.lease)).resolves.toBe(0);
    await expect(published()).resolves.toEqual([`w:${V + 1}:${KEY_PART}${envelope(V + 1, 1)}`]);
  });

  it('rewrites the version of an envelope without an "i" field too', async () => {
    await client.set(keys.version, String(V));
    await expect(set('{"v":2,"n":7,"x":1}')).resolves.toBe(String(V + 1));
    await expect(client.get(keys.value)).resolves.toBe(`{"v":2,"n":${V + 1},"x":1}`);
  });

  it('leaves out an envelope longer than the max broadcast', async () => {
    await client.set(keys.version, String(V));
    await expect(set(envelope(7, 0, LARGE))).resolves.toBe(String(V + 1));
    await expect(published()).resolves.toEqual([`w:${V + 1}:${KEY_PART}`]);
  });

  it('rejects an envelope without the header before changing anything', async () => {
    await client.set(keys.version, String(V));
    await client.set(keys.lease, 'holder');
    await expect(set('{"n":1,"v":2}')).rejects.toThrow('ERR herd-guard: malformed envelope');
    await expect(client.get(keys.version)).resolves.toBe(String(V));
    await expect(client.get(keys.lease)).resolves.toBe('holder');
    await expect(client.exists(keys.value)).resolves.toBe(0);
    await expect(published()).resolves.toEqual([]);
  });
});

describe('INVALIDATE (KEYS value, lease, version; ARGV mode, channel, key part)', () => {
  const invalidate = (mode: 'stale' | 'delete') =>
    evalScript(
      INVALIDATE,
      { target: target(), mode },
      {
        keys: [keys.value, keys.lease, keys.version, keys.cleared, keys.marker],
        argv: [mode, keys.channel, KEY_PART],
      },
    );

  it('marks stale: rewrites version and flag only, keeps the TTL, revokes the lease, broadcasts s:', async () => {
    await client.set(keys.version, String(V));
    await client.set(keys.value, envelope(V), 'PX', 60_000);
    await client.set(keys.lease, 'holder');
    await expect(invalidate('stale')).resolves.toEqual([1, String(V + 1)]);
    await expect(client.get(keys.value)).resolves.toBe(envelope(V + 1, 1));
    const ttl = await client.pttl(keys.value);
    expect(ttl).toBeGreaterThan(59_000);
    expect(ttl).toBeLessThanOrEqual(60_000);
    await expect(client.exists(keys.lease)).resolves.toBe(0);
    await expect(published()).resolves.toEqual([`s:${V + 1}:${KEY_PART}`]);
  });

  it('deletes an envelope of a later format rather than rewrite its header, and broadcasts d:', async () => {
    await client.set(keys.version, String(V));
    await client.set(keys.value, envelope(V).replace('{"v":2,', '{"v":3,'));
    await expect(invalidate('stale')).resolves.toEqual([1, String(V + 1)]);
    await expect(client.exists(keys.value)).resolves.toBe(0);
    await expect(published()).resolves.toEqual([`d:${V + 1}:${KEY_PART}`]);
  });

  it('advances the version of an absent key', async () => {
    await client.set(keys.version, String(V));
    await expect(invalidate('stale')).resolves.toEqual([0, String(V + 1)]);
    await expect(client.get(keys.version)).resolves.toBe(String(V + 1));
    await expect(published()).resolves.toEqual([`s:${V + 1}:${KEY_PART}`]);
  });

  it.each([
    ['garbage', 'not json'],
    ['an envelope without the "i" field', `{"v":2,"n":${V},"x":1}`],
  ])('leaves %s as it is (existed 0)', async (_what, stored) => {
    await client.set(keys.version, String(V));
    await client.set(keys.value, stored);
    await expect(invalidate('stale')).resolves.toEqual([0, String(V + 1)]);
    await expect(client.get(keys.value)).resolves.toBe(stored);
  });

  it('leaves foreign data at the value key (existed 0)', async () => {
    await client.set(keys.version, String(V));
    await client.hset(keys.value, 'field', 'value');
    await expect(invalidate('stale')).resolves.toEqual([0, String(V + 1)]);
    await expect(client.type(keys.value)).resolves.toBe('hash');
  });

  it('deletes: {1, version} for a key that existed, {0, version} after, broadcasting d:', async () => {
    await client.set(keys.version, String(V));
    await client.set(keys.value, envelope(V));
    await client.set(keys.lease, 'holder');
    await expect(invalidate('delete')).resolves.toEqual([1, String(V + 1)]);
    await expect(client.exists(keys.value, keys.lease)).resolves.toBe(0);
    await expect(invalidate('delete')).resolves.toEqual([0, String(V + 2)]);
    await expect(published()).resolves.toEqual([
      `d:${V + 1}:${KEY_PART}`,
      `d:${V + 2}:${KEY_PART}`,
    ]);
  });
});

describe('RELEASE_LEASE (KEYS lease; ARGV token, channel, key part, fence)', () => {
  const release = (token: string) =>
    evalScript(
      RELEASE_LEASE,
      { target: target(), token, fence: V },
      { keys: [keys.lease], argv: [token, keys.channel, KEY_PART, String(V)] },
    );

  it("deletes its own lease and broadcasts r:<fence>:<key part>; leaves another's", async () => {
    await client.set(keys.lease, 'holder');
    await expect(release('other')).resolves.toBe(0);
    await expect(client.get(keys.lease)).resolves.toBe('holder');
    await expect(release('holder')).resolves.toBe(1);
    await expect(client.exists(keys.lease)).resolves.toBe(0);
    await expect(published()).resolves.toEqual([`r:${V}:${KEY_PART}`]);
  });
});

describe('END_LEASE (KEYS lease, value, version; ARGV token, fence, kind, hold ms, remember ms, failures, payload, channel, key part)', () => {
  const end = (token: string, kind: 'p' | 'f', holdMs: number, rememberMs: number) => {
    const call = {
      target: target(),
      token,
      fence: V,
      kind,
      holdMs,
      rememberMs,
      failures: 1,
      payload: '{"name":"Error","message":"db down"}',
    };
    return evalScript(END_LEASE, call, {
      keys: [keys.lease, keys.value, keys.version, keys.cleared, keys.marker],
      argv: [token, String(V), kind, holdMs, rememberMs, '1', call.payload, keys.channel, KEY_PART],
    });
  };

  it('replaces the lease it owns with the failure, retry time from now, kept for the longest backoff too', async () => {
    await client.set(keys.version, String(V));
    await client.set(keys.lease, 't1');
    const before = Date.now();
    await expect(end('t1', 'f', 1_000, 30_000)).resolves.toBe(1);
    const record = (await client.get(keys.lease))!;
    const match = /^o\.f\.(\d+)\.(\d+)\.1\.(.*)$/.exec(record);
    expect(match?.[1]).toBe(String(V));
    expect(Number(match?.[2])).toBeGreaterThanOrEqual(before + 1_000 - 50);
    expect(match?.[3]).toBe('{"name":"Error","message":"db down"}');
    expect(await client.pttl(keys.lease)).toBeGreaterThan(30_000);
    await expect(published()).resolves.toEqual([`r:${V}:${KEY_PART}`]);
  });

  it('leaves a pass for its hold only, and writes nothing for a lease it does not own', async () => {
    await client.set(keys.version, String(V));
    await client.set(keys.lease, 'other');
    await expect(end('t1', 'p', 1_000, 0)).resolves.toBe(0);
    await expect(client.get(keys.lease)).resolves.toBe('other');
    await client.set(keys.lease, 't1');
    await expect(end('t1', 'p', 1_000, 0)).resolves.toBe(1);
    await expect(client.get(keys.lease)).resolves.toMatch(new RegExp(`^o\\.p\\.${V}\\.`));
    expect(await client.pttl(keys.lease)).toBeLessThanOrEqual(1_000);
  });
});

describe('HEDGE (KEYS reports, granted; ARGV process, loads, ticket, counts for ms, report ms, loads per hedge, minimum)', () => {
  const hedge = (process: string, loads: number, ticket: string) => {
    const call = {
      reports: `${keys.lease}:hp`,
      granted: `${keys.lease}:hg`,
      process,
      loads,
      ticket,
      countsForMs: 10_000,
      reportMs: 2_000,
      loadsPerHedge: 10,
      minimum: 1,
    };
    return evalScript(HEDGE, call, {
      keys: [call.reports, call.granted],
      argv: [process, String(loads), ticket, 10_000, 2_000, '10', '1'],
    });
  };

  it('grants one hedge, or one per ten loads the processes reported, each counted for its window', async () => {
    await expect(hedge('pod-a', 12, 't1')).resolves.toBe(1);
    await expect(hedge('pod-a', 12, 't2')).resolves.toBe(0);
    await expect(hedge('pod-b', 9, 't3')).resolves.toBe(1);
    await expect(hedge('pod-b', 9, 't4')).resolves.toBe(0);
    await expect(client.zcard(`${keys.lease}:hg`)).resolves.toBe(2);
    const ttl = await client.pttl(`${keys.lease}:hg`);
    expect(ttl).toBeGreaterThan(9_000);
    expect(ttl).toBeLessThanOrEqual(10_000);
    expect(await client.pttl(`${keys.lease}:hp`)).toBeLessThanOrEqual(2_000);
  });
});

describe('EXTEND_LEASE (KEYS lease; ARGV token, ttl ms)', () => {
  const extend = (token: string) =>
    evalScript(
      EXTEND_LEASE,
      { layout: layout(), token, ttlMs: 60_000 },
      {
        keys: [keys.lease, keys.value, keys.version, keys.cleared, keys.marker],
        argv: [token, 60_000],
      },
    );

  it('extends its own lease only', async () => {
    await expect(extend('holder')).resolves.toBe(0);
    await client.set(keys.lease, 'holder', 'PX', 1_000);
    await expect(extend('other')).resolves.toBe(0);
    expect(await client.pttl(keys.lease)).toBeLessThanOrEqual(1_000);
    await expect(extend('holder')).resolves.toBe(1);
    expect(await client.pttl(keys.lease)).toBeGreaterThan(59_000);
  });
});

describe('ADD_TO_INDEX (KEYS index; ARGV member, ttl ms), INDEX_MEMBERS (KEYS index, invalidated-at; ARGV kept ms) and INVALIDATED_AT (KEYS invalidated-at)', () => {
  const add = (member: string, ttlMs: number) =>
    evalScript(
      ADD_TO_INDEX,
      { index: keys.index, member, ttlMs },
      { keys: [keys.index], argv: [member, ttlMs] },
    );
  const invalidatedAt = () => `${keys.index}:at`;
  const members = () =>
    evalScript(
      INDEX_MEMBERS,
      { index: keys.index, invalidatedAt: invalidatedAt(), keptMs: 60_000 },
      { keys: [keys.index, invalidatedAt()], argv: [60_000] },
    );
  const lastInvalidated = () =>
    evalScript(
      INVALIDATED_AT,
      { invalidatedAt: invalidatedAt() },
      { keys: [invalidatedAt()], argv: [] },
    );

  it('keeps each member until its later deadline and the index as long as its longest member', async () => {
    await expect(add('a', 60_000)).resolves.toBe(1);
    await expect(add('a', 1)).resolves.toBe(1);
    await expect(add('b', 1)).resolves.toBe(1);
    expect(await client.pttl(keys.index)).toBeGreaterThan(59_000);
    await sleep(5);
    await expect(members()).resolves.toEqual(['a']);
    await expect(add('c', 30_000)).resolves.toBe(1);
    await expect(client.zrange(keys.index, 0, -1)).resolves.toEqual(['c', 'a']);
    await expect(members()).resolves.toEqual(['c', 'a']);
  });

  it('notes when the members were read to invalidate them (µs on Redis), kept for the time given', async () => {
    const [before, never] = (await lastInvalidated()) as [number, number];
    expect(never).toBe(-1);
    await expect(members()).resolves.toEqual([]);
    expect(await client.pttl(invalidatedAt())).toBeGreaterThan(59_000);
    await sleep(5);
    const [now, at] = (await lastInvalidated()) as [number, number];
    expect(at).toBeGreaterThanOrEqual(before);
    expect(now).toBeGreaterThan(at);
    expect(now - at).toBeLessThan(60_000_000);
  });
});
