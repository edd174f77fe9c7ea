/**
 * The hit path in isolation, for profiling (S5 diagnosis): one hot fresh key read in a loop, by one
 * caller (`--mode seq`) or 64 (`--mode c64`), through the layers of the read path so each layer's
 * cost is the difference from the one below it:
 *   raw            ioredis GET of the envelope key
 *   raw+decode     the same + decodeEntry (JSON.parse and validation)
 *   store          RedisStore.get (near cache, command timeout, breaker, read coalescing, decode)
 *   engine         HerdEngine.getOrLoad over the RedisStore (per-call options written inline)
 *   engine-strict  the same over a RedisStore with nearCache: false (every hit reads Redis)
 *   engine-memory  HerdEngine.getOrLoad over a MemoryStore
 *   engine-memory-hoisted  the same with one options object made once (inline: a new one per call)
 *   engine-memory-alloc    the same as hoisted, making (and dropping) an options object per call
 *   engine-memory+sdk      the same in an app with an OpenTelemetry SDK (its context manager on),
 *                          herd-guard's telemetry off
 *   engine-memory+tracing  the same with herd-guard's OpenTelemetry tracing on
 *   engine-memory+otel     the same with herd-guard's OpenTelemetry tracing and metrics on
 *
 *   npx tsc -p tsconfig.bench.json
 *   taskset -c 1 node .bench-build/bench/tools/hit-path.js --mode seq
 *   taskset -c 1 node --cpu-prof --cpu-prof-dir=/tmp/prof .bench-build/bench/tools/hit-path.js --mode seq --subject engine
 *   node .bench-build/bench/tools/profile-summary.js /tmp/prof/<file>.cpuprofile --ops <ops printed> --filter lib/
 *
 * (`taskset -c 1` keeps node and redis-server on one CPU: see harness/cpu-affinity.ts.)
 */
import { Redis } from 'ioredis';

import { decodeEntry, HerdEngine, MemoryStore } from '../../lib/index.js';
import { RedisStore } from '../../lib/redis.js';
import { RedisServer } from '../../test/helpers/redis-server.js';
import { OtelContext, openTelemetry } from '../peers/otel-sdk.js';
import { hitLoop } from './hit-loop.js';

const args = process.argv.slice(2);
const flag = (name: string, fallback: string): string => {
  const index = args.indexOf(`--${name}`);
  return index >= 0 && args[index + 1] !== undefined ? args[index + 1]! : fallback;
};
const mode = flag('mode', 'seq');
const only = flag('subject', 'all');
const rounds = Number(flag('rounds', '5'));
const windowMs = Number(flag('window-ms', '500'));
const callers = mode === 'c64' ? 64 : 1;

const server = await RedisServer.start();
const store = new RedisStore({ url: server.url, namespace: 'hp' });
await store.ready();
const engine = new HerdEngine({ store });
const strictStore = new RedisStore({ url: server.url, namespace: 'hp', nearCache: false });
await strictStore.ready();
const strict = new HerdEngine({ store: strictStore });
const memory = new HerdEngine({ store: new MemoryStore() });
// In an app with an OpenTelemetry SDK: herd-guard's telemetry off, tracing only, tracing and metrics.
const withSdkOnly = new HerdEngine({ store: new MemoryStore() });
const traced = new HerdEngine({ store: new MemoryStore() });
openTelemetry(traced, { metrics: false });
const observed = new HerdEngine({ store: new MemoryStore() });
openTelemetry(observed);
const loader = async (): Promise<string> => 'x'.repeat(64);
const hoisted = { policy: { soft: 600_000, hard: 3_600_000 } };
/** Where engine-memory-alloc drops its options object (so the allocation is not optimised away). */
export let dropped: unknown;
// Options written inline, a new object per call, as application code does.
await engine.getOrLoad('k', loader, { policy: { soft: 600_000, hard: 3_600_000 } });
for (const inMemory of [memory, withSdkOnly, traced, observed])
  await inMemory.getOrLoad('k', loader, { policy: { soft: 600_000, hard: 3_600_000 } });
const raw = new Redis(server.url, { lazyConnect: true });
await raw.connect();
const rawKey = store.keys.for('k').value;

const subjects: Record<string, () => Promise<unknown>> = {
  raw: () => raw.get(rawKey),
  'raw+decode': () => raw.get(rawKey).then(decodeEntry),
  store: async () => store.get('k'),
  engine: () => engine.getOrLoad('k', loader, { policy: { soft: 600_000, hard: 3_600_000 } }),
  'engine-strict': () =>
    strict.getOrLoad('k', loader, { policy: { soft: 600_000, hard: 3_600_000 } }),
  'engine-memory': () =>
    memory.getOrLoad('k', loader, { policy: { soft: 600_000, hard: 3_600_000 } }),
  'engine-memory-hoisted': () => memory.getOrLoad('k', loader, hoisted),
  'engine-memory-alloc': () => {
    dropped = { policy: { soft: 600_000, hard: 3_600_000 } };
    return memory.getOrLoad('k', loader, hoisted);
  },
  'engine-memory+sdk': () =>
    withSdkOnly.getOrLoad('k', loader, { policy: { soft: 600_000, hard: 3_600_000 } }),
  'engine-memory+tracing': () =>
    traced.getOrLoad('k', loader, { policy: { soft: 600_000, hard: 3_600_000 } }),
  'engine-memory+otel': () =>
    observed.getOrLoad('k', loader, { policy: { soft: 600_000, hard: 3_600_000 } }),
};
const chosen = Object.entries(subjects).filter(
  ([name]) => only === 'all' || only.split(',').includes(name),
);

const perOp = new Map<string, number[]>(chosen.map(([name]) => [name, []]));
let totalOps = 0;
// The SDK's context manager (process-wide promise hooks) is on only in the windows of the subjects
// that use OpenTelemetry, as an app without an SDK would not have it.
const withSdk = new Set(['engine-memory+sdk', 'engine-memory+tracing', 'engine-memory+otel']);
const sdkContext = new OtelContext();
const inTurn = async (name: string, measure: () => Promise<number>): Promise<number> => {
  if (withSdk.has(name)) sdkContext.on();
  try {
    return await measure();
  } finally {
    sdkContext.off();
  }
};
for (const [name, get] of chosen) await inTurn(name, () => hitLoop(get, callers, 300));
for (let round = 0; round < rounds; round++) {
  for (const [name, get] of chosen) {
    const startedAt = performance.now();
    const ops = await inTurn(name, () => hitLoop(get, callers, windowMs));
    totalOps += ops;
    perOp.get(name)!.push(((performance.now() - startedAt) * 1000) / ops);
  }
}
const median = (values: number[]): number =>
  [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const base = median(perOp.get(chosen[0]![0])!);
console.log(
  `mode ${mode} (${callers} caller${callers > 1 ? 's' : ''}), median of ${rounds} rounds of ${windowMs} ms`,
);
for (const [name, values] of perOp) {
  const us = median(values);
  console.log(
    `${name.padEnd(22)} ${us.toFixed(3).padStart(8)} µs/op  ${(1e6 / us / 1000).toFixed(1).padStart(8)} k ops/s  ` +
      `vs ${chosen[0]![0]}: ${(base / us).toFixed(2)}x`,
  );
}
console.log(`measured ops (all subjects, excluding warm-up): ${totalOps}`);

await engine.close();
await strict.close();
await memory.close();
await withSdkOnly.close();
await traced.close();
await observed.close();
await store.close();
await strictStore.close();
await raw.quit();
await server.stop();
