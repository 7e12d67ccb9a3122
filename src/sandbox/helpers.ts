// Helper programs that parse untrusted bytes (7-Zip, sqfs2tar, binwalk, file,
// xz, bzip2, analysis providers) run in the sandbox with their input mounted
// read-only and no writable place but a bounded private /tmp: whatever they
// produce comes back on stdout, so dossier's own bounded writers decide what
// reaches the disk.
import { PassThrough, type Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { DossierError } from '../domain/errors.ts';
import { helperPath, type Limits, type Mount, type Sandbox } from './sandbox.ts';

export interface HelperRun {
  program: string;
  /** The Debian package that provides it, for the error when it is missing. */
  pkg: string;
  args: string[];
  /** Files the helper reads, mounted read-only (by default at the same path). */
  mounts?: Mount[];
  /** Content piped to its standard input. */
  stdin?: Readable;
  /** Stops the helper when it aborts (a cancelled launch, a failed step beside it). */
  signal?: AbortSignal;
  timeoutMs: number;
  limits?: Limits;
  /** Size of its private /tmp, when not the policy's (an unpacker that writes a whole tree there). */
  tmpBytes?: number;
  /** A private /dev/shm of this size (a helper that runs a multiprocessing pool). */
  shmBytes?: number;
  env?: Record<string, string>;
}

/** How long a failed helper's stderr may take to close after its exit, before its message is read. */
const STDERR_GRACE_MS = 1_000;

const HELPER_ENV = { PATH: '/usr/bin:/bin', HOME: '/tmp', LANG: 'C.UTF-8' };
/** Helpers that answer on stdout (listings, tables) are read up to this much. */
export const HELPER_OUTPUT_LIMIT = 64 * 1024 * 1024;

export interface StreamingHelper {
  stdout: Readable;
  stderr: Readable;
  /** Resolves when the helper exited 0; rejects with its stderr tail otherwise (or on timeout). */
  done: Promise<void>;
  /** Ends the helper at once (the consumer stopped reading). */
  stop(): void;
}

/** Starts a helper whose stdout the caller consumes as a stream. */
export function streamHelper(sandbox: Sandbox, run: HelperRun): StreamingHelper {
  const proc = sandbox.spawn({
    argv: [run.program.startsWith('/') ? run.program : helperPath(run.program, run.pkg), ...run.args],
    env: { ...HELPER_ENV, ...run.env },
    cwd: '/tmp',
    mounts: run.mounts,
    limits: run.limits,
    tmpBytes: run.tmpBytes,
    shmBytes: run.shmBytes,
    stdin: run.stdin ? 'pipe' : 'ignore',
  });
  if (run.stdin && proc.child.stdin) {
    const source = run.stdin;
    source.on('error', () => proc.kill());
    proc.child.stdin.on('error', () => undefined); // the helper may exit before reading it all
    source.pipe(proc.child.stdin);
    // Whatever ends the helper, its input (a file) is closed with it.
    void proc.exited.then(() => source.destroy());
  }
  let stderr = '';
  proc.child.stderr.on('data', (c: Buffer) => (stderr = (stderr + c.toString()).slice(-1_000)));
  const stderrClosed = new Promise((resolve) => proc.child.stderr.once('close', resolve));
  let timedOut = false;
  let stopped = false;
  const timer = setTimeout(() => {
    timedOut = true;
    proc.kill();
  }, run.timeoutMs);
  const done = proc.exited.then(async ({ code, signal, error }) => {
    clearTimeout(timer);
    if (error) throw error;
    if (code === 0 || stopped) return;
    if (timedOut) {
      throw new DossierError(
        'provider_timeout',
        `${run.program} did not finish within ${run.timeoutMs} ms.`,
        'Raise timeout_ms, or split the input.',
        { program: run.program, timeout_ms: run.timeoutMs },
      );
    }
    // The exit can be reported before the last of stderr was read: its reason is in that tail.
    await Promise.race([stderrClosed, sleep(STDERR_GRACE_MS, undefined, { ref: false })]);
    throw new Error(
      `${run.program} failed (${signal ? `killed by ${signal}` : `exit ${code}`}): ${stderr.trim() || 'no message'}`,
    );
  });
  done.catch(() => undefined);
  const stop = () => {
    stopped = true;
    proc.kill();
  };
  if (run.signal) {
    const signal = run.signal;
    if (signal.aborted) stop();
    else {
      signal.addEventListener('abort', stop, { once: true });
      void proc.exited.then(() => signal.removeEventListener('abort', stop));
    }
  }
  return { stdout: proc.child.stdout, stderr: proc.child.stderr, done, stop };
}

/**
 * Keeps the last `maxBytes` of a helper's stderr; `lastLine(prefix)` reads, once
 * stderr closed (`await ended`), the newest line starting with `prefix`, without it.
 */
export function stderrTail(helper: StreamingHelper, maxBytes: number) {
  let tail = '';
  helper.stderr.on('data', (chunk: Buffer) => (tail = (tail + chunk.toString()).slice(-maxBytes)));
  const ended = new Promise((resolve) => helper.stderr.once('close', resolve));
  const lastLine = (prefix: string) =>
    tail
      .split('\n')
      .reverse()
      .find((line) => line.startsWith(prefix))
      ?.slice(prefix.length);
  return { ended, lastLine };
}

/**
 * A helper's stdout that ends only once the helper exited 0 and errors
 * otherwise: a helper that failed half-way is an error, never a short result.
 */
export function checkedOutput(helper: StreamingHelper): Readable {
  const out = new PassThrough();
  helper.stdout.pipe(out, { end: false });
  const drained = new Promise((resolve) => helper.stdout.once('end', resolve));
  Promise.all([helper.done, drained]).then(
    () => out.end(),
    (err: Error) => out.destroy(err),
  );
  out.once('close', () => helper.stop());
  return out;
}

/** Runs a helper to completion and returns its stdout (at most HELPER_OUTPUT_LIMIT bytes). */
export async function runHelper(sandbox: Sandbox, run: HelperRun): Promise<string> {
  const helper = streamHelper(sandbox, run);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of helper.stdout) {
    size += (chunk as Buffer).length;
    if (size > HELPER_OUTPUT_LIMIT) {
      helper.stop();
      throw new DossierError(
        'resource_constraint',
        `${run.program} wrote more than ${HELPER_OUTPUT_LIMIT} bytes of output.`,
        'The input is too large or too unusual for this helper; split it.',
        { program: run.program },
      );
    }
    chunks.push(chunk as Buffer);
  }
  await helper.done;
  return Buffer.concat(chunks).toString('utf8');
}
