import { readFileSync } from 'node:fs';
const p = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const launches = Number(process.argv[3] ?? 1);
const byId = new Map(p.nodes.map((n) => [n.id, n]));
const parent = new Map(); for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const self = new Map(); const incl = new Map();
let t = p.startTime; const times = p.timeDeltas.map((d) => (t += d));
const end = times.at(-1) - 1.5e6, start = end - 15e6;
for (let i = 1; i < times.length; i++) {
  if (times[i] > end || times[i] < start) continue;
  const ms = (times[i] - times[i - 1]) / 1000;
  const leaf = byId.get(p.samples[i]);
  if (leaf.callFrame.functionName === '(idle)') continue;
  const k = `${leaf.callFrame.functionName} ${leaf.callFrame.url.replace(/.*node_modules\//, '').replace(/.*\/work\/main\//, '')}:${leaf.callFrame.lineNumber}`;
  self.set(k, (self.get(k) ?? 0) + ms);
  const seen = new Set();
  for (let id = leaf.id; id !== undefined; id = parent.get(id)) {
    const n = byId.get(id); const kk = `${n.callFrame.functionName} ${n.callFrame.url.replace(/.*node_modules\//, '').replace(/.*\/work\/main\//, '')}:${n.callFrame.lineNumber}`;
    if (seen.has(kk)) continue; seen.add(kk);
    incl.set(kk, (incl.get(kk) ?? 0) + ms);
  }
}
const show = (m, n) => [...m.entries()].sort((a, b) => b[1] - a[1]).slice(0, n).map(([k, v]) => `${(v / launches).toFixed(3)}  ${k}`).join('\n');
console.log('SELF\n' + show(self, 45));
console.log('INCL\n' + show(incl, 70));
