// One gateway or worker of `dossier cluster up`: a `dossier gateway` or
// `dossier worker` process, restarted when it dies (backing off while it keeps
// dying), like a container with `restart: unless-stopped`.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startOwned, type OwnedProcess } from './owned.ts';

const BIN = fileURLToPath(new URL('../../bin/dossier.js', import.meta.url));

export interface Member {
  name: string;
  /** Its DOSSIER_HOME: the cluster's own, or one of its own with `separateHomes`. */
  home: string;
  /** The gateway's MCP endpoint; undefined for a worker. */
  url?: string;
  readonly process: OwnedProcess;
  /** Kills the process with `signal`; with `restart: false` it stays down until `start()`. */
  kill(signal?: NodeJS.Signals, opts?: { restart?: boolean }): Promise<void>;
  /** Starts it again after a kill without restart. */
  start(): Promise<void>;
}

export interface MemberSpec {
  name: string;
  command: 'gateway' | 'worker';
  /** Its DOSSIER_HOME (already in `env`). */
  home: string;
  env: NodeJS.ProcessEnv;
  url?: string;
  /** Where its log goes: <logDir>/<name>.log. */
  logDir: string;
  /** True once the whole cluster stops: nothing restarts any more. */
  stopping: () => boolean;
  log: (line: string) => void;
}

/** Resolves once the member prints that it is ready; rejects after 120 s. */
function printsReady(started: OwnedProcess): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const check = () => {
      if (!/dossier is ready|worker ready/.test(started.tail())) return;
      clearTimeout(timer);
      started.child.stdout?.off('data', check);
      started.child.stderr?.off('data', check);
      resolve();
    };
    const timer = setTimeout(() => reject(new Error('not ready within 120 s')), 120_000);
    void started.exited.then(() => clearTimeout(timer));
    started.child.stdout?.on('data', check);
    started.child.stderr?.on('data', check);
    check();
  });
}

export class ClusterMember implements Member {
  readonly name: string;
  readonly home: string;
  readonly url?: string;
  /** The current process, once it is ready. */
  private proc: OwnedProcess | undefined;
  private launching: Promise<void> | undefined;
  private retry: NodeJS.Timeout | undefined;
  /** Killed without restart: down until start(). */
  private held = false;
  private failures = 0;

  constructor(private readonly spec: MemberSpec) {
    this.name = spec.name;
    this.home = spec.home;
    this.url = spec.url;
  }

  get process(): OwnedProcess {
    return this.proc!;
  }

  private down() {
    return this.spec.stopping() || this.held;
  }

  /** Starts the process and waits until it is ready; a death later restarts it. */
  launch(): Promise<void> {
    const { name, command, env, logDir, log } = this.spec;
    this.launching = (async () => {
      const p = await startOwned({
        name: `dossier ${name}`,
        command: process.execPath,
        args: [BIN, command],
        env,
        logFile: path.join(logDir, `${name}.log`),
        ready: printsReady,
      });
      this.proc = p;
      const upAt = Date.now();
      void p.exited.then((code) => {
        if (this.down() || this.proc !== p) return;
        // A member that stayed up a minute starts over at 1 s; one that keeps dying backs off.
        this.failures = Date.now() - upAt > 60_000 ? 1 : this.failures + 1;
        log(`dossier: ${name} exited (${code ?? p.child.signalCode}); restarting it`);
        this.restartLater();
      });
    })().finally(() => {
      this.launching = undefined;
    });
    return this.launching;
  }

  /** Starts again after `failures` quick deaths: 1 s, 2 s, 4 s … at most 30 s. */
  private restartLater() {
    const delay = Math.min(30_000, 1_000 * 2 ** Math.min(this.failures - 1, 5));
    this.retry = setTimeout(() => {
      this.retry = undefined;
      if (this.down()) return;
      this.launch().catch((err: Error) => {
        this.failures++;
        this.spec.log(`dossier: ${this.name} did not start (${err.message.split('\n')[0]}); trying again`);
        this.restartLater();
      });
    }, delay);
  }

  async kill(signal: NodeJS.Signals = 'SIGKILL', killOpts: { restart?: boolean } = {}) {
    if (killOpts.restart === false) {
      this.held = true;
      clearTimeout(this.retry);
    }
    const current = this.proc!;
    current.child.kill(signal);
    await current.exited;
  }

  async start() {
    this.held = false;
    clearTimeout(this.retry);
    await this.launching?.catch(() => undefined);
    if (!this.proc || this.proc.ended) await this.launch();
  }

  /** Stops it for good: no restart pending, a start under way awaited, then the process stopped. */
  async halt(graceMs: number) {
    clearTimeout(this.retry);
    await this.launching?.catch(() => undefined);
    await this.proc?.stop(graceMs);
  }
}
