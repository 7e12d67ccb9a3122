// Builds an artifact's analysis database: the angr provider runs in the sandbox
// (the artifact and the venv read-only, nothing writable but a private /tmp,
// memory capped, a time budget it enforces itself and a hard deadline dossier
// enforces), and its JSON lines are written into the database by dossier.
import type { Readable } from 'node:stream';
import { DossierError } from '../domain/errors.ts';
import type { Sandbox } from '../sandbox/sandbox.ts';
import { DatabaseWriter } from './database.ts';
import type { AnalysisProvider } from './venv.ts';
import { sandboxedEnv } from '../python/venv.ts';
import { whenAborted } from '../domain/abort.ts';

/** The provider's own budget is soft; past it plus this much, dossier ends it. */
const HARD_GRACE_MS = 180_000;
/** No line of the provider's output may be larger (a batch of rows is far smaller). */
const MAX_LINE_BYTES = 64 * 1024 * 1024;
const STDERR_TAIL = 64 * 1024;

export interface BuildOptions {
  provider: AnalysisProvider;
  /** The verified artifact on the worker host. */
  binary: string;
  profile: string;
  timeBudgetS: number;
  memoryBytes: number;
  signal: AbortSignal;
  onProgress(facts: Record<string, unknown>): void;
}

export interface BuiltDatabase {
  meta: Record<string, unknown>;
  counts: Record<string, number>;
  stderr: string;
}

/** Splits a stream into lines, refusing any line over `max` bytes. */
async function* lines(stream: Readable, max: number): AsyncGenerator<string> {
  let pending: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream as AsyncIterable<Buffer>) {
    let start = 0;
    for (let nl = chunk.indexOf(10); nl !== -1; nl = chunk.indexOf(10, start)) {
      pending.push(chunk.subarray(start, nl));
      yield Buffer.concat(pending).toString('utf8');
      pending = [];
      size = 0;
      start = nl + 1;
    }
    const rest = chunk.subarray(start);
    size += rest.length;
    if (size > max) throw new Error(`the provider wrote a line over ${max} bytes`);
    if (rest.length) pending.push(rest);
  }
  if (size > 0) yield Buffer.concat(pending).toString('utf8');
}

export async function buildDatabase(
  sandbox: Sandbox,
  file: string,
  opts: BuildOptions,
): Promise<BuiltDatabase> {
  const provider = sandboxedEnv(opts.provider);
  const proc = sandbox.spawn({
    argv: [
      provider.python,
      provider.script('angr_db.py'),
      '--binary',
      '/input/target',
      '--profile',
      opts.profile,
      '--time-budget-s',
      String(opts.timeBudgetS),
    ],
    env: { PATH: '/usr/bin:/bin', HOME: '/tmp', LANG: 'C.UTF-8', PYTHONDONTWRITEBYTECODE: '1' },
    cwd: '/tmp',
    mounts: [...provider.mounts, { host: opts.binary, inside: '/input/target' }],
    limits: { addressSpaceBytes: opts.memoryBytes },
    stdin: 'ignore',
  });
  let stderr = '';
  proc.child.stderr.on('data', (c: Buffer) => (stderr = (stderr + c.toString()).slice(-STDERR_TAIL)));
  let ended: 'deadline' | 'cancel' | undefined;
  const timer = setTimeout(
    () => ((ended = 'deadline'), proc.kill()),
    opts.timeBudgetS * 1000 + HARD_GRACE_MS,
  );
  const onAbort = () => ((ended = 'cancel'), proc.kill());
  const stopAbort = whenAborted(opts.signal, onAbort);

  const writer = new DatabaseWriter(file);
  let failure: unknown;
  try {
    for await (const line of lines(proc.child.stdout, MAX_LINE_BYTES)) {
      if (!line.trim()) continue;
      const message = JSON.parse(line) as {
        table?: string;
        rows?: unknown;
        meta?: Record<string, unknown>;
        phase?: string;
      };
      if (message.table !== undefined) writer.rows(message.table, message.rows);
      else if (message.meta) writer.finish(message.meta);
      else if (message.phase) opts.onProgress({ ...message, phase: `analysis: ${message.phase}` });
    }
  } catch (err) {
    failure = err;
    proc.kill();
  } finally {
    writer.close();
  }
  const exit = await proc.exited;
  clearTimeout(timer);
  stopAbort();

  if (ended === 'cancel') {
    throw new DossierError('cancelled', 'The analysis was cancelled.', 'Ask again to run it anew.');
  }
  if (ended === 'deadline') {
    throw new DossierError(
      'provider_timeout',
      `angr did not finish within its ${opts.timeBudgetS} s budget plus ${HARD_GRACE_MS / 1000} s.`,
      'The target is too large for this profile; ask an admin to raise DOSSIER_ANALYSIS_TIME_BUDGET_S.',
      { stderr_tail: stderr.slice(-4_000) },
    );
  }
  if (exit.code === 2) {
    throw new DossierError(
      'unsupported_target',
      `The artifact is not a binary angr can load: ${stderr.trim().split('\n').pop() ?? ''}`,
      'Analyse an executable or library (ELF, PE, Mach-O); unpack archives and firmware first with extract_artifact or extract_firmware.',
      { stderr_tail: stderr.slice(-4_000) },
    );
  }
  if (failure || exit.code !== 0 || !writer.meta) {
    const why = failure
      ? (failure as Error).message
      : exit.signal
        ? `killed by ${exit.signal}`
        : `exit ${exit.code}`;
    throw new DossierError(
      'provider_unavailable',
      `angr failed on this artifact (${why}).`,
      'Its stderr is retained with this failure; a memory-hungry target may need a larger DOSSIER_ANALYSIS_MEMORY_MB.',
      { stderr_tail: stderr.slice(-4_000), exit_code: exit.code, signal: exit.signal },
    );
  }
  return { meta: writer.meta, counts: writer.counts as Record<string, number>, stderr };
}
