/**
 * Self-check for the bench peers: starts a private redis-server on a free port, then for every peer
 * runs K pods x C concurrent callers against one key with a counted ~100 ms loader and prints how
 * many times the loader ran. The process must exit on its own (no process.exit): a peer that leaves
 * a socket or timer open shows up as a hang, and the open handles are listed before returning.
 *
 * Phases per peer (same namespace, so the pods share Redis):
 *   cold   - key absent everywhere; all K*C callers start at once.
 *   warm   - immediately after; everything should be a hit (0 loader calls expected).
 *   stale  - after waiting past softMs (but within hardMs); counts loader calls including
 *            background refreshes, and how many callers got the old value.
 *
 * Build and run (from /work/main). TypeScript 6 refuses file arguments next to a tsconfig.json unless
 * --ignoreConfig is given, and the emitted ESM needs `"type": "module"` and a node_modules next to it:
 *   npx tsc --ignoreConfig --outDir /tmp/peercheck --noEmit false --module nodenext --moduleResolution nodenext \
 *     --target es2022 --skipLibCheck --esModuleInterop --strict --types node bench/peers/check-peers.ts
 *   echo '{"type":"module"}' > /tmp/peercheck/package.json
 *   ln -sfn "$PWD/node_modules" /tmp/peercheck/node_modules
 *   node /tmp/peercheck/check-peers.js
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

import { Redis } from 'ioredis';

import { bentocachePeer } from './bentocache.peer.js';
import { cacheManagerPeer, createCacheManagerPeer } from './cache-manager.peer.js';
import { noProtectionPeer } from './no-protection.peer.js';
import { type PeerFactory, type PeerPod, type PeerTtl } from './peer.js';
import { singleflightPeer } from './singleflight.peer.js';

const PODS = 4;
const CALLERS = 50;
const LOADER_MS = 100;
const TTL: PeerTtl = { softMs: 1_000, hardMs: 10_000 };

const PEERS: PeerFactory[] = [
  noProtectionPeer,
  singleflightPeer,
  cacheManagerPeer,
  bentocachePeer,
  // variants, informative only
  createCacheManagerPeer({ mode: 'plain' }),
  createCacheManagerPeer({ memoryL1: true }),
];

async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  server.close();
  await once(server, 'close');
  return address.port;
}

async function startRedis(): Promise<{ url: string; child: ChildProcess }> {
  const port = await freePort();
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    { stdio: 'ignore' },
  );
  const url = `redis://127.0.0.1:${port}`;
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`redis-server exited with ${child.exitCode}`);
    const probe = new Redis(url, {
      lazyConnect: true,
      retryStrategy: () => null,
      maxRetriesPerRequest: 0,
    });
    probe.on('error', () => {});
    try {
      await probe.connect();
      await probe.ping();
      await probe.quit();
      return { url, child };
    } catch {
      probe.disconnect();
      if (Date.now() > deadline) throw new Error('redis-server did not start');
      await sleep(50);
    }
  }
}

async function stopRedis(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'close');
  child.kill('SIGTERM');
  await exited;
}

interface PhaseResult {
  loaderCalls: number;
  ms: number;
  values: Map<string, number>;
}

async function herd(
  pods: PeerPod[],
  key: string,
  version: string,
  settleMs: number,
): Promise<PhaseResult> {
  let loaderCalls = 0;
  const loader = async (): Promise<string> => {
    loaderCalls++;
    await sleep(LOADER_MS);
    return version;
  };
  const start = performance.now();
  const results = await Promise.all(
    pods.flatMap((pod) => Array.from({ length: CALLERS }, () => pod.get(key, loader, TTL))),
  );
  const ms = performance.now() - start;
  // let background refreshes (cache-manager refreshThreshold, bentocache grace) run and be counted
  if (settleMs > 0) await sleep(settleMs);
  const values = new Map<string, number>();
  for (const value of results) values.set(value, (values.get(value) ?? 0) + 1);
  return { loaderCalls, ms, values };
}

function describeValues(values: Map<string, number>): string {
  return [...values].map(([value, count]) => `${value}x${count}`).join(' ');
}

async function checkPeer(peer: PeerFactory, redisUrl: string): Promise<string[]> {
  const namespace = `peercheck-${peer.name}-${Date.now()}`;
  const pods: PeerPod[] = [];
  try {
    for (let i = 0; i < PODS; i++) pods.push(await peer.createPod(redisUrl, namespace));
    const key = 'hot-key';
    const cold = await herd(pods, key, 'v1', 0);
    const warm = await herd(pods, key, 'v2', 0);
    await sleep(TTL.softMs + 100);
    const stale = await herd(pods, key, 'v3', LOADER_MS * 3);
    return [
      peer.name,
      String(cold.loaderCalls),
      cold.ms.toFixed(0),
      String(warm.loaderCalls),
      String(stale.loaderCalls),
      stale.ms.toFixed(0),
      describeValues(stale.values),
    ];
  } finally {
    await Promise.all(pods.map((pod) => pod.close()));
  }
}

async function main(): Promise<void> {
  const { url, child } = await startRedis();
  console.log(
    `redis-server at ${url}; ${PODS} pods x ${CALLERS} callers, loader ${LOADER_MS} ms, ttl ${JSON.stringify(TTL)}`,
  );
  const rows: string[][] = [
    ['peer', 'cold calls', 'cold ms', 'warm calls', 'stale calls', 'stale ms', 'stale results'],
  ];
  try {
    for (const peer of PEERS) {
      console.log(`- ${peer.name}: ${peer.description}`);
      rows.push(await checkPeer(peer, url));
    }
  } finally {
    await stopRedis(child);
  }
  const widths = rows[0]!.map((_, col) => Math.max(...rows.map((row) => row[col]!.length)));
  for (const row of rows) console.log(row.map((cell, col) => cell.padEnd(widths[col]!)).join('  '));
  // Anything still listed here would keep the process alive (one turn first: a child's handle closes async).
  await new Promise((resolve) => setImmediate(resolve));
  // TTYWrap/PipeWrap are this process's own stdio; ProcessWrap is the redis-server child, already exited.
  const left = process
    .getActiveResourcesInfo()
    .filter((r) => !['TTYWrap', 'PipeWrap', 'ProcessWrap'].includes(r));
  console.log(`active resources after close: ${left.length === 0 ? 'none' : left.join(', ')}`);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
