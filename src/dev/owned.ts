// Servers a dossier process starts and owns (the Temporal dev server, a real
// Temporal server, the UI server, a cluster's gateways and workers): spawned so
// that they die with their owner, their output kept in a log file and a short
// tail for errors, awaited until ready, stopped on demand.
import { spawn, type ChildProcess, type ChildProcessByStdio } from 'node:child_process';
import { createWriteStream, existsSync } from 'node:fs';
import type { Readable } from 'node:stream';

export interface OwnedProcess {
  child: ChildProcess;
  /** Whether it has exited (or been killed). */
  readonly ended: boolean;
  pid: number | undefined;
  /** Resolves with the exit code (null when killed by a signal). */
  exited: Promise<number | null>;
  /** The last few KiB of its output. */
  tail(): string;
  /** Its stop signal (default SIGTERM), then SIGKILL after `graceMs` (default 10 s). */
  stop(graceMs?: number): Promise<void>;
}

export interface OwnedOptions {
  command: string;
  args: string[];
  /** Appended to; none keeps only the tail. */
  logFile?: string;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** The name in error messages. */
  name: string;
  /** Resolves once the process serves; a process that exits first fails the start. */
  ready: (proc: OwnedProcess) => Promise<void>;
  /** Added to the error when the process exits during start-up (e.g. which port to change). */
  hint?: string;
  /** Extra setpriv options, e.g. to run as another user (the parent-death signal survives them). */
  setpriv?: string[];
  /** The signal that asks it to stop (PostgreSQL: SIGINT, its fast shutdown). */
  stopSignal?: NodeJS.Signals;
}

/**
 * Spawns a server the caller owns so that it dies with its owner, however the
 * owner ends: setpriv sets the parent-death signal and execs the server, so an
 * owner killed by SIGKILL or the OOM killer leaves no server holding its ports
 * and files (a restart would otherwise fail, or talk to a stale server).
 */
function spawnOwned(
  command: string,
  args: string[],
  opts: { env?: NodeJS.ProcessEnv; cwd?: string; setpriv?: string[] } = {},
): ChildProcessByStdio<null, Readable, Readable> {
  const setpriv = ['/usr/bin/setpriv', '/bin/setpriv'].find((p) => existsSync(p));
  const { setpriv: extra = [], ...rest } = opts;
  const spawnOpts = {
    stdio: ['ignore', 'pipe', 'pipe'] as ['ignore', 'pipe', 'pipe'],
    // Its own process group: a terminal's Ctrl-C is for its owner, which stops what it started in
    // order (a worker finishes its launches while the Temporal server it reports to still runs).
    // Only with the parent-death signal: without setpriv nothing else ends it with its owner.
    detached: Boolean(setpriv),
    ...rest,
  };
  if (!setpriv && extra.length) throw new Error('setpriv (util-linux) is needed to start this server');
  return setpriv
    ? spawn(setpriv, [...extra, '--pdeathsig', 'SIGKILL', '--', command, ...args], spawnOpts)
    : spawn(command, args, spawnOpts);
}

export async function startOwned(opts: OwnedOptions): Promise<OwnedProcess> {
  const child = spawnOwned(opts.command, opts.args, { env: opts.env, cwd: opts.cwd, setpriv: opts.setpriv });
  const log = opts.logFile ? createWriteStream(opts.logFile, { flags: 'a' }) : undefined;
  let tail = '';
  const keep = (chunk: Buffer) => {
    log?.write(chunk);
    tail = (tail + chunk.toString()).slice(-4_000);
  };
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code) => {
      log?.end();
      resolve(code);
    }),
  );
  const proc: OwnedProcess = {
    child,
    pid: child.pid,
    get ended() {
      return child.exitCode !== null || child.signalCode !== null;
    },
    exited,
    tail: () => tail,
    stop: (graceMs = 10_000) => stopChild(child, exited, graceMs, opts.stopSignal),
  };
  let readyError: unknown;
  const outcome = await Promise.race([
    opts.ready(proc).then(
      () => 'ready' as const,
      (err: unknown) => {
        readyError = err;
        return 'not ready' as const;
      },
    ),
    exited.then(() => 'exited' as const),
  ]);
  if (outcome === 'ready') return proc;
  await proc.stop(2_000);
  const why =
    outcome === 'exited' ? `exited during start-up${opts.hint ? ` (${opts.hint})` : ''}` : `${readyError}`;
  throw new Error(`${opts.name} ${why}. Its last output:\n${tail}`);
}

async function stopChild(
  child: ChildProcess,
  exited: Promise<unknown>,
  graceMs = 10_000,
  signal: NodeJS.Signals = 'SIGTERM',
) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill(signal);
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
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
  throw new Error(`nothing opened ${host}:${port} within ${timeoutMs} ms`);
}
