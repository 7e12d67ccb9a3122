// Runs the Temporal CLI dev server on a SQLite file with its Web UI, as a child
// process this module owns: started, awaited until it answers, stopped on demand.
import { spawn, type ChildProcess, type ChildProcessByStdio } from 'node:child_process';
import type { Readable } from 'node:stream';
import { createWriteStream, existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import type { TemporalCli } from './temporalCli.ts';

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
    // Let a starter that shares its connection with a worker take the first workflow task at once.
    '--dynamic-config-value',
    'system.enableEagerWorkflowStart=true',
  ];
  const child = spawnOwned(opts.cli.path, args);
  let tail = '';
  const log = opts.logFile ? createWriteStream(opts.logFile, { flags: 'a' }) : undefined;
  const keepTail = (chunk: Buffer) => {
    log?.write(chunk);
    tail = (tail + chunk.toString()).slice(-4_000);
  };
  child.stdout.on('data', keepTail);
  child.stderr.on('data', keepTail);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));

  const address = `${ip}:${opts.port}`;
  const ready = waitForPort(ip, opts.port, 60_000);
  const outcome = await Promise.race([
    ready.then(() => 'ready' as const),
    exited.then(() => 'exited' as const),
  ]);
  if (outcome === 'exited') {
    log?.end();
    throw new Error(
      `The Temporal dev server exited during start-up (is port ${opts.port} or ${opts.uiPort} in use? set DOSSIER_TEMPORAL_PORT / DOSSIER_UI_PORT). Its last output:\n${tail}`,
    );
  }
  return {
    address,
    uiUrl: `http://${ip}:${opts.uiPort}`,
    pid: child.pid,
    stop: () => stopChild(child, exited).finally(() => log?.end()),
  };
}

/**
 * Spawns a server the stack owns so that it dies with the stack, however the
 * stack ends: setpriv sets the parent-death signal and execs the server, so a
 * stack killed by SIGKILL or the OOM killer leaves no server holding its ports
 * and files (a restart would otherwise fail, or talk to a stale server).
 */
export function spawnOwned(command: string, args: string[]): ChildProcessByStdio<null, Readable, Readable> {
  const setpriv = ['/usr/bin/setpriv', '/bin/setpriv'].find((p) => existsSync(p));
  return setpriv
    ? spawn(setpriv, ['--pdeathsig', 'SIGKILL', '--', command, ...args], {
        stdio: ['ignore', 'pipe', 'pipe'],
      })
    : spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
}

export async function stopChild(child: ChildProcess, exited: Promise<unknown>) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}

export async function waitForPort(host: string, port: number, timeoutMs: number) {
  const net = await import('node:net');
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const open = await new Promise<boolean>((resolve) => {
      const socket = net.connect({ host, port }, () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (open) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`Temporal dev server did not open ${host}:${port} within ${timeoutMs} ms`);
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
