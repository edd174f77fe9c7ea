/**
 * Before/after of the hit path, interleaved in one process (this machine is shared and noisy): two
 * builds of lib/ are loaded side by side and take turns, round after round, beside `lru-cache`'s
 * `get` and an in-process singleflight (bench/peers/lru-cache.peer.ts). Each engine runs as the
 * module sets it up by default: hot keys tracked (64), a new options object per call.
 *
 *   npx tsc -p tsconfig.bench.json                      # this tree  -> .bench-build
 *   (in a checkout of the base commit, the same)        # the before -> <dir>/.bench-build
 *   node --max-semi-space-size=128 .bench-build/bench/tools/hit-compare.js \
 *     --before <dir>/.bench-build/lib/index.js [--rounds 7] [--window-ms 300]
 *
 * Prints ns per hit (median of the rounds), sequential and 64 concurrent, bytes allocated per hit
 * (heap growth over a window with no collection in it), and the cost of each step in isolation.
 */
import { getHeapStatistics } from 'node:v8';
import { pathToFileURL } from 'node:url';
import { resolve } from 'node:path';

import * as after from '../../lib/index.js';
import { LruCachePod, MemorySingleflightPod } from '../peers/lru-cache.peer.js';
import { hitLoop } from './hit-loop.js';

type Lib = typeof after;

const args = process.argv.slice(2);
const flag = (name: string, fallback: string): string => {
  const index = args.indexOf(`--${name}`);
  return index >= 0 && args[index + 1] !== undefined ? args[index + 1]! : fallback;
};
const beforePath = flag('before', '');
if (beforePath === '')
  throw new Error('--before <path to the base build of lib/index.js> is needed');
const before = (await import(pathToFileURL(resolve(beforePath)).href)) as Lib;
const rounds = Number(flag('rounds', '7'));
const windowMs = Number(flag('window-ms', '300'));

const VALUE = 'x'.repeat(64);
const KEY = 'user:profile:12345';
const loader = async (): Promise<string> => VALUE;

interface Subject {
  readonly name: string;
  readonly get: () => Promise<unknown>;
}

async function engineSubject(name: string, lib: Lib): Promise<Subject> {
  const engine = new lib.HerdEngine({ store: new lib.MemoryStore() });
  // As HerdGuardModule opens it by default: hot keys tracked.
  new lib.HotKeyTracker(engine, 64);
  await engine.getOrLoad(KEY, loader, { policy: { soft: 600_000, hard: 3_600_000 } });
  return {
    name,
    get: () => engine.getOrLoad(KEY, loader, { policy: { soft: 600_000, hard: 3_600_000 } }),
  };
}

const ttl = { softMs: 600_000, hardMs: 3_600_000 };
const lru = new LruCachePod();
const flight = new MemorySingleflightPod();
await lru.get(KEY, loader, ttl);
await flight.get(KEY, loader, ttl);
const subjects: Subject[] = [
  { name: 'lru-cache get', get: () => lru.get(KEY, loader, ttl) },
  { name: 'memory-singleflight', get: () => flight.get(KEY, loader, ttl) },
  await engineSubject('herd-guard before', before),
  await engineSubject('herd-guard after', after),
];

const median = (values: number[]): number =>
  [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

async function nsPerHit(callers: number): Promise<Map<string, number>> {
  const perOp = new Map<string, number[]>(subjects.map((s) => [s.name, []]));
  for (const subject of subjects) await hitLoop(subject.get, callers, 200);
  for (let round = 0; round < rounds; round++) {
    // A different order each round: no subject always follows the same one.
    const order = round % 2 === 0 ? subjects : [...subjects].reverse();
    for (const subject of order) {
      const startedAt = performance.now();
      const ops = await hitLoop(subject.get, callers, windowMs);
      perOp.get(subject.name)!.push(((performance.now() - startedAt) * 1e6) / ops);
    }
  }
  return new Map([...perOp].map(([name, values]) => [name, median(values)]));
}

/** Heap bytes per hit over `ops` sequential hits; retried when a collection ran in between. */
async function bytesPerHit(get: () => Promise<unknown>, ops = 20_000): Promise<number> {
  const samples: number[] = [];
  for (let attempt = 0; attempt < 7; attempt++) {
    const start = getHeapStatistics().used_heap_size;
    for (let i = 0; i < ops; i++) await get();
    const grown = getHeapStatistics().used_heap_size - start;
    if (grown > 0) samples.push(grown / ops);
  }
  return median(samples);
}

/** ns per call of `step`, median of rounds, interleaved with `other`. */
function stepNs(steps: Record<string, () => unknown>, calls = 500_000): Record<string, number> {
  const perCall: Record<string, number[]> = {};
  for (const name of Object.keys(steps)) perCall[name] = [];
  let sink = 0;
  for (let round = 0; round < rounds; round++) {
    for (const [name, step] of Object.entries(steps)) {
      const startedAt = performance.now();
      for (let i = 0; i < calls; i++) if (step() !== undefined) sink += 1;
      perCall[name]!.push(((performance.now() - startedAt) * 1e6) / calls);
    }
  }
  if (sink < 0) console.log(sink);
  return Object.fromEntries(
    Object.entries(perCall).map(([name, values]) => [name, median(values)]),
  );
}

const seq = await nsPerHit(1);
const c64 = await nsPerHit(64);
const bytes = new Map<string, number>();
for (const subject of subjects) bytes.set(subject.name, await bytesPerHit(subject.get));

console.log(`median of ${rounds} interleaved rounds of ${windowMs} ms (memory store, hot keys on)`);
console.log(
  '| subject | seq ns/hit | seq hits/s | 64-conc. ns/hit | 64-conc. hits/s | bytes/hit |',
);
console.log('|---|---|---|---|---|---|');
for (const { name } of subjects) {
  const s = seq.get(name)!;
  const c = c64.get(name)!;
  console.log(
    `| ${name} | ${s.toFixed(0)} | ${(1e9 / s / 1000).toFixed(0)}k | ${c.toFixed(0)} | ${(1e9 / c / 1000).toFixed(0)}k | ${bytes.get(name)!.toFixed(0)} |`,
  );
}

// Steps in isolation, before and after.
const keys = Array.from({ length: 40 }, (_, i) => `key-${i}`);
const hotBefore = new before.HotKeys(64);
const hotAfter = new after.HotKeys(64);
let n = 0;
const engineBefore = new before.HerdEngine({ store: new before.MemoryStore() });
const engineAfter = new after.HerdEngine({ store: new after.MemoryStore() });
const surrogate = /\p{Cs}/u;
const wellFormed = KEY as unknown as { isWellFormed(): boolean };
const steps = stepNs({
  'hot keys: before (HotKeys.add)': () => hotBefore.add(keys[(n += 1) % 3 === 0 ? n % 40 : 0]!),
  'hot keys: after (HotKeys.add)': () => hotAfter.add(keys[(n += 1) % 3 === 0 ? n % 40 : 0]!),
  'policy inline: before': () => engineBefore.policyFor({ soft: 600_000, hard: 3_600_000 }),
  'policy inline: after': () => engineAfter.policyFor({ soft: 600_000, hard: 3_600_000 }),
  'key check: before (regex)': () => surrogate.test(KEY),
  'key check: after (isWellFormed)': () => wellFormed.isWellFormed(),
  'clock read (performance.now)': () => performance.now(),
  'clock read (Date.now)': () => Date.now(),
});
console.log('\n| step | ns/call |\n|---|---|');
for (const [name, ns] of Object.entries(steps)) console.log(`| ${name} | ${ns.toFixed(1)} |`);
await engineBefore.close();
await engineAfter.close();
process.exit(0);
