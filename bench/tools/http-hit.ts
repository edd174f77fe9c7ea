/**
 * What one request to S7a's trivial routes costs the app, in one process: CPU time and bytes
 * allocated per request (client included; the same client for every route, so the differences
 * between routes are the interceptors'), the routes taking turns in rounds. The cached routes
 * answer hits after the first request.
 *
 *   npx tsc -p tsconfig.bench.json
 *   node .bench-build/bench/tools/http-hit.js [--rounds 7] [--requests 4000] [--connections 16]
 *   node --cpu-prof --cpu-prof-dir=/tmp/prof .bench-build/bench/tools/http-hit.js --route herd-guard
 *   node .bench-build/bench/tools/profile-summary.js /tmp/prof/<file>.cpuprofile --ops <requests printed>
 *   node .bench-build/bench/tools/http-hit.js --route herd-guard --alloc-prof /tmp/hg.heapprofile
 *     (bytes allocated per request by function, garbage included: a sampling heap profile of one
 *     more round of the route, summarised on the console and written to the file)
 */
import 'reflect-metadata';
import { writeFileSync } from 'node:fs';
import { Agent, get } from 'node:http';
import { Session } from 'node:inspector/promises';
import { GCProfiler, getHeapStatistics } from 'node:v8';
import { NestFactory } from '@nestjs/core';
import { BenchHttpModule, PING_ROUTES, type PingRoute } from '../http/app.js';

const args = process.argv.slice(2);
const flag = (name: string, fallback: string): string => {
  const index = args.indexOf(`--${name}`);
  return index >= 0 && args[index + 1] !== undefined ? args[index + 1]! : fallback;
};
const rounds = Number(flag('rounds', '7'));
const requests = Number(flag('requests', '4000'));
const connections = Number(flag('connections', '16'));
const only = flag('route', 'all');
const allocProfile = flag('alloc-prof', '');
const routes = PING_ROUTES.filter((route) => only === 'all' || route === only);

const app = await NestFactory.create(
  BenchHttpModule.register({ queryDelayMs: 0, soft: '10m', hard: '20m' }),
  { logger: false },
);
await app.listen(0, '127.0.0.1');
const { port } = app.getHttpServer().address() as { port: number };
const agent = new Agent({ keepAlive: true, maxSockets: connections });

function one(path: string): Promise<void> {
  return new Promise((resolve, reject) => {
    get({ host: '127.0.0.1', port, path, agent }, (response) => {
      if (response.statusCode !== 200) reject(new Error(`${path}: ${response.statusCode}`));
      response.resume();
      response.on('end', resolve);
    }).on('error', reject);
  });
}

async function run(route: PingRoute, count: number): Promise<void> {
  let left = count;
  const path = `/ping/${route}/42`;
  await Promise.all(
    Array.from({ length: connections }, async () => {
      while (left-- > 0) await one(path);
    }),
  );
}

interface Sample {
  readonly cpuUs: number;
  readonly bytes: number;
}

async function measure(route: PingRoute): Promise<Sample> {
  const profiler = new GCProfiler();
  const startUsed = getHeapStatistics().used_heap_size;
  profiler.start();
  const cpu = process.cpuUsage();
  await run(route, requests);
  const used = process.cpuUsage(cpu);
  const endUsed = getHeapStatistics().used_heap_size;
  const { statistics } = profiler.stop();
  // Bytes allocated: what each GC found in use beyond what the previous one left, and the rest.
  let bytes = 0;
  let after = startUsed;
  for (const gc of statistics) {
    bytes += gc.beforeGC.heapStatistics.usedHeapSize - after;
    after = gc.afterGC.heapStatistics.usedHeapSize;
  }
  bytes += endUsed - after;
  return { cpuUs: (used.user + used.system) / requests, bytes: bytes / requests };
}

const median = (values: number[]): number =>
  [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

for (const route of routes) await run(route, 2_000); // warm-up: JIT, cache entries
const samples = new Map<PingRoute, Sample[]>(routes.map((route) => [route, []]));
for (let round = 0; round < rounds; round++) {
  for (const route of routes) samples.get(route)!.push(await measure(route));
}
console.log(`${requests} requests per round, ${connections} connections, ${rounds} rounds`);
console.log('route              CPU µs/request   bytes/request   (median of rounds)');
for (const route of routes) {
  const all = samples.get(route)!;
  const cpu = median(all.map((sample) => sample.cpuUs));
  const bytes = median(all.map((sample) => sample.bytes));
  console.log(
    `${route.padEnd(18)} ${cpu.toFixed(1).padStart(14)} ${bytes.toFixed(0).padStart(15)}`,
  );
}
if (allocProfile !== '') await profileAllocations(routes[0]!, allocProfile);
agent.destroy();
await app.close();

interface HeapNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: HeapNode[];
}

/** One more round of `route` under V8's sampling heap profiler, collected objects included. */
async function profileAllocations(route: PingRoute, file: string): Promise<void> {
  const session = new Session();
  session.connect();
  await session.post('HeapProfiler.startSampling', {
    samplingInterval: 256,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true,
  });
  await run(route, requests);
  const { profile } = (await session.post('HeapProfiler.stopSampling')) as {
    profile: { head: HeapNode };
  };
  session.disconnect();
  writeFileSync(file, JSON.stringify(profile));
  const self = new Map<string, number>();
  const walk = (node: HeapNode): void => {
    const url = node.callFrame.url.replace(/^.*\/(node_modules\/|\.bench-build\/)/, '$1');
    const name = `${node.callFrame.functionName || '(anonymous)'} ${url}:${node.callFrame.lineNumber + 1}`;
    self.set(name, (self.get(name) ?? 0) + node.selfSize);
    for (const child of node.children) walk(child);
  };
  walk(profile.head);
  const total = [...self.values()].reduce((sum, bytes) => sum + bytes, 0);
  console.log(`allocations of ${route}: ${(total / requests).toFixed(0)} bytes/request sampled`);
  for (const [name, bytes] of [...self].sort((a, b) => b[1] - a[1]).slice(0, 40)) {
    console.log(`${(bytes / requests).toFixed(0).padStart(8)} B/request  ${name}`);
  }
}
