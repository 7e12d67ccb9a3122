// How the sandbox starts a program. A spawn() forks the process that makes it,
// and forking copies its page tables: from a worker of ~500 MiB that is ~10 ms
// with the event loop stopped, per launch, and as much again while the child
// leaves that copy for the program. So the main thread hands its spawns to the
// launcher (launcher.mjs), a small process forked once; the program's stdio
// comes back as its sockets, read here directly. Worker threads (extraction)
// spawn themselves: a launcher's IPC channel belongs to the main thread.
import { fork, spawn, type ChildProcess } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { fstatSync } from 'node:fs';
import type { Socket } from 'node:net';
import { PassThrough, type Readable, type Writable } from 'node:stream';
import { isMainThread } from 'node:worker_threads';

export interface ProgramSpec {
  file: string;
  args: string[];
  cwd: string;
  env: Record<string, string>;
  stdin: 'pipe' | 'ignore';
  /**
   * Open descriptors of this process the program gets as fds 3, 4, …; keep
   * them open until the program started ('spawn') or could not ('error').
   */
  fds: number[];
  /** Contents the program reads from pipes after those descriptors. */
  data: string[];
}

/** What the sandbox needs of a started program: a ChildProcess fits it. */
export interface ProgramChild extends EventEmitter {
  /** Undefined until it started ('spawn'), and when it could not start ('error'). */
  readonly pid: number | undefined;
  readonly stdout: Readable;
  readonly stderr: Readable;
  readonly stdin: Writable | null;
}

/** Starts a program (its own process group and session) with the spec's stdio. */
export function startProgram(spec: ProgramSpec): ProgramChild {
  if (!isMainThread || process.env.DOSSIER_DIRECT_SPAWN === '1') return direct(spec);
  return (launcher ??= new Launcher()).start(spec);
}

function direct(spec: ProgramSpec): ProgramChild {
  const child = spawn(spec.file, spec.args, {
    cwd: spec.cwd,
    env: spec.env,
    detached: true,
    stdio: [spec.stdin, 'pipe', 'pipe', ...spec.fds, ...spec.data.map(() => 'pipe' as const)],
  });
  spec.data.forEach((content, i) => {
    const pipe = child.stdio[3 + spec.fds.length + i] as Writable | null;
    pipe?.on('error', () => undefined);
    pipe?.end(content);
  });
  return child as ChildProcess & ProgramChild;
}

type FromLauncher =
  | { id: number; pid: number }
  | { id: number; stream: 'stdin' | 'stdout' | 'stderr' }
  | { id: number; exit: { code: number | null; signal: NodeJS.Signals | null } }
  | { id: number; error: { message: string; code?: string } };

/**
 * A program started by the launcher, as a ChildProcess shows one: 'spawn',
 * then 'exit', then 'close' once its output was read to the end; or 'error'.
 * Its streams exist at once; the sockets join them when they arrive.
 */
class LaunchedProgram extends EventEmitter implements ProgramChild {
  pid: number | undefined;
  readonly stdout = new PassThrough();
  readonly stderr = new PassThrough();
  readonly stdin: PassThrough | null;
  private exited: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  private open = 2;

  constructor(stdin: 'pipe' | 'ignore') {
    super();
    this.stdin = stdin === 'pipe' ? new PassThrough() : null;
    for (const stream of [this.stdout, this.stderr]) {
      stream.once('close', () => {
        this.open--;
        this.maybeClose();
      });
    }
  }

  started(pid: number) {
    this.pid = pid;
    this.emit('spawn');
  }

  stream(name: 'stdin' | 'stdout' | 'stderr', socket: Socket | undefined) {
    if (name === 'stdin') {
      if (!this.stdin) return socket?.destroy();
      if (!socket) return this.discardInput();
      socket.on('error', () => undefined); // the program may exit without reading its input
      socket.once('close', () => this.discardInput());
      this.stdin.pipe(socket);
      return;
    }
    const into = this[name];
    if (!socket) return void into.end();
    socket.on('error', (err) => into.destroy(err));
    socket.pipe(into);
  }

  /** Input nobody will read any more is dropped, so a writer never waits on it. */
  private discardInput() {
    this.stdin?.unpipe();
    this.stdin?.resume();
  }

  exit(code: number | null, signal: NodeJS.Signals | null) {
    if (this.exited) return;
    this.exited = { code, signal };
    this.emit('exit', code, signal);
    this.maybeClose();
  }

  failed(err: Error) {
    this.stdout.end();
    this.stderr.end();
    this.discardInput();
    this.emit('error', err);
  }

  private maybeClose() {
    if (this.exited && this.open === 0) this.emit('close', this.exited.code, this.exited.signal);
  }
}

class Launcher {
  private proc: ChildProcess | undefined;
  private readonly programs = new Map<number, LaunchedProgram>();
  private next = 0;

  start(spec: ProgramSpec): ProgramChild {
    const proc = (this.proc ??= this.fork());
    const id = this.next++;
    const program = new LaunchedProgram(spec.stdin);
    this.programs.set(id, program);
    proc.channel?.ref(); // until the program has ended: a worker with nothing else to do waits for it
    proc.send({
      id,
      file: spec.file,
      args: spec.args,
      cwd: spec.cwd,
      env: spec.env,
      stdin: spec.stdin,
      // The launcher opens each by its /proc link and checks it is still the same file.
      fds: spec.fds.map((fd) => {
        const { dev, ino } = fstatSync(fd, { bigint: true });
        return { link: `/proc/${process.pid}/fd/${fd}`, file: `${dev}:${ino}` };
      }),
      data: spec.data,
    });
    return program;
  }

  private fork(): ChildProcess {
    const proc = fork(new URL('./launcher.mjs', import.meta.url), [], {
      execArgv: [],
      // Its own group: a Ctrl-C to the terminal is for the worker, which decides what ends.
      detached: true,
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    });
    proc.on('message', (msg: FromLauncher, socket: Socket | undefined) => {
      const program = this.programs.get(msg.id);
      if (!program) return void socket?.destroy();
      if ('pid' in msg) program.started(msg.pid);
      else if ('stream' in msg) program.stream(msg.stream, socket);
      else {
        this.programs.delete(msg.id);
        if (this.programs.size === 0) proc.channel?.unref();
        if ('exit' in msg) program.exit(msg.exit.code, msg.exit.signal);
        else program.failed(Object.assign(new Error(msg.error.message), { code: msg.error.code }));
      }
    });
    proc.on('error', () => undefined); // reported below, as its exit
    proc.once('exit', (code, signal) => {
      if (this.proc === proc) this.proc = undefined;
      // Its programs went with it (bwrap --die-with-parent); the next start forks a new launcher.
      for (const [id, program] of this.programs) {
        this.programs.delete(id);
        if (program.pid === undefined)
          program.failed(new Error(`the launcher process ended (${signal ?? `exit ${code}`})`));
        else program.exit(null, 'SIGKILL');
      }
    });
    // It keeps nothing alive by itself (its channel is held only while programs run).
    proc.unref();
    proc.channel?.unref();
    return proc;
  }
}

let launcher: Launcher | undefined;
