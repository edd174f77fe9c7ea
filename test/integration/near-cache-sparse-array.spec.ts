import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { RedisServer, stopAllRedisServers } from '../helpers/redis-server.js';

/**
 * A value the default (v8) serializer stores in a few bytes may hold a huge sparse array: a table
 * indexed by id (`byId[user.id] = user`). The memory store keeps it as it is; the Redis store's near
 * cache charges each copy an estimate of its heap size, which must not walk the array's holes (a
 * 36-character envelope would then cost billions of steps and run the pod out of memory).
 */

const BUILT = fileURLToPath(new URL('../../.test-build/lib/', import.meta.url));

let server: RedisServer;

beforeAll(async () => {
  server = await RedisServer.start();
});

afterAll(async () => {
  await stopAllRedisServers();
});

/** Runs `source` (an ES module) in its own Node.js process with a 256 MiB heap; resolves its exit code and output. */
function runPod(source: string, limitMs: number): Promise<{ code: number | null; stdout: string }> {
  return new Promise((resolve) => {
    const child = spawn(
      process.execPath,
      ['--max-old-space-size=256', '--input-type=module', '-e', source],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stdout = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.resume();
    const timer = setTimeout(() => child.kill('SIGKILL'), limitMs);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout });
    });
  });
}

describe('near cache: a sparse array', () => {
  it('caches a value holding a sparse array (one element, length 2^32 - 1) without running the pod out of memory', async () => {
    const source = `
      import { HerdEngine } from ${JSON.stringify(`${BUILT}index.js`)};
      import { RedisStore } from ${JSON.stringify(`${BUILT}redis.js`)};
      const store = new RedisStore({ url: ${JSON.stringify(server.url)}, namespace: 'sparse' });
      await store.ready(10_000);
      const engine = new HerdEngine({ store, policy: { soft: '1h' } });
      const value = await engine.getOrLoad('users-by-id', async () => {
        const byId = [];
        byId[2 ** 32 - 2] = 'alice';
        return byId;
      });
      console.log('served', value.length);
      await engine.close();
      await store.close();
    `;
    const { code, stdout } = await runPod(source, 20_000);
    expect({ code, stdout: stdout.trim() }).toEqual({ code: 0, stdout: `served ${2 ** 32 - 1}` });
  }, 30_000);
});
