import { afterEach, describe, expect, it } from '@jest/globals';
import { createConnection } from 'node:net';
import { Cluster, type Redis } from 'ioredis';
import {
  RedisClusterFixture,
  RedisServer,
  findRedisCli,
  findRedisServer,
  stopAllRedisServers,
} from '../helpers/redis-server.js';

const MACHINE_REDIS_PORT = 6379;

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Resolves with the error code of a TCP connect to the server, or 'connected'. */
function tcpConnect(server: RedisServer): Promise<string> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: server.host, port: server.port });
    socket.once('connect', () => {
      socket.destroy();
      resolve('connected');
    });
    socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
  });
}

describe('findRedisServer / findRedisCli', () => {
  it('finds redis-server and redis-cli on PATH', () => {
    expect(findRedisServer()).toMatch(/redis-server$/);
    expect(findRedisCli()).toMatch(/redis-cli$/);
  });

  it('fails with an install hint when redis-server is not on PATH', () => {
    expect(() => findRedisServer('/nonexistent')).toThrow(/redis-server was not found on PATH/);
    expect(() => findRedisServer('/nonexistent')).toThrow(/apt-get install redis-server/);
    expect(() => findRedisCli('/nonexistent')).toThrow(/brew install redis/);
  });
});

describe('RedisServer', () => {
  const clients: Redis[] = [];
  const open = (client: Redis): Redis => {
    clients.push(client);
    return client;
  };

  afterEach(async () => {
    for (const client of clients.splice(0)) client.disconnect();
    await stopAllRedisServers();
  });

  it('starts on a free loopback port other than 6379 and answers PING', async () => {
    const server = await RedisServer.start();

    expect(server.host).toBe('127.0.0.1');
    expect(server.port).not.toBe(MACHINE_REDIS_PORT);
    expect(server.url).toBe(`redis://127.0.0.1:${server.port}`);
    expect(isAlive(server.pid)).toBe(true);
    expect(await open(server.client()).ping()).toBe('PONG');
  });

  it('runs without persistence', async () => {
    const server = await RedisServer.start();
    const client = open(server.client());

    expect(await client.config('GET', 'save')).toEqual(['save', '']);
    expect(await client.config('GET', 'appendonly')).toEqual(['appendonly', 'no']);
  });

  it('passes extra config args to redis-server', async () => {
    const server = await RedisServer.start({ args: ['--notify-keyspace-events', 'KEA'] });

    const [, flags] = (await open(server.client()).config(
      'GET',
      'notify-keyspace-events',
    )) as string[];
    expect([...flags!].sort().join('')).toBe('AEK');
  });

  it('refuses connections after kill() and comes back empty on the same port after restart()', async () => {
    const server = await RedisServer.start();
    await open(server.client()).set('survives?', 'no');
    const { port, pid } = server;

    await server.kill();

    expect(server.running).toBe(false);
    expect(isAlive(pid)).toBe(false);
    expect(await tcpConnect(server)).toBe('ECONNREFUSED');

    await server.restart();

    expect(server.port).toBe(port);
    expect(server.pid).not.toBe(pid);
    expect(await open(server.client()).get('survives?')).toBeNull();
  });

  it('shuts down gracefully with stop() and answers again after restart()', async () => {
    const server = await RedisServer.start();
    const { pid } = server;

    await server.stop();

    expect(isAlive(pid)).toBe(false);
    expect(() => server.pid).toThrow(/not running/);
    expect(await tcpConnect(server)).toBe('ECONNREFUSED');

    await server.restart();

    expect(await open(server.client()).ping()).toBe('PONG');
  });

  it('times commands out while frozen and answers after thaw()', async () => {
    const server = await RedisServer.start();
    const client = open(server.client({ commandTimeout: 200 }));
    await client.set('k', 'v');

    server.freeze();

    expect(server.isFrozen).toBe(true);
    await expect(client.get('k')).rejects.toThrow(/Command timed out/);

    server.thaw();

    expect(await client.get('k')).toBe('v');
  });

  it('is unresponsive for the duration of pause(ms)', async () => {
    const server = await RedisServer.start();
    const client = open(server.client({ commandTimeout: 100 }));
    await client.ping();

    const paused = server.pause(500);

    await expect(client.ping()).rejects.toThrow(/Command timed out/);
    await paused;
    expect(server.isFrozen).toBe(false);
    expect(await client.ping()).toBe('PONG');
  });

  it('stops a frozen server', async () => {
    const server = await RedisServer.start();
    const { pid } = server;
    server.freeze();

    await server.stop();

    expect(isAlive(pid)).toBe(false);
    expect(server.isFrozen).toBe(false);
  });

  it('counts calls per command in commandStats() and zeroes them with resetStats()', async () => {
    const server = await RedisServer.start();
    const client = open(server.client());
    await client.ping();
    await server.resetStats();

    for (let i = 0; i < 5; i++) await client.get(`key:${i}`);
    await client.set('key:0', 'v');

    const stats = await server.commandStats();
    expect(stats.get).toBe(5);
    expect(stats.set).toBe(1);

    await server.resetStats();

    expect((await server.commandStats()).get).toBeUndefined();
  });

  it('stopAllRedisServers() kills running servers and closes the clients made by client()', async () => {
    const server = await RedisServer.start();
    const client = server.client();
    await client.ping();
    const { pid } = server;

    await stopAllRedisServers();

    expect(isAlive(pid)).toBe(false);
    expect(server.running).toBe(false);
    expect(client.status).toBe('end');
  });
});

describe('RedisClusterFixture', () => {
  let cluster: Cluster | undefined;

  afterEach(async () => {
    cluster?.disconnect();
    cluster = undefined;
    await stopAllRedisServers();
  });

  it('starts three masters that serve SET/GET through an ioredis Cluster client', async () => {
    const fixture = await RedisClusterFixture.start();

    expect(fixture.nodes).toHaveLength(3);
    for (const node of fixture.nodes) {
      expect(node.host).toBe('127.0.0.1');
      expect(node.port).not.toBe(MACHINE_REDIS_PORT);
    }

    cluster = new Cluster(fixture.nodes);
    const keys = Array.from({ length: 20 }, (_, i) => `key:${i}`);
    for (const key of keys) await cluster.set(key, `value of ${key}`);
    for (const key of keys) expect(await cluster.get(key)).toBe(`value of ${key}`);

    // The keys really are sharded: every node holds some of them.
    const sizes = await Promise.all(
      fixture.servers.map(async (server) => {
        const client = server.client();
        try {
          return await client.dbsize();
        } finally {
          client.disconnect();
        }
      }),
    );
    expect(sizes.reduce((sum, size) => sum + size, 0)).toBe(keys.length);
    expect(sizes.every((size) => size > 0)).toBe(true);

    const viaFixture = fixture.client();
    expect(await viaFixture.get('key:7')).toBe('value of key:7');
    viaFixture.disconnect();

    await fixture.stop();
    expect(fixture.servers.every((server) => !server.running)).toBe(true);
  });
});
