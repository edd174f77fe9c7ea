/**
 * Self time per function in a V8 CPU profile (`node --cpu-prof`), optionally per operation.
 *   node .bench-build/bench/tools/profile-summary.js <file.cpuprofile> [--ops N] [--filter text] [--top N]
 */
import { readFileSync } from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const [file, ...rest] = process.argv.slice(2);
if (file === undefined) {
  console.error('usage: profile-summary.js <file.cpuprofile> [--ops N] [--filter text] [--top N]');
  process.exit(2);
}
const flag = (name: string): string | undefined => {
  const index = rest.indexOf(`--${name}`);
  return index >= 0 ? rest[index + 1] : undefined;
};
const ops = Number(flag('ops') ?? 0);
const filter = flag('filter');
const top = Number(flag('top') ?? 30);

const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
const label = (node: ProfileNode): string => {
  const url = node.callFrame.url.replace(/^.*\/(node_modules\/|\.bench-build\/)/, '$1');
  return `${node.callFrame.functionName || '(anonymous)'} ${url}:${node.callFrame.lineNumber + 1}`;
};
const self = new Map<string, number>();
let totalUs = 0;
profile.samples.forEach((id, index) => {
  const us = profile.timeDeltas[index + 1] ?? 0;
  totalUs += us;
  const name = label(nodes.get(id)!);
  self.set(name, (self.get(name) ?? 0) + us);
});
const rows = [...self]
  .filter(([name]) => filter === undefined || name.includes(filter))
  .sort((a, b) => b[1] - a[1]);
console.log(`profile: ${(totalUs / 1000).toFixed(0)} ms sampled${ops > 0 ? `, ${ops} ops` : ''}`);
for (const [name, us] of rows.slice(0, top)) {
  const share = ((100 * us) / totalUs).toFixed(1).padStart(5);
  const perOp = ops > 0 ? `${((us * 1000) / ops).toFixed(0).padStart(6)} ns/op  ` : '';
  console.log(`${(us / 1000).toFixed(1).padStart(8)} ms ${share}%  ${perOp}${name}`);
}
