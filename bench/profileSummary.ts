// node --import tsx bench/profileSummary.ts <file.cpuprofile> [top] [from-to]: where a V8 CPU
// profile (node --cpu-prof) spent its samples, by package or source file and by function
// (self time). `from-to` (seconds into the profile) keeps one phase of a run, such as the
// timed part of a bench after its setup; the busy share of each second is printed to find it.
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

const [file, topArg, windowArg] = process.argv.slice(2);
if (!file) {
  process.stderr.write('usage: node --import tsx bench/profileSummary.ts <file.cpuprofile> [top]\n');
  process.exit(2);
}
const top = Number(topArg ?? 30);
const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
const byId = new Map(profile.nodes.map((node) => [node.id, node]));
const [fromS, toS] = (windowArg ?? '0-1e9').split('-').map(Number) as [number, number];
const selfUs = new Map<number, number>();
const busyBySecond: number[] = [];
let atUs = 0;
profile.samples.forEach((id, i) => {
  const delta = profile.timeDeltas[i] ?? 0;
  atUs += delta;
  const second = Math.floor(atUs / 1e6);
  if (byId.get(id)!.callFrame.functionName !== '(idle)') busyBySecond[second] = (busyBySecond[second] ?? 0) + delta;
  if (second >= fromS && second < toS) selfUs.set(id, (selfUs.get(id) ?? 0) + delta);
});
console.log(`busy share of each second: ${Array.from(busyBySecond, (us) => Math.round((us ?? 0) / 1e4)).join(' ')}`);
const totalUs = [...selfUs.values()].reduce((a, b) => a + b, 0);

/** node_modules/<package>, a project file, node's own code, or what V8 calls it ('(garbage collector)', '(idle)'). */
function placeOf({ url, functionName }: ProfileNode['callFrame']): string {
  if (!url) return functionName.startsWith('(') ? functionName : '(native)';
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return pkg[1]!;
  if (url.startsWith('node:')) return 'node:*';
  return url.replace(/^file:\/\/.*?\/(src|bench|test)\//, '$1/');
}

const add = (map: Map<string, number>, key: string, us: number) => map.set(key, (map.get(key) ?? 0) + us);
const byPlace = new Map<string, number>();
const byFunction = new Map<string, number>();
for (const [id, us] of selfUs) {
  const { callFrame } = byId.get(id)!;
  const place = placeOf(callFrame);
  add(byPlace, place, us);
  add(byFunction, `${callFrame.functionName || '(anonymous)'}  ${place}:${callFrame.lineNumber + 1}`, us);
}
const print = (title: string, map: Map<string, number>) => {
  console.log(`\n${title}`);
  for (const [key, us] of [...map].sort((a, b) => b[1] - a[1]).slice(0, top)) {
    console.log(`${((100 * us) / totalUs).toFixed(1).padStart(5)}%  ${(us / 1000).toFixed(0).padStart(7)} ms  ${key}`);
  }
};
console.log(`${file}: ${(totalUs / 1e6).toFixed(1)} s sampled`);
print('self time by package or file', byPlace);
print('self time by function', byFunction);
