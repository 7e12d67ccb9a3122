// Function boundaries against the compiler's truth (issue 36): real programs
// (bench/boundariesBuild.ts) built with gcc and clang at -O0/-O2/-O3 for
// x86-64, aarch64 and armhf, stripped; each stripped build analysed twice, one
// after the other: bare angr CFGFast as today's provider ran it (its function
// list as that provider wrote it: angr's functions in the binary, less
// alignment) and dossier's database build (the sandboxed provider and the
// SQLite database, exactly what list_functions reads). Both lists are scored
// against the unstripped build's FUNC symbols (tests/helpers/boundaries.ts).
//
//   npm run bench -- boundaries
//   DOSSIER_BENCH_BOUNDARIES='^x86-64/gcc/-O2/' npm run bench -- boundaries   (a subset: a regular expression on the build's name)
//   DOSSIER_BENCH_RUNS=3 …   (each side three times, alternating; the table has the medians)
import { spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { buildDatabase } from '../src/analysis/build.ts';
import { provisionProvider } from '../src/analysis/venv.ts';
import { loadConfig } from '../src/config.ts';
import { Sandbox } from '../src/sandbox/sandbox.ts';
import { groundTruth, scoreFunctions, type Predicted, type Score } from '../tests/helpers/boundaries.ts';
import { LEVELS, TOOLCHAINS, build, programs, toolchainWorks, type Build } from './boundariesBuild.ts';
import { benchDir, median } from './lib.ts';

// The analysis today's provider ran (src/analysis/angr/angr_db.py before issue 36), printing its function list.
const BARE = `
import sys, json, logging
for n in ("angr", "cle", "pyvex", "claripy", "archinfo"): logging.getLogger(n).setLevel(logging.CRITICAL)
import angr
p = angr.Project(sys.argv[1], auto_load_libs=False, load_debug_info=False,
                 cache_limits={"functions": None, "cfg_nodes": None, "cfg_edges": None})
cfg = p.analyses.CFGFast(normalize=True, data_references=True, cross_references=False, show_progressbar=False)
obj = p.loader.main_object
out = []
for f in cfg.kb.functions.values():
    if not obj.contains_addr(f.addr) or f.is_simprocedure or f.is_alignment or f.is_plt:
        continue
    ends = [b + s for b, s in f._block_sizes.items() if b in f.block_addrs_set]
    out.append([f.addr, max(ends, default=f.addr)])
print(json.dumps({"functions": out, "delta": obj.mapped_base - obj.linked_base}))
`;

function runBare(
  python: string,
  binary: string,
): Promise<{ ms: number; predicted: Predicted[]; delta: number }> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn(python, ['-c', BARE, binary], { stdio: ['ignore', 'pipe', 'ignore'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.once('error', reject);
    child.once('exit', (code) => {
      if (code !== 0) return reject(new Error(`bare angr exit ${code}`));
      const { functions, delta } = JSON.parse(out) as { functions: [number, number][]; delta: number };
      resolve({
        ms: performance.now() - t0,
        predicted: functions.map(([address, end]) => ({ address, end })),
        delta,
      });
    });
  });
}

const RUNS = Math.min(9, Math.max(1, Number(process.env.DOSSIER_BENCH_RUNS ?? 1) || 1));

interface Row {
  build: Build;
  before: Score;
  after: Score;
  bareMs: number;
  buildMs: number;
  foundBy: Record<string, number>;
}

const f3 = (x: number) => x.toFixed(3);
const prf = (s: Score, k: 'starts' | 'extents') =>
  `${f3(s[k].precision)} / ${f3(s[k].recall)} / **${f3(s[k].f1)}**`;

export async function benchBoundaries(): Promise<string[]> {
  const work = benchDir('boundaries');
  const log = (line: string) => console.error(`boundaries: ${line}`);
  const filter = process.env.DOSSIER_BENCH_BOUNDARIES;
  const config = loadConfig({ DOSSIER_HOME: path.join(work, 'home') });
  const provider = await provisionProvider(config.analysis.python);
  const sandbox = new Sandbox(config.sandbox);
  const lines: string[] = [];
  const progs = programs(work, log);
  const rows: Row[] = [];
  for (const t of TOOLCHAINS) {
    const broken = toolchainWorks(t, work);
    if (broken) {
      lines.push(`- ${t.arch} ${t.compiler}: not built here (${broken})`);
      continue;
    }
    for (const level of LEVELS) {
      for (const p of progs) {
        const name = `${t.arch}/${t.compiler}/${level}/${p.name}`;
        if (filter && !new RegExp(filter).test(name)) continue;
        let b: Build;
        try {
          b = build(work, t, level, p);
        } catch (err) {
          const stderr = String((err as { stderr?: Buffer }).stderr ?? '').trim();
          lines.push(
            `- ${name}: did not build (${stderr.split('\n').at(-1) || (err as Error).message.slice(0, 200)})`,
          );
          continue;
        }
        const truth = groundTruth(b.unstripped);
        // Each side RUNS times, alternating, the medians reported (the scores do not move between runs).
        const bareMs: number[] = [];
        const buildMs: number[] = [];
        let bare: Awaited<ReturnType<typeof runBare>> | undefined;
        let built: Awaited<ReturnType<typeof databaseBuild>> | undefined;
        for (let run = 0; run < RUNS; run++) {
          log(`${name}: bare angr (${run + 1} of ${RUNS})`);
          bare = await runBare(provider.python, b.stripped);
          bareMs.push(bare.ms);
          log(`${name}: database build (${run + 1} of ${RUNS})`);
          built = await databaseBuild(
            sandbox,
            provider,
            path.join(work, `${name.replaceAll('/', '_')}.sqlite`),
            b,
          );
          buildMs.push(built.ms);
        }
        const { fns, delta } = built!;
        const foundBy: Record<string, number> = {};
        for (const f of fns) foundBy[f.found_by] = (foundBy[f.found_by] ?? 0) + 1;
        const after = scoreFunctions(
          truth,
          fns
            .filter((f) => !f.is_plt)
            .map((f) => ({ address: f.address, end: f.end_address, partOf: f.part_of })),
          delta,
        );
        const row: Row = {
          build: b,
          before: scoreFunctions(truth, bare!.predicted, bare!.delta),
          after,
          bareMs: median(bareMs),
          buildMs: median(buildMs),
          foundBy,
        };
        rows.push(row);
        log(
          `${name}: truth ${after.truth}; F1 starts ${f3(row.before.starts.f1)} -> ${f3(after.starts.f1)}, ` +
            `extents ${f3(row.before.extents.f1)} -> ${f3(after.extents.f1)}; ${(row.bareMs / 1000).toFixed(1)} s bare, ` +
            `${(row.buildMs / 1000).toFixed(1)} s build (medians of ${RUNS}); missed ${after.missed.slice(0, 5).join(', ')}; ` +
            `spurious ${after.spurious.slice(0, 5).join(', ')}`,
        );
        log(`${name}: row ${tableRow(row)}`); // a stopped run keeps its rows
      }
    }
  }
  return [...lines, '', ...tables(rows)];
}

/** dossier's database build of one file (the sandboxed provider and SQLite): its time and function rows. */
async function databaseBuild(
  sandbox: Sandbox,
  provider: Awaited<ReturnType<typeof provisionProvider>>,
  file: string,
  b: Build,
) {
  rmSync(file, { force: true });
  const t0 = performance.now();
  const built = await buildDatabase(sandbox, file, {
    provider,
    binary: b.stripped,
    profile: 'default',
    timeBudgetS: 3600,
    memoryBytes: 8 * 1024 ** 3,
    signal: new AbortController().signal,
    onProgress: () => undefined,
  });
  const ms = performance.now() - t0;
  const db = new Database(file, { readonly: true });
  const fns = db.prepare('SELECT address, end_address, is_plt, found_by, part_of FROM functions').all() as {
    address: number;
    end_address: number;
    is_plt: number;
    found_by: string;
    part_of: number | null;
  }[];
  db.close();
  const binary = built.meta.binary as { load_base: number; link_base: number };
  return { ms, fns, delta: binary.load_base - binary.link_base };
}

function tables(rows: Row[]): string[] {
  const out: string[] = [];
  const groups = new Map<string, Row[]>();
  for (const r of rows) {
    const key = `${r.build.toolchain.arch} · ${r.build.toolchain.compiler} · ${r.build.level}`;
    groups.set(key, [...(groups.get(key) ?? []), r]);
  }
  for (const [key, group] of groups) {
    out.push(
      `#### ${key}`,
      '',
      '| program | functions | starts P / R / F1 before | starts P / R / F1 after | extents P / R / F1 before | extents P / R / F1 after | .cold parts attached | found_by after | bare CFGFast | database build | ratio |',
      '|---|---|---|---|---|---|---|---|---|---|---|',
    );
    for (const r of group) out.push(tableRow(r));
    out.push('');
  }
  return out;
}

function tableRow(r: Row): string {
  const fb = Object.entries(r.foundBy)
    .map(([k, v]) => `${k} ${v}`)
    .join(', ');
  return (
    `| ${r.build.program} | ${r.after.truth} | ${prf(r.before, 'starts')} | ${prf(r.after, 'starts')} | ` +
    `${prf(r.before, 'extents')} | ${prf(r.after, 'extents')} | ${r.after.parts.attached} of ${r.after.parts.truth} | ${fb} | ${(r.bareMs / 1000).toFixed(1)} s | ` +
    `${(r.buildMs / 1000).toFixed(1)} s | ${(r.buildMs / r.bareMs).toFixed(2)}× |`
  );
}
