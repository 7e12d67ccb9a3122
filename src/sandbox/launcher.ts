// How the sandbox starts a program. A spawn() forks the process that makes it,
// and forking copies its page tables: from a worker of ~500 MiB that is ~10 ms
// with the event loop stopped, per launch, and as much again while the child
// leaves that copy for the program; every other thread touching memory waits
// on the copy too. So each thread hands its spawns to a launcher of its own
// (launcher.mjs), a small process it forks once; the program's stdio comes back
// as its sockets, read here. The extraction thread has its own: a launcher's
// IPC channel, and the sockets it sends, belong to the thread that forked it.
import { fork, type ChildProcess, type Serializable } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { fstatSync } from 'node:fs';
import type { Socket } from 'node:net';
import { PassThrough, type Readable, type Writable } from 'node:stream';

export interface ProgramSpec {
  file: string;
  args: string[];
  cwd: string;
  env: Record<string, string>;
  /** A pipe to write to, nothing, or an input known in advance (written and closed for the program). */
  stdin: 'pipe' | 'ignore' | { content: string };
  /**
   * Open descriptors of this process the program gets as fds 3, 4, …; keep
   * them open until the program started ('spawn') or could not ('error').
   */
  fds: number[];
  /** Contents the program reads from pipes after those descriptors (text, or bytes as base64). */
  data: PipeContent[];
  /** When the first process exits, SIGKILL what is left of its process group (it leads one). */
  endGroupOnExit: boolean;
}

/** What the sandbox needs of a started program: a ChildProcess fits it. */
export interface ProgramChild extends EventEmitter {
  /** Undefined until it started ('spawn'), and when it could not start ('error'). */
  readonly pid: number | undefined;
  readonly stdout: Readable;
  readonly stderr: Readable;
  readonly stdin: Writable | null;
  /** Signals the first process, never once it has been reaped (its pid may be another's by then). */
  kill(signal: NodeJS.Signals): boolean;
  /** Set when the program was ended by the loss of the process that started it, not by itself. */
  readonly lostBecause?: string;
}

/** Starts a program (its own process group and session) with the spec's stdio. */
export function startProgram(spec: ProgramSpec): ProgramChild {
  return (launcher ??= new Launcher()).start(spec);
}

/** What a program reads from a pipe: text, or bytes as base64 (a request crosses to the launcher as JSON). */
export type PipeContent = string | { base64: string };

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
  lostBecause: string | undefined;
  readonly stdout = new PassThrough();
  readonly stderr = new PassThrough();
  readonly stdin: PassThrough | null;
  private exited: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  private open = 2;
  private readonly arrived = new Set<string>();

  constructor(
    stdin: ProgramSpec['stdin'],
    private readonly signal: (signal: NodeJS.Signals) => void,
  ) {
    super();
    this.stdin = stdin === 'pipe' ? new PassThrough() : null;
    for (const stream of [this.stdout, this.stderr]) {
      stream.once('close', () => {
        this.open--;
        this.maybeClose();
      });
    }
  }

  kill(signal: NodeJS.Signals): boolean {
    if (this.pid === undefined || this.exited) return false;
    this.signal(signal);
    return true;
  }

  started(pid: number) {
    this.pid = pid;
    this.emit('spawn');
  }

  stream(name: 'stdin' | 'stdout' | 'stderr', socket: Socket | undefined) {
    this.arrived.add(name);
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
    // A reader that stops early (destroys the stream) closes the pipe, as with a ChildProcess:
    // the program gets EPIPE instead of waiting on a full pipe, and no descriptor is left behind.
    if (into.destroyed) return void socket.destroy();
    into.once('close', () => socket.destroy());
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

  /** The launcher is gone, and the program with it: end what never arrived, and report it killed. */
  lost(why: string) {
    if (this.pid === undefined) return this.failed(new Error(why));
    for (const name of ['stdout', 'stderr'] as const) if (!this.arrived.has(name)) this[name].end();
    if (!this.arrived.has('stdin')) this.discardInput();
    if (!this.exited) this.lostBecause = why;
    this.exit(null, 'SIGKILL');
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
    // The launcher opens each by its /proc link and checks it is still the same file (this throws
    // for a descriptor that is not open, before anything is recorded).
    const fds = spec.fds.map((fd) => {
      const { dev, ino } = fstatSync(fd, { bigint: true });
      return { link: `/proc/${process.pid}/fd/${fd}`, file: `${dev}:${ino}` };
    });
    const proc = (this.proc ??= this.fork());
    const id = this.next++;
    const program = new LaunchedProgram(spec.stdin, (signal) => this.send(proc, { id, kill: signal }));
    this.programs.set(id, program);
    proc.channel?.ref(); // until the program has ended: a worker with nothing else to do waits for it
    this.send(proc, {
      id,
      file: spec.file,
      args: spec.args,
      cwd: spec.cwd,
      env: spec.env,
      stdin: spec.stdin,
      fds,
      data: spec.data,
      endGroupOnExit: spec.endGroupOnExit,
    });
    return program;
  }

  /** A send to a launcher that is gone is answered by its 'disconnect' (every program is lost). */
  private send(proc: ChildProcess, message: Serializable) {
    if (proc.connected) proc.send(message, (err) => err && this.gone(proc, err.message));
  }

  private fork(): ChildProcess {
    const proc = fork(new URL('./launcher.mjs', import.meta.url), [], {
      execArgv: [],
      // It needs nothing of the worker's environment (programs get theirs with each request).
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
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
        this.forget(proc, msg.id);
        if ('exit' in msg) program.exit(msg.exit.code, msg.exit.signal);
        else program.failed(Object.assign(new Error(msg.error.message), { code: msg.error.code }));
      }
    });
    // Gone: it could not be forked (EAGAIN, EMFILE), or its channel closed after every message
    // it sent was read (it died, or was killed).
    proc.on('error', (err) => {
      if (!proc.connected) this.gone(proc, `the sandbox launcher could not run: ${err.message}`);
    });
    proc.once('disconnect', () => this.gone(proc, 'the sandbox launcher process ended while it ran'));
    // It keeps nothing alive by itself (its channel is held only while programs run).
    proc.unref();
    proc.channel?.unref();
    return proc;
  }

  private forget(proc: ChildProcess, id: number) {
    this.programs.delete(id);
    if (this.programs.size === 0) proc.channel?.unref();
  }

  /** Its programs went with it (bwrap --die-with-parent); the next start forks a new launcher. */
  private gone(proc: ChildProcess, why: string) {
    if (this.proc !== proc) return;
    this.proc = undefined;
    for (const [id, program] of this.programs) {
      this.programs.delete(id);
      program.lost(why);
    }
  }
}

let launcher: Launcher | undefined;
