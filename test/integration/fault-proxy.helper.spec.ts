import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { createConnection } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { Redis } from 'ioredis';
import { flush, until } from '../helpers/deferred.js';
import { FaultProxy, stopAllFaultProxies } from '../helpers/fault-proxy.js';
import { RedisServer, stopAllRedisServers } from '../helpers/redis-server.js';

const COMMAND_TIMEOUT_MS = 300;

let server: RedisServer;
/** A client straight to redis-server, bypassing the proxy, to see what really reached it. */
let direct: Redis;
let proxy: FaultProxy;

beforeAll(async () => {
  server = await RedisServer.start();
  direct = server.client();
});

afterEach(async () => {
  await stopAllFaultProxies();
  await direct.flushall();
});

afterAll(async () => {
  direct.disconnect();
  await stopAllRedisServers();
});

async function startProxy(): Promise<FaultProxy> {
  proxy = await FaultProxy.start(server);
  return proxy;
}

/** Resolves on the client's next `event`. */
function next(client: Redis, event: 'ready' | 'close' | 'reconnecting'): Promise<void> {
  return new Promise((resolve) => client.once(event, () => resolve()));
}

async function readyClient(options: Parameters<FaultProxy['client']>[0] = {}): Promise<Redis> {
  const client = proxy.client(options);
  if (client.status !== 'ready') await next(client, 'ready');
  return client;
}

/** Polls `check` (an async condition) after each short pause until it holds; fails after `limitMs`. */
async function eventually(
  check: () => Promise<boolean>,
  limitMs = 5_000,
  what = 'condition',
): Promise<void> {
  const giveUpAt = performance.now() + limitMs;
  while (!(await check())) {
    if (performance.now() > giveUpAt) throw new Error(`Timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** Resolves with the error code of a raw TCP connection to the proxy, or 'open' if it stays up. */
function rawConnect(port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
    socket.once('connect', () => {
      // A reset right after the handshake surfaces on the first read or write.
      socket.write('*1\r\n$4\r\nPING\r\n');
      socket.once('data', () => {
        socket.destroy();
        resolve('open');
      });
    });
  });
}

describe('FaultProxy', () => {
  it('listens on a free loopback port and passes a GET through unchanged', async () => {
    await startProxy();
    await direct.set('greeting', 'héllo\r\n\u0000world');
    const client = await readyClient();

    expect(proxy.host).toBe('127.0.0.1');
    expect(proxy.port).not.toBe(server.port);
    expect(proxy.url).toBe(`redis://127.0.0.1:${proxy.port}`);
    expect(await client.get('greeting')).toBe('héllo\r\n\u0000world');
    expect(proxy.connections).toBe(1);
    expect(proxy.list()[0]!.commands.has('get')).toBe(true);
  });

  it('makes a command through a 200 ms delay take at least 200 ms', async () => {
    await startProxy();
    const client = await readyClient();

    proxy.delay(200, 'toClient');
    const startedAt = performance.now();
    await client.ping();

    expect(performance.now() - startedAt).toBeGreaterThanOrEqual(200);
  });

  it('keeps the order of chunks when the delay is removed while some are still held', async () => {
    await startProxy();
    const client = await readyClient();
    const [connection] = proxy.list();
    const sentBefore = connection!.bytesFromClient;

    proxy.delay(300, 'toServer');
    const incremented = client.incr('counter');
    await until(() => connection!.bytesFromClient > sentBefore, 5_000, 'INCR to reach the proxy');
    proxy.delay(0);
    const read = client.get('counter');

    expect(await read).toBe('1');
    expect(await incremented).toBe(1);
  });

  it('rejects a delay that a timer cannot hold', async () => {
    await startProxy();

    expect(() => proxy.delay(-1)).toThrow(RangeError);
    expect(() => proxy.delay(2 ** 31)).toThrow(/delayMs/);
  });

  it('resets every connection on dropAll, and the clients reconnect and work again', async () => {
    await startProxy();
    const first = await readyClient();
    const second = await readyClient();
    const errors: string[] = [];
    first.on('error', (error: NodeJS.ErrnoException) => errors.push(error.code ?? error.message));
    const reconnected = Promise.all(
      [first, second].map((client) => next(client, 'close').then(() => next(client, 'ready'))),
    );

    expect(proxy.dropAll()).toBe(2);
    await reconnected;

    expect(errors).toContain('ECONNRESET');
    expect(await first.incr('n')).toBe(1);
    expect(await second.incr('n')).toBe(2);
    expect(proxy.connections).toBe(2);
  });

  it('black-holes traffic without closing connections, so commands time out until restore', async () => {
    await startProxy();
    const client = await readyClient({ commandTimeout: COMMAND_TIMEOUT_MS });
    let closes = 0;
    client.on('close', () => (closes += 1));

    proxy.blackhole();
    await expect(client.set('k', 'lost')).rejects.toThrow(/Command timed out/);

    expect(closes).toBe(0);
    expect(proxy.connections).toBe(1);
    expect(await direct.get('k')).toBeNull();

    // The connection lost a request, so restore resets it and the client comes back on a new one.
    const ready = next(client, 'ready');
    proxy.restore();
    await ready;

    expect(await client.set('k', 'kept')).toBe('OK');
    expect(await direct.get('k')).toBe('kept');
  });

  it('black-holes only the replies when asked, so the command still runs on Redis', async () => {
    await startProxy();
    const client = await readyClient({ commandTimeout: COMMAND_TIMEOUT_MS });

    proxy.blackhole({ direction: 'toClient' });
    await expect(client.set('k', 'ran')).rejects.toThrow(/Command timed out/);

    expect(await direct.get('k')).toBe('ran');
  });

  it('accepts new connections during a blackhole but never answers them', async () => {
    await startProxy();
    proxy.blackhole();
    const client = proxy.client({ commandTimeout: COMMAND_TIMEOUT_MS });

    await expect(client.ping()).rejects.toThrow(/Command timed out/);
    expect(client.status).not.toBe('ready');
    expect(proxy.connections).toBe(1);

    const ready = next(client, 'ready');
    proxy.restore();
    await ready;
    expect(await client.ping()).toBe('PONG');
  });

  it('resets new connections with refuseNew and accepts them again after restore', async () => {
    await startProxy();
    const client = await readyClient();

    proxy.blackhole({ refuseNew: true });
    expect(await rawConnect(proxy.port)).toBe('ECONNRESET');
    expect(proxy.connections).toBe(1);

    proxy.restore();
    expect(await rawConnect(proxy.port)).toBe('open');
    // The open connection was idle during the blackhole, so it lost nothing and carries on.
    expect(await client.ping()).toBe('PONG');
  });

  it('buffers everything while paused and delivers it in order on resume', async () => {
    await startProxy();
    const client = await readyClient();
    const [connection] = proxy.list();
    const sentBefore = connection!.bytesFromClient;

    proxy.pause();
    const replies = Promise.all([
      client.set('k', 'a'),
      client.append('k', 'b'),
      client.append('k', 'c'),
    ]);
    await until(
      () => connection!.bytesFromClient > sentBefore,
      5_000,
      'the commands to reach the proxy',
    );

    expect(await direct.exists('k')).toBe(0);

    proxy.resume();

    expect(await replies).toEqual(['OK', 2, 3]);
    expect(await direct.get('k')).toBe('abc');
  });

  it('lets a command run on Redis while its reply is paused', async () => {
    await startProxy();
    const client = await readyClient();
    let replied = false;

    proxy.pause('toClient');
    const reply = client.set('lease', 'mine').then((value) => {
      replied = true;
      return value;
    });
    await eventually(
      async () => (await direct.get('lease')) === 'mine',
      5_000,
      'SET to run on Redis',
    );

    expect(replied).toBe(false);

    proxy.resume('toClient');
    expect(await reply).toBe('OK');
  });

  it('drops the subscriber connection alone, and a message published meanwhile is lost to it', async () => {
    await startProxy();
    const commands = await readyClient();
    const subscriber = await readyClient();
    const received: string[] = [];
    subscriber.on('message', (_channel: string, message: string) => received.push(message));
    await subscriber.subscribe('fills');
    await direct.publish('fills', 'before');
    await until(() => received.length === 1, 5_000, 'the first message');
    let commandCloses = 0;
    commands.on('close', () => (commandCloses += 1));

    // Keep the subscriber out while the message is published, so it cannot resubscribe first.
    proxy.refuseNew();
    const subscriberClosed = next(subscriber, 'close');
    expect(proxy.dropWhere((connection) => connection.isSubscriber)).toBe(1);
    await subscriberClosed;
    await eventually(
      async () => (await numberOfSubscribers('fills')) === 0,
      5_000,
      'Redis to drop the subscriber',
    );
    expect(await direct.publish('fills', 'during')).toBe(0);

    const resubscribed = next(subscriber, 'ready');
    proxy.restore();
    await resubscribed;
    await eventually(
      async () => (await numberOfSubscribers('fills')) === 1,
      5_000,
      'the resubscribe',
    );
    await direct.publish('fills', 'after');
    await until(() => received.length === 2, 5_000, 'the message after the resubscribe');

    expect(received).toEqual(['before', 'after']);
    expect(commandCloses).toBe(0);
    expect(await commands.ping()).toBe('PONG');
  });

  it('passes a restart of the server through, and its clients reconnect once it is back', async () => {
    const own = await RedisServer.start();
    proxy = await FaultProxy.start(own);
    const client = await readyClient();
    await client.set('k', 'v');

    const closed = next(client, 'close');
    await own.kill();
    await closed;
    const ready = next(client, 'ready');
    await own.restart();
    await ready;

    expect(await client.get('k')).toBeNull();
    expect(await client.set('k', 'again')).toBe('OK');
  });

  it('passes a close by the server on to a client that keeps its side open, and stop still resolves', async () => {
    await startProxy();
    const socket = createConnection({ host: proxy.host, port: proxy.port, allowHalfOpen: true });
    const ended = new Promise((resolve) => socket.once('end', resolve));
    let reply = '';
    socket.on('data', (chunk: Buffer) => (reply += chunk.toString()));
    socket.write('*1\r\n$4\r\nQUIT\r\n');

    // Redis answers and closes; the proxy forwards the reply, then the FIN.
    await ended;
    expect(reply).toBe('+OK\r\n');
    expect(proxy.connections).toBe(1);

    // The proxy's side of that connection can no longer be reset, only closed.
    await proxy.stop();
    expect(proxy.connections).toBe(0);

    const closed = new Promise((resolve) => socket.once('close', resolve));
    socket.end();
    await closed;
  });

  it('stops right after a client quits, while its connection is still closing', async () => {
    for (let round = 0; round < 10; round++) {
      await startProxy();
      const client = await readyClient();
      await client.quit();

      await proxy.stop();
      expect(proxy.connections).toBe(0);
    }
  });

  it('closes the listener, every socket and every timer on stop', async () => {
    // Handles closed by the previous test's cleanup leave in the loop's close phase, after a turn or two.
    await flush();
    await flush();
    const before = liveHandles();
    await startProxy();
    const client = await readyClient();
    proxy.delay(10_000);
    const pending = client.get('k').catch((error: Error) => error);
    await until(() => proxy.list()[0]!.bytesFromClient > 0, 5_000, 'GET to reach the proxy');

    await proxy.stop();

    expect(proxy.connections).toBe(0);
    expect(await rawConnect(proxy.port)).toBe('ECONNREFUSED');
    const ended = new Promise((resolve) => client.once('end', resolve));
    client.disconnect();
    await ended;
    expect(await pending).toBeInstanceOf(Error);
    await until(() => sameCounts(liveHandles(), before), 5_000, 'handles to close');
  });
});

async function numberOfSubscribers(channel: string): Promise<number> {
  const [, count] = (await direct.pubsub('NUMSUB', channel)) as [string, number];
  return Number(count);
}

/** Counts of the handles that keep Node alive: listeners, sockets and timers. */
function liveHandles(): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const kind of process.getActiveResourcesInfo()) {
    if (['TCPServerWrap', 'TCPSocketWrap', 'Timeout'].includes(kind))
      counts[kind] = (counts[kind] ?? 0) + 1;
  }
  return counts;
}

function sameCounts(a: Record<string, number>, b: Record<string, number>): boolean {
  return JSON.stringify(Object.entries(a).sort()) === JSON.stringify(Object.entries(b).sort());
}
