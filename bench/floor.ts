// `npm run bench -- floor`: sustained launches against their floor on Temporal, in one run. The floor
// is bare Temporal on the same dev server flags (bench/floor/process.ts): one workflow, one activity
// that spawns /usr/bin/true, started eagerly, no gateway, store or sandbox; then the same carrying
// dossier's audit trail (memo, search attributes); then with a local activity instead (one workflow
// task in all). dossier is `dossier start` as users run it, 8 MCP clients launching /usr/bin/true.
// The four take turns, twice.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freshLaunches, startProduct, sustained } from './breakdown.ts';
import { ms } from './lib.ts';

const CALLERS = 8;
const SECONDS = 15;
const ROUNDS = 2;
const here = path.dirname(fileURLToPath(import.meta.url));

interface Load {
  rate: number;
  p50: number;
  p99: number;
  cpuMs: Record<string, number>;
}

function floor(variant: 'bare' | 'audited' | 'local' = 'bare'): Promise<Load> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', path.join(here, 'floor', 'process.ts'), String(CALLERS), String(SECONDS), variant],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d));
    child.once('error', reject);
    child.once('exit', (code) => {
      const line = out.trim().split('\n').pop() ?? '';
      if (code !== 0 || !line.startsWith('{')) reject(new Error(`the floor process exited ${code}: ${out}`));
      else resolve(JSON.parse(line) as Load);
    });
  });
}

async function dossier(): Promise<Load> {
  const stack = await startProduct();
  try {
    await freshLaunches(stack, 'warm', 5);
    await sustained(stack, CALLERS, 3, 'warm-load');
    return await sustained(stack, CALLERS, SECONDS, 'load');
  } finally {
    await stack.stop();
  }
}

const row = (name: string, l: Load) =>
  `| ${name} | ${l.rate.toFixed(1)}/s | ${ms(l.p50)} | ${ms(l.p99)} | ${Object.values(l.cpuMs)
    .map((x) => x.toFixed(1))
    .join(' / ')} ms |`;

export async function benchFloor(): Promise<string[]> {
  const rows = [
    `| ${CALLERS} callers for ${SECONDS} s, /usr/bin/true | launches/s | p50 | p99 | CPU per launch |`,
    '|---|---|---|---|---|',
  ];
  for (let round = 1; round <= ROUNDS; round++) {
    const bare = await floor();
    const audited = await floor('audited');
    const local = await floor('local');
    const ours = await dossier();
    rows.push(
      row(`bare Temporal, round ${round} (process / programs / Temporal server)`, bare),
      row(`bare Temporal with dossier's memo and search attributes, round ${round}`, audited),
      row(`bare Temporal, the activity a local activity, round ${round}`, local),
      row(`dossier, round ${round} (dossier process / programs / Temporal server)`, ours),
      `| ratio dossier / bare Temporal, round ${round} | ${(ours.rate / bare.rate).toFixed(2)} | ${(ours.p50 / bare.p50).toFixed(2)} | | |`,
    );
  }
  return rows;
}
