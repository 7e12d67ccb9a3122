// Runs the Temporal CLI dev server on a SQLite file with its Web UI, as a child
// process this module owns: started, awaited until it answers, stopped on demand.
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { startOwned, waitForPort } from './owned.ts';
import type { TemporalCli } from './temporalCli.ts';

/**
 * How often History may read its transfer queue, per shard; Temporal's default is 20. Reads follow
 * the writes that notify them, so a higher ceiling costs reads only while launches come faster.
 */
export const TRANSFER_QUEUE_READS_PER_SECOND = 200;

export interface DevServerOptions {
  cli: TemporalCli;
  dbFile: string;
  port: number;
  uiPort: number;
  namespace: string;
  ip?: string;
  logFile?: string;
  /** No built-in Web UI (the embedded stack runs its own, read-only one). */
  headless?: boolean;
  /** More dynamic config, `key=value` each, after dossier's own (a later value of a key wins). */
  dynamicConfig?: string[];
}

export interface DevServer {
  address: string;
  uiUrl: string;
  pid: number | undefined;
  stop(): Promise<void>;
}

export async function startDevServer(opts: DevServerOptions): Promise<DevServer> {
  const ip = opts.ip ?? '127.0.0.1';
  mkdirSync(path.dirname(opts.dbFile), { recursive: true });
  if (opts.cli.kind === 'sdk-download') return startWithSdkDownload(opts, ip);

  const args = [
    'server',
    'start-dev',
    '--db-filename',
    opts.dbFile,
    '--ip',
    ip,
    '--port',
    String(opts.port),
    ...(opts.headless ? ['--headless'] : ['--ui-port', String(opts.uiPort)]),
    '--namespace',
    opts.namespace,
    '--log-level',
    'warn',
    // WAL keeps the file consistent if the server is killed mid-write.
    '--sqlite-pragma',
    'journal_mode=wal',
    // In WAL mode NORMAL loses nothing when a process dies (only a power cut can lose the last commits)
    // and spares an fsync per commit.
    '--sqlite-pragma',
    'synchronous=normal',
    // Let a starter that shares its connection with a worker take the first workflow task at once,
    // and a worker that schedules an activity on its own task queue take that activity at once.
    '--dynamic-config-value',
    'system.enableEagerWorkflowStart=true',
    '--dynamic-config-value',
    'system.enableActivityEagerExecution=true',
    // History reads its transfer queue (an activity's or a workflow task's dispatch to matching) at
    // most 20 times a second by default: launches one after another then wait up to 50 ms for it.
    '--dynamic-config-value',
    `history.transferProcessorMaxPollRPS=${TRANSFER_QUEUE_READS_PER_SECOND}`,
    ...(opts.dynamicConfig ?? []).flatMap((value) => ['--dynamic-config-value', value]),
  ];
  const proc = await startOwned({
    name: 'The Temporal dev server',
    command: opts.cli.path,
    args,
    logFile: opts.logFile,
    hint: `is port ${opts.port} or ${opts.uiPort} in use? set DOSSIER_TEMPORAL_PORT / DOSSIER_UI_PORT`,
    ready: () => waitForPort(ip, opts.port, 60_000),
  });
  return {
    address: `${ip}:${opts.port}`,
    uiUrl: `http://${ip}:${opts.uiPort}`,
    pid: proc.pid,
    stop: () => proc.stop(),
  };
}

/** Fallback for machines with internet but no Go: the SDK downloads and runs the CLI itself. */
async function startWithSdkDownload(opts: DevServerOptions, ip: string): Promise<DevServer> {
  const { TestWorkflowEnvironment } = await import('@temporalio/testing');
  const env = await TestWorkflowEnvironment.createLocal({
    server: {
      executable: { type: 'cached-download' },
      ip,
      port: opts.port,
      ui: true,
      uiPort: opts.uiPort,
      namespace: opts.namespace,
      dbFilename: opts.dbFile,
    },
  });
  return {
    address: `${ip}:${opts.port}`,
    uiUrl: `http://${ip}:${opts.uiPort}`,
    pid: undefined,
    stop: () => env.teardown(),
  };
}
