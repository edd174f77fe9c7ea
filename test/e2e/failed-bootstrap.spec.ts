import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Injectable, Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { Cached, ConfigurationError, HerdGuardModule } from '../../lib/index.js';
import type { FailedBootstrapMode } from '../fixtures/failed-bootstrap.js';
import { eventually } from '../helpers/deferred.js';
import { RedisServer, stopAllRedisServers } from '../helpers/redis-server.js';

/*
 * A bootstrap that fails after herd-guard connected to Redis must not leave its connections open:
 * Nest calls no shutdown hook when init fails, so a Jest suite would never exit and an app started
 * with `abortOnError: false` would hang.
 */

const FIXTURE = fileURLToPath(
  new URL('../../.test-build/test/fixtures/failed-bootstrap.js', import.meta.url),
);
/** Far above what a process needs to exit; a process held open by a socket never does. */
const EXIT_LIMIT_MS = 10_000;

let server: RedisServer;

beforeAll(async () => {
  server = await RedisServer.start();
});

afterAll(async () => {
  await stopAllRedisServers();
});

// Two classes with one name and default keys: the bootstrap fails in onModuleInit.
const billing = (() => {
  @Injectable()
  class UsersService {
    @Cached()
    async find(id: string): Promise<string> {
      return `billing user ${id}`;
    }
  }
  return UsersService;
})();

const auth = (() => {
  @Injectable()
  class UsersService {
    @Cached()
    async find(id: string): Promise<string> {
      return `auth user ${id}`;
    }
  }
  return UsersService;
})();

describe('a bootstrap that fails after herd-guard connected to Redis', () => {
  it('closes the connections when its own init fails (a @Cached key clash)', async () => {
    expect(await server.clientList()).toEqual([]);
    @Module({ providers: [billing] })
    class Billing {}
    @Module({ providers: [auth] })
    class Auth {}
    @Module({
      imports: [HerdGuardModule.forRoot({ redis: server.url, namespace: 'clash' }), Billing, Auth],
    })
    class AppModule {}
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
    moduleRef.useLogger(false);
    expect((await server.clientList()).length).toBe(2);
    await expect(moduleRef.init()).rejects.toBeInstanceOf(ConfigurationError);
    await eventually(
      async () => (await server.clientList()).length === 0,
      2_000,
      'herd-guard connections closed',
    );
  });

  it.each<[string, FailedBootstrapMode]>([
    ["another provider's onModuleInit", 'init'],
    ["another provider's factory", 'factory'],
  ])(
    'lets a process started with abortOnError: false exit when %s fails',
    async (_name, mode) => {
      const child = spawn(process.execPath, [FIXTURE, server.url, mode], {
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      let output = '';
      child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
      const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
      let timer: NodeJS.Timeout | undefined;
      const limit = new Promise<'still running'>((resolve) => {
        timer = setTimeout(() => resolve('still running'), EXIT_LIMIT_MS);
      });
      try {
        await expect(Promise.race([exited, limit])).resolves.toBe(0);
        expect(JSON.parse(output)).toMatchObject({ event: 'failed' });
      } finally {
        clearTimeout(timer);
        child.kill('SIGKILL');
      }
    },
    EXIT_LIMIT_MS + 10_000,
  );
});
