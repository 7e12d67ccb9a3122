import { readdirSync, readFileSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { freshLaunches, startProduct, sustained } from '../breakdown.ts';

const TICK = 10; // ms per clock tick
function threads(pid: number): Map<string, { name: string; ticks: number }> {
  const m = new Map<string, { name: string; ticks: number }>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const s = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const name = s.slice(s.indexOf('(') + 1, s.lastIndexOf(')'));
      const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
      m.set(tid, { name, ticks: Number(f[11]) + Number(f[12]) });
    } catch {}
  }
  return m;
}
function diff(a: ReturnType<typeof threads>, b: ReturnType<typeof threads>, launches: number) {
  const rows = [...b.entries()].map(([tid, t]) => ({ tid, name: t.name, ms: ((t.ticks - (a.get(tid)?.ticks ?? 0)) * TICK) / launches }));
  rows.sort((x, y) => y.ms - x.ms);
  let total = 0;
  for (const r of rows) total += r.ms;
  return rows.filter((r) => r.ms > 0.2).map((r) => `${r.tid}\t${r.name}\t${r.ms.toFixed(2)}`).join('\n') + `\ntotal ${total.toFixed(2)} ms/launch`;
}
const which = process.argv[2] ?? 'dossier';
if (which === 'dossier') {
  const stack = await startProduct(process.env.LOCAL ? { DOSSIER_LAUNCH_DISPATCH: 'local' } : {}, (process.env.NODEARGS ?? '').split(' ').filter(Boolean));
  await freshLaunches(stack, 'warm', 20);
  const a = threads(stack.pid);
  const t = stack.temporalPid ? threads(stack.temporalPid) : undefined;
  const r = await sustained(stack, 8, 15, 'load');
  const b = threads(stack.pid);
  const launches = r.rate * 15;
  console.log(`rate ${r.rate.toFixed(1)} p50 ${r.p50.toFixed(0)}`, r.cpuMs);
  console.log(diff(a, b, launches));
  await stack.stop();
} else {
  const child = spawn('node', ['--import', 'tsx', 'bench/floor/process.ts', '8', '20', which], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  await new Promise((r) => setTimeout(r, 12000));
  const a = threads(child.pid!);
  await new Promise((r) => setTimeout(r, 10000));
  const b = threads(child.pid!);
  await new Promise((r) => child.once('exit', r));
  const j = JSON.parse(out.trim().split('\n').pop()!);
  console.log(out.trim());
  console.log(diff(a, b, j.rate * 10));
}
