// Analysis figures (issue 10): the database build against the same angr
// analysis run bare, side by side; a cached trace_feature; and a generated
// binary with 8,000 references to one string (every owner unavailable, as in
// seed 001's measurement): the summary view's size and latency and a 64-row
// references page's latency, through the gateway over MCP.
import { execFileSync, spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { buildDatabase } from '../src/analysis/build.ts';
import { provisionProvider } from '../src/analysis/venv.ts';
import { loadConfig } from '../src/config.ts';
import { Sandbox } from '../src/sandbox/sandbox.ts';
import { benchDir, benchStack, callTool, connect, median, ms, timed } from './lib.ts';

const BARE = `
import sys, logging
for n in ("angr", "cle", "pyvex", "claripy", "archinfo"): logging.getLogger(n).setLevel(logging.CRITICAL)
import angr
p = angr.Project(sys.argv[1], auto_load_libs=False, load_debug_info=False,
                 cache_limits={"functions": None, "cfg_nodes": None, "cfg_edges": None})
cfg = p.analyses.CFGFast(normalize=True, data_references=True, cross_references=False, show_progressbar=False)
print(len(cfg.kb.functions))
`;

function runBare(python: string, binary: string): Promise<number> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn(python, ['-c', BARE, binary], { stdio: 'ignore' });
    child.once('error', reject);
    child.once('exit', (code) =>
      code === 0 ? resolve(performance.now() - t0) : reject(new Error(`bare exit ${code}`)),
    );
  });
}

export async function benchAnalysis(): Promise<string[]> {
  const lines: string[] = [];
  const work = benchDir('analysis');
  const config = loadConfig({ DOSSIER_HOME: path.join(work, 'home') });
  const provider = await provisionProvider(config.analysis.python);
  const sandbox = new Sandbox(config.sandbox);

  // 1. Database build (sandbox, JSON lines, SQLite written by dossier) vs the bare analysis, alternating.
  lines.push(
    '| binary | bare angr CFGFast (median of 3) | database build (median of 3) | ratio |',
    '|---|---|---|---|',
  );
  for (const binary of ['/usr/bin/true', '/usr/bin/sed']) {
    const bare: number[] = [];
    const built: number[] = [];
    for (let i = 0; i < 3; i++) {
      bare.push(await runBare(provider.python, binary));
      const [t] = await timed(() =>
        buildDatabase(sandbox, path.join(work, `db-${path.basename(binary)}-${i}.sqlite`), {
          provider,
          binary,
          profile: 'default',
          timeBudgetS: 600,
          memoryBytes: 8 * 1024 ** 3,
          signal: new AbortController().signal,
          onProgress: () => undefined,
        }),
      );
      built.push(t);
    }
    lines.push(
      `| ${binary} | ${ms(median(bare))} | ${ms(median(built))} | ${(median(built) / median(bare)).toFixed(2)}× |`,
    );
  }
  lines.push('');

  // 2 and 3 through the gateway.
  const roots = path.join(work, 'roots');
  execFileSync('mkdir', ['-p', roots]);
  const source = path.join(work, 'refs.c');
  writeFileSync(
    source,
    `#define S "FEATURE_FLAG_TELEMETRY"\nconst char *const refs[8000] = { ${Array(8000).fill('S').join(', ')} };\nint main(void) { return refs[0][0]; }\n`,
  );
  const refs = path.join(roots, 'refs');
  execFileSync('gcc', ['-O0', '-o', refs, source]);
  const stack = await benchStack({ DOSSIER_ALLOWED_ROOTS: `/usr/bin:${roots}` });
  try {
    const client = await connect(stack);
    const digest = (await callTool(client, 'register_artifact', { path: refs })).artifact.digest as string;
    const [first, trace] = await timed(() =>
      callTool(client, 'trace_feature', {
        artifact: digest,
        query: 'FEATURE_FLAG_TELEMETRY',
        wait_ms: 110_000,
        detail: 'summary',
      }),
    );
    if (trace.status !== 'succeeded') throw new Error(`trace_feature: ${JSON.stringify(trace)}`);
    const cached: number[] = [];
    for (let i = 0; i < 20; i++) {
      cached.push(
        (
          await timed(() =>
            callTool(client, 'trace_feature', {
              artifact: digest,
              query: 'FEATURE_FLAG_TELEMETRY',
              detail: 'summary',
            }),
          )
        )[0],
      );
    }
    const fresh: number[] = [];
    for (let i = 0; i < 5; i++) {
      fresh.push(
        (
          await timed(() =>
            callTool(client, 'trace_feature', {
              artifact: digest,
              query: `FEATURE_${i}`,
              search_mode: 'literal',
              detail: 'summary',
            }),
          )
        )[0],
      );
    }
    const summaries: number[] = [];
    let summaryBytes = 0;
    const pages: number[] = [];
    let pageBytes = 0;
    for (let i = 0; i < 20; i++) {
      const [ts, summary] = await timed(() =>
        client.callTool({
          name: 'inspect_analysis_view',
          arguments: { evidence_id: trace.evidence_id, view: { kind: 'summary' } },
        }),
      );
      summaries.push(ts);
      summaryBytes = Buffer.byteLength((summary.content as { text: string }[])[0]!.text);
      const [tp, page] = await timed(() =>
        client.callTool({
          name: 'inspect_analysis_view',
          arguments: {
            evidence_id: trace.evidence_id,
            view: { kind: 'page', collection: 'references', offset: (i * 397) % 7_936, limit: 64 },
          },
        }),
      );
      pages.push(tp);
      pageBytes = Buffer.byteLength((page.content as { text: string }[])[0]!.text);
    }
    // The same views in-process, through the transport-free gateway (what REA's figures measured), and the
    // cheapest call over MCP as the floor of the HTTP figures above.
    const caller = { principal: 'local', team: 'local', role: 'admin' as const };
    const view = (v: Record<string, unknown>) =>
      timed(() =>
        stack.gateway!.callTool(caller, 'inspect_analysis_view', { evidence_id: trace.evidence_id, view: v }),
      );
    const inSummary: number[] = [];
    const inPage: number[] = [];
    const whoami: number[] = [];
    for (let i = 0; i < 20; i++) {
      inSummary.push((await view({ kind: 'summary' }))[0]);
      inPage.push(
        (await view({ kind: 'page', collection: 'references', offset: (i * 397) % 7_936, limit: 64 }))[0],
      );
      whoami.push((await timed(() => callTool(client, 'whoami', {})))[0]);
    }
    const complete = await callTool(client, 'trace_feature', {
      artifact: digest,
      query: 'FEATURE_FLAG_TELEMETRY',
    });
    lines.push(
      '| figure (generated binary, 8,000 data references to one string, owners unavailable) | value |',
      '|---|---|',
    );
    lines.push(
      `| first trace_feature (database build + query + retention of 8,000 rows and unknowns) | ${ms(first)} |`,
    );
    lines.push(
      `| trace_feature references / residual unknowns | ${trace.summary.references} / ${trace.summary.residual_unknowns} |`,
    );
    lines.push(
      `| cached trace_feature, same request (20 runs, p50; target ≤ 50 ms) | ${ms(median(cached))} |`,
    );
    lines.push(`| new trace_feature on the built database (5 runs, p50) | ${ms(median(fresh))} |`);
    lines.push(
      `| inspect_analysis_view summary: reply size (target ≤ 2,474 B) | ${summaryBytes.toLocaleString('en')} B |`,
    );
    lines.push(
      `| inspect_analysis_view summary p50 over MCP (20 runs; target ≤ 5 ms) | ${ms(median(summaries))} |`,
    );
    lines.push(
      `| 64-row references page p50 over MCP (20 offsets; target ≤ 3 ms) | ${ms(median(pages))} (${pageBytes.toLocaleString('en')} B) |`,
    );
    lines.push(`| inspect_analysis_view summary p50 in-process (20 runs) | ${ms(median(inSummary))} |`);
    lines.push(`| 64-row references page p50 in-process (20 offsets) | ${ms(median(inPage))} |`);
    lines.push(`| floor: whoami p50 over MCP, same connection (20 runs) | ${ms(median(whoami))} |`);
    lines.push(`| detail complete → continuation offered | ${JSON.stringify(complete.continuation)} |`);
  } finally {
    await stack.stop();
  }
  return lines;
}
