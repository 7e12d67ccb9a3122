// The fast test loop (issue 32): `npm run test:unit` in a fresh clone's
// conditions, with a HOME of its own where nothing was ever provisioned (no
// Temporal CLI or server, no PostgreSQL, no angr or unpacker virtualenvs), so
// the figure is what a newcomer's first run pays. Wall time per run, median.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { median } from './lib.ts';

export async function benchUnitLoop(): Promise<string[]> {
  const runs = Number(process.env.DOSSIER_BENCH_RUNS ?? 5);
  const home = mkdtempSync(path.join(os.tmpdir(), 'dossier-unit-home-'));
  const seconds: number[] = [];
  let tests = '';
  try {
    for (let i = 0; i < runs; i++) {
      const t0 = performance.now();
      const run = spawnSync('npm', ['run', 'test:unit', '--silent'], {
        env: { ...process.env, HOME: home, CI: 'true', NO_COLOR: '1', FORCE_COLOR: '0' },
        encoding: 'utf8',
      });
      seconds.push((performance.now() - t0) / 1000);
      if (run.status !== 0) throw new Error(`npm run test:unit failed:\n${run.stdout}\n${run.stderr}`);
      tests = /Tests\s+(\d+ passed[^\n]*)/.exec(run.stdout)?.[1] ?? '';
    }
    // Nothing was provisioned on the way: the HOME holds npm's cache at most.
    const left = readdirSync(home).filter((f) => f !== '.npm');
    return [
      '| figure | value |',
      '|---|---|',
      `| npm run test:unit, wall time, median of ${runs} | ${median(seconds).toFixed(1)} s (runs: ${seconds.map((s) => s.toFixed(1)).join(', ')}) |`,
      `| tests | ${tests} |`,
      `| provisioned into the fresh HOME | ${left.length ? left.join(', ') : 'nothing'} |`,
      `| load average at the end | ${os.loadavg()[0]!.toFixed(1)} |`,
    ];
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}
