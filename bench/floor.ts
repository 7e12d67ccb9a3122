// `npm run bench -- floor`: sustained launches against their floor on Temporal, in one run. The floor
// is bare Temporal on the same dev server flags (bench/floor/process.ts): one workflow, one activity
// that spawns /usr/bin/true, started eagerly, no gateway, store or sandbox; then the same carrying
// dossier's audit trail (memo, search attributes); then with a local activity instead (one workflow
// task in all). dossier is `dossier start` as users run it, MCP clients launching /usr/bin/true,
// with each effect dispatch (DOSSIER_LAUNCH_DISPATCH activity, then local). At 1, 8 and 32 callers
// (DOSSIER_BENCH_FLOOR_CALLERS, a comma list, picks others), the five take turns, twice; each
// round's ratios compare figures of the same minutes, and a round of one caller times a direct
// spawn of /usr/bin/true too, which a fresh launch's p50 is measured over. With
// DOSSIER_BENCH_FLOOR_SERVER naming a Temporal server of 1.31 or later (a binary's path, or a
// version such as v1.32.1 to build with Go into dossier's cache once, about 5 minutes), each round
// also runs bare Temporal and a standalone activity (started by ID, no workflow) on that server.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freshLaunches, startProduct, sustained } from './breakdown.ts';
import { benchDir, median, ms, spawnTrue } from './lib.ts';
import { resolveServerVersion, startServerBinary } from '../src/dev/sqliteServer.ts';

const CALLER_COUNTS = (process.env.DOSSIER_BENCH_FLOOR_CALLERS ?? '1,8,32')
  .split(',')
  .map(Number)
  .filter((n) => Number.isInteger(n) && n > 0 && n <= 256);
const SECONDS = 15;
const ROUNDS = 2;
const here = path.dirname(fileURLToPath(import.meta.url));

interface Load {
  rate: number;
  p50: number;
  p99: number;
  cpuMs: Record<string, number>;
  /** The launching process's CPU per launch by thread (lib.ts threadSplit). */
  threadMs: Record<string, number>;
}

type Variant = 'bare' | 'audited' | 'local' | 'standalone';

/** DOSSIER_BENCH_FLOOR_SERVER as a binary's path: a version is built with Go (cached). */
async function resolveServer(): Promise<string | undefined> {
  const wanted = process.env.DOSSIER_BENCH_FLOOR_SERVER;
  if (!wanted || !/^v\d+\.\d+\.\d+$/.test(wanted)) return wanted;
  return resolveServerVersion(wanted);
}

/** One floor process, on the CLI's dev server or, given one, a server binary. */
function floor(callers: number, variant: Variant = 'bare', serverBinary?: string): Promise<Load> {
  const env = { ...process.env };
  if (serverBinary) env.DOSSIER_BENCH_FLOOR_SERVER = serverBinary;
  else delete env.DOSSIER_BENCH_FLOOR_SERVER;
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', path.join(here, 'floor', 'process.ts'), String(callers), String(SECONDS), variant],
      { stdio: ['ignore', 'pipe', 'inherit'], env },
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

/** `dossier start` with one dispatch, on the CLI's dev server or, given one, a server binary's. */
async function dossier(
  callers: number,
  dispatch: 'activity' | 'local' | 'standalone',
  serverBinary?: string,
): Promise<Load> {
  const dir = serverBinary ? benchDir() : undefined;
  const server = serverBinary ? await startServerBinary(serverBinary, dir!, [], 1) : undefined;
  try {
    const stack = await startProduct(
      {
        DOSSIER_LAUNCH_DISPATCH: dispatch,
        ...(server ? { DOSSIER_TEMPORAL_ADDRESS: server.address } : {}),
      },
      [],
      server,
    );
    try {
      await freshLaunches(stack, 'warm', 5);
      await sustained(stack, callers, 3, 'warm-load');
      return await sustained(stack, callers, SECONDS, 'load');
    } finally {
      await stack.stop();
    }
  } finally {
    await server?.stop();
  }
}

async function directSpawn(runs = 50): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < runs; i++) times.push(await spawnTrue());
  return median(times);
}

const figures = (xs: Record<string, number>) =>
  Object.values(xs)
    .map((x) => x.toFixed(1))
    .join(' / ');
const row = (name: string, l: Load) =>
  `| ${name} | ${l.rate.toFixed(1)}/s | ${ms(l.p50)} | ${ms(l.p99)} | ${figures(l.cpuMs)} ms | ${figures(l.threadMs)} ms |`;

export async function benchFloor(): Promise<string[]> {
  const serverBinary = await resolveServer();
  const rows = [
    `| callers, ${SECONDS} s each, /usr/bin/true | launches/s | p50 | p99 | CPU per launch | the process's, by thread: main / Temporal core / busiest other (the workflow sandbox) / the rest / threads that ended |`,
    '|---|---|---|---|---|---|',
  ];
  for (const callers of CALLER_COUNTS) {
    for (let round = 1; round <= ROUNDS; round++) {
      const bare = await floor(callers);
      const audited = await floor(callers, 'audited');
      const bareLocal = await floor(callers, 'local');
      const ours = await dossier(callers, 'activity');
      const oursLocal = await dossier(callers, 'local');
      const at = `${callers} callers, round ${round}`;
      const ratio = (name: string, l: Load, floor = bare, what = 'bare Temporal') =>
        `| **ratio ${name} / ${what}, ${at}** | ${(l.rate / floor.rate).toFixed(2)} | ${(l.p50 / floor.p50).toFixed(2)} | | | |`;
      rows.push(
        row(`bare Temporal, ${at} (process / programs / Temporal server)`, bare),
        row(`bare Temporal with dossier's memo and search attributes, ${at}`, audited),
        row(`bare Temporal, the activity a local activity, ${at}`, bareLocal),
        row(`dossier, ${at} (dossier process / programs / Temporal server / the MCP callers)`, ours),
        row(`dossier, DOSSIER_LAUNCH_DISPATCH=local, ${at}`, oursLocal),
        ratio('dossier', ours),
        ratio('dossier local dispatch', oursLocal),
      );
      if (serverBinary) {
        const newer = await floor(callers, 'bare', serverBinary);
        const standalone = await floor(callers, 'standalone', serverBinary);
        const oursThere = await dossier(callers, 'activity', serverBinary);
        const oursStandalone = await dossier(callers, 'standalone', serverBinary);
        const sameServer = 'bare Temporal on the same server';
        rows.push(
          row(`dossier on the same server, ${at}`, oursThere),
          row(`dossier on the same server, DOSSIER_LAUNCH_DISPATCH=standalone, ${at}`, oursStandalone),
          ratio('dossier', oursThere, newer, sameServer),
          ratio('dossier standalone', oursStandalone, newer, sameServer),
          ratio('dossier standalone', oursStandalone, bare, 'bare Temporal (dev server)'),
          row(`bare Temporal on ${path.basename(serverBinary)} (DOSSIER_BENCH_FLOOR_SERVER), ${at}`, newer),
          row(`a standalone activity on the same server, ${at}`, standalone),
          ratio('standalone', standalone, newer, sameServer),
        );
      }
      if (callers === 1) {
        const spawned = await directSpawn();
        rows.push(
          `| direct spawn of /usr/bin/true, p50 of 50, ${at}; a fresh launch over it: dossier ${ms(ours.p50 - spawned)}, local dispatch ${ms(oursLocal.p50 - spawned)} | | ${ms(spawned)} | | | |`,
        );
      }
    }
  }
  return rows;
}
