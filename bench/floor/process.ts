// The floor for sustained launches, as a process of its own: bare Temporal (the dev server with
// dossier's flags, one TypeScript worker, the default data converter) running a workflow with one
// activity that spawns /usr/bin/true, started eagerly by a client sharing the worker's connection.
// No gateway, no MCP, no store, no sandbox. Prints one line of JSON: rate, latencies, CPU per run.
//
// With `audited`, each workflow also carries what a dossier launch carries for the audit: a memo,
// five search attributes at its start, two more upserted at its end, and the same ID policies.
// With `local`, the activity is a local activity (one workflow task, no activity task). With
// `standalone`, no workflow at all: the activity is started by ID (conflict policy USE_EXISTING, the
// key contract's attach) and its result awaited, on a server new enough to have standalone activities
// (1.31+): DOSSIER_BENCH_FLOOR_SERVER names a Temporal server binary to run instead of the CLI's dev
// server (src/dev/sqliteServer.ts), for every variant of that process.
//
//   node --import tsx bench/floor/process.ts <callers> <seconds> [bare|audited|local|standalone]
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, Runtime, Worker } from '@temporalio/worker';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startDevServer } from '../../src/dev/devServer.ts';
import { startServerBinary } from '../../src/dev/sqliteServer.ts';
import { ensureNamespace } from '../../src/temporal/setup.ts';
import { SEARCH_ATTRIBUTES } from '../../src/temporal/searchAttributes.ts';
import { resolveTemporalCli } from '../../src/dev/temporalCli.ts';
import { freePort } from '../../tests/helpers/ports.ts';
import { cpu, median, percentile, threadSplit, threadTimes } from '../lib.ts';

const [callers = 8, seconds = 15] = process.argv.slice(2, 4).map(Number);
const variant = process.argv[4] ?? 'bare';
const audited = variant === 'audited';
const here = path.dirname(fileURLToPath(import.meta.url));
const home = mkdtempSync(path.join(os.tmpdir(), 'dossier-bench-floor-'));
const binary = process.env.DOSSIER_BENCH_FLOOR_SERVER;
// More of the server's dynamic config, `key=value,key=value` (the dev server's flags, or the file).
const dynamicConfig = (process.env.DOSSIER_BENCH_FLOOR_DYNAMIC ?? '').split(',').filter(Boolean);
const server = binary
  ? await startServerBinary(binary, home, dynamicConfig, 1)
  : await startDevServer({
      cli: await resolveTemporalCli(),
      dbFile: path.join(home, 'temporal.db'),
      port: await freePort(),
      uiPort: await freePort(),
      namespace: 'floor',
      headless: true,
      dynamicConfig,
    });
Runtime.install({ logger: { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} } as never });

const spawnTrue = () =>
  new Promise<number>((resolve, reject) => {
    const child = spawn('/usr/bin/true', { stdio: 'ignore' });
    child.once('error', reject);
    child.once('exit', (code) => resolve(code ?? -1));
  });

try {
  if (audited || binary) {
    const admin = await Connection.connect({ address: server.address });
    await ensureNamespace(admin, 'floor', 1);
    await admin.close();
  }
  const connection = await NativeConnection.connect({ address: server.address });
  const worker = await Worker.create({
    connection,
    namespace: 'floor',
    taskQueue: 'floor',
    workflowsPath: path.join(here, 'workflow.ts'),
    activities: { spawnTrue },
  });
  const running = worker.run();
  const client = new Client({ connection: connection as never, namespace: 'floor' });
  let n = 0;
  const once = async () => {
    const id = `floor-${process.pid}-${n++}`;
    const audit = {
      memo: {
        tool: 'capture_process_scenario',
        principal: 'p',
        team: 't',
        key: id,
        body_digest: 'd'.repeat(64),
      },
      typedSearchAttributes: [
        { key: SEARCH_ATTRIBUTES.tool, value: 'capture_process_scenario' },
        { key: SEARCH_ATTRIBUTES.principal, value: 'p' },
        { key: SEARCH_ATTRIBUTES.team, value: 't' },
        { key: SEARCH_ATTRIBUTES.key, value: id },
        { key: SEARCH_ATTRIBUTES.bodyDigest, value: 'd'.repeat(64) },
      ],
      workflowIdConflictPolicy: 'USE_EXISTING' as const,
      workflowIdReusePolicy: 'REJECT_DUPLICATE' as const,
    };
    const workflow = { bare: 'floorWorkflow', audited: 'floorAuditedWorkflow', local: 'floorLocalWorkflow' }[
      variant
    ];
    if (!workflow && variant !== 'standalone')
      throw new Error(`unknown variant ${variant}: bare, audited, local or standalone`);
    const code: number = workflow
      ? await client.workflow.execute(workflow, {
          taskQueue: 'floor',
          workflowId: id,
          requestEagerStart: true,
          ...(audited ? audit : {}),
        })
      : await client.activity.execute('spawnTrue', {
          id,
          taskQueue: 'floor',
          startToCloseTimeout: '1 minute',
          retry: { maximumAttempts: 1 },
          idConflictPolicy: 'USE_EXISTING',
          idReusePolicy: 'REJECT_DUPLICATE',
        });
    if (code !== 0) throw new Error(`${id}: /usr/bin/true exited ${code}`);
  };
  const load = async (ms: number) => {
    const latencies: number[] = [];
    const deadline = performance.now() + ms;
    await Promise.all(
      Array.from({ length: callers }, async () => {
        while (performance.now() < deadline) {
          const s = performance.now();
          await once();
          latencies.push(performance.now() - s);
        }
      }),
    );
    return latencies;
  };
  await load(3_000);
  const before = { self: cpu('self'), temporal: cpu(server.pid!), threads: threadTimes('self') };
  const t0 = performance.now();
  const latencies = await load(seconds * 1000);
  const elapsed = (performance.now() - t0) / 1000;
  const after = { self: cpu('self'), temporal: cpu(server.pid!), threads: threadTimes('self') };
  const per = (x: number) => x / latencies.length;
  const threads = threadSplit(process.pid, before.threads, after.threads, after.self.own - before.self.own);
  console.log(
    JSON.stringify({
      rate: latencies.length / elapsed,
      p50: median(latencies),
      p99: percentile(latencies, 99),
      cpuMs: {
        process: per(after.self.own - before.self.own),
        programs: per(after.self.children - before.self.children),
        temporal: per(after.temporal.own - before.temporal.own),
      },
      threadMs: Object.fromEntries(Object.entries(threads).map(([k, v]) => [k, per(v)])),
    }),
  );
  worker.shutdown();
  await running;
  await connection.close();
} finally {
  await server.stop();
  rmSync(home, { recursive: true, force: true });
}
process.exit(0);
