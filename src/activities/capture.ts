// The capture_process_scenario effect: spawn without a shell in the launch's
// workspace, in its own process group, with an explicit environment; cap and
// hash the output; end the whole group on timeout, cancel or exit.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { chmod, copyFile, mkdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { DossierError } from '../domain/errors.ts';
import { ARTIFACT_DIGEST } from '../evidence/artifacts.ts';
import { KILL_GRACE_MS, type CaptureInput } from '../tools/capture.ts';
import type { Effect, EffectContext, EffectResult } from './effect.ts';
import { allowedExecutable, registeredArtifact } from './policy.ts';
import { helper, listTree, parseLtraceLine, readStrace, readTrace } from './observe.ts';
import { liveGroupMembers, signalGroup } from './processes.ts';

const HEAD_CHARS = 512;
const LINE_PART_CHARS = 4_096;

class CappedStream {
  readonly chunks: Buffer[] = [];
  retained = 0;
  total = 0;
  private readonly hash = createHash('sha256');
  constructor(private readonly cap: number) {}

  push(chunk: Buffer) {
    this.total += chunk.length;
    this.hash.update(chunk);
    const room = this.cap - this.retained;
    if (room > 0) {
      const kept = chunk.length <= room ? chunk : chunk.subarray(0, room);
      this.chunks.push(kept);
      this.retained += kept.length;
    }
  }

  describe() {
    return {
      bytes: this.total,
      retained_bytes: this.retained,
      truncated: this.total > this.retained,
      sha256: this.hash.digest('hex'),
    };
  }

  text(): string {
    return Buffer.concat(this.chunks).toString('utf8');
  }
}

/** Output as rows: one per line, long lines split into parts so no row is huge. */
export function lineRows(text: string): { line: number; part: number; text: string }[] {
  if (text === '') return [];
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  const rows: { line: number; part: number; text: string }[] = [];
  lines.forEach((line, i) => {
    for (let part = 0, at = 0; part === 0 || at < line.length; part++, at += LINE_PART_CHARS) {
      rows.push({ line: i + 1, part, text: line.slice(at, at + LINE_PART_CHARS) });
    }
  });
  return rows;
}

async function fileSha256(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/** A capture as the effects run it: observe_native_calls sets the tracer to ltrace. */
export type CaptureRun = CaptureInput & { tracer?: 'ltrace'; call_filter?: string };

function tracerOf(input: CaptureRun): 'strace' | 'ltrace' | undefined {
  return input.tracer ?? (input.trace_syscalls ? 'strace' : undefined);
}

export const captureProcess: Effect = async (raw, ctx) => {
  const input = raw as CaptureRun;
  const tracer = tracerOf(input);
  const resolved = ARTIFACT_DIGEST.test(input.executable)
    ? await artifactExecutable(ctx, input.executable)
    : await allowedExecutable(input.executable, ctx.config.allowedRoots);
  const [executableSha256, executableStat] = await Promise.all([fileSha256(resolved), stat(resolved)]);

  const traceDir = `${ctx.workspace}.trace`;
  const traceFile = path.join(traceDir, 'strace.txt');
  const argv = commandLine(input, resolved, ctx.workspace, traceDir, traceFile);
  if (tracer) await mkdir(traceDir);

  await ctx.begin();
  const startedAt = new Date();
  const t0 = performance.now();
  const child = spawn(argv[0]!, argv.slice(1), {
    cwd: ctx.workspace,
    env: input.env,
    detached: true, // its own process group, so timeout and cancel can end all of it
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const stdout = new CappedStream(input.max_output_bytes);
  const stderr = new CappedStream(input.max_output_bytes);
  child.stdout.on('data', (c: Buffer) => stdout.push(c));
  child.stderr.on('data', (c: Buffer) => stderr.push(c));
  child.stdin.on('error', () => undefined); // the process may exit without reading its input
  child.stdin.end(input.stdin ?? '');

  let ending: 'timeout' | 'cancel' | undefined;
  const endGroup = (why: 'timeout' | 'cancel') => {
    if (ending || child.pid === undefined) return;
    ending = why;
    signalGroup(child.pid, 'SIGTERM');
    setTimeout(() => child.pid !== undefined && signalGroup(child.pid, 'SIGKILL'), KILL_GRACE_MS).unref();
  };
  const timer = setTimeout(() => endGroup('timeout'), input.timeout_ms);
  const onAbort = () => endGroup('cancel');
  ctx.signal.addEventListener('abort', onAbort);
  const ticker = setInterval(
    () =>
      ctx.progress({
        phase: 'running',
        pid: child.pid,
        elapsed_ms: Math.round(performance.now() - t0),
        stdout_bytes: stdout.total,
        stderr_bytes: stderr.total,
      }),
    1_000,
  );

  const exit = await new Promise<{ code: number | null; signal: NodeJS.Signals | null; spawnError?: Error }>(
    (resolve) => {
      child.once('error', (spawnError) => resolve({ code: null, signal: null, spawnError }));
      child.once('exit', (code, signal) => resolve({ code, signal }));
    },
  );
  const durationMs = Math.round(performance.now() - t0);
  clearTimeout(timer);
  clearInterval(ticker);
  ctx.signal.removeEventListener('abort', onAbort);
  // Whatever the leader left running in its group goes with it.
  const strays = child.pid === undefined ? [] : liveGroupMembers(child.pid);
  if (strays.length > 0) signalGroup(child.pid!, 'SIGKILL');
  await new Promise<void>((resolve) => {
    if (child.stdout.closed && child.stderr.closed) return resolve();
    child.once('close', () => resolve());
    setTimeout(resolve, 1_000).unref();
  });

  const [trace, tree] = await Promise.all([
    tracer === 'strace'
      ? readStrace(traceFile, input.max_events)
      : tracer === 'ltrace'
        ? readTrace(traceFile, input.max_events, parseLtraceLine)
        : undefined,
    listTree(ctx.workspace, input.max_files, FILE_HASH_BUDGET),
  ]);
  const out = stdout.describe();
  const err = stderr.describe();
  const outText = stdout.text();
  const errText = stderr.text();
  const limitations: string[] = [];
  if (out.truncated) limitations.push(`stdout was capped at ${input.max_output_bytes} bytes`);
  if (err.truncated) limitations.push(`stderr was capped at ${input.max_output_bytes} bytes`);
  if (ending === 'timeout') limitations.push(`the process was ended after timeout_ms=${input.timeout_ms}`);
  if (ending === 'cancel') limitations.push('the launch was cancelled; the process group was ended');
  if (trace?.truncated) limitations.push(`${tracer} events were capped at max_events=${input.max_events}`);
  if (tree.truncated) limitations.push(`the workspace listing was capped at max_files=${input.max_files}`);
  if (tree.unhashed) limitations.push(`${tree.unhashed} large workspace files were listed without SHA-256`);
  if (process.getuid?.() === 0 && input.isolation === 'none') {
    limitations.push('the worker runs as root, so the process limit (RLIMIT_NPROC) was not enforced');
  }

  const document = {
    executable: {
      path: input.executable,
      resolved_path: resolved,
      sha256: executableSha256,
      bytes: executableStat.size,
    },
    args: input.args,
    env_names: Object.keys(input.env).sort(),
    stdin:
      input.stdin === undefined ? null : { bytes: Buffer.byteLength(input.stdin), sha256: sha(input.stdin) },
    workspace: ctx.workspace,
    pid: child.pid ?? null,
    exit: { code: exit.code, signal: exit.signal },
    ended_by: ending ?? 'exit',
    stray_processes_killed: strays.length,
    isolation: input.isolation,
    limits: input.limits,
    command_line: argv,
    trace: trace ? { tracer, events: trace.events.length, truncated: trace.truncated } : null,
    started_at: startedAt.toISOString(),
    duration_ms: durationMs,
    stdout: out,
    stderr: err,
  };
  const summary = {
    exit_code: exit.code,
    signal: exit.signal,
    ended_by: ending ?? 'exit',
    duration_ms: durationMs,
    stdout_bytes: out.bytes,
    stderr_bytes: err.bytes,
    stdout_truncated: out.truncated,
    stderr_truncated: err.truncated,
    events: trace?.events.length ?? null,
    files: tree.files.length,
    stdout_head: outText.slice(0, HEAD_CHARS),
    stderr_head: errText.slice(0, HEAD_CHARS),
  };
  const result: EffectResult = {
    status: ending === 'cancel' ? 'cancelled' : exit.spawnError ? 'failed' : 'succeeded',
    document,
    collections: {
      stdout: lineRows(outText),
      stderr: lineRows(errText),
      files: tree.files,
      ...(trace ? { events: trace.events } : {}),
    },
    summary,
    truncated: out.truncated || err.truncated,
    limitations,
    target: { path: resolved, digest: `sha256:${executableSha256}` },
    unknowns: [
      ...(out.truncated
        ? [{ question: 'What did stdout contain past the retained cap?', scope: `${ctx.launchId} stdout` }]
        : []),
      ...(err.truncated
        ? [{ question: 'What did stderr contain past the retained cap?', scope: `${ctx.launchId} stderr` }]
        : []),
      ...(ending === 'timeout'
        ? [{ question: 'What would the process have done after the timeout?', scope: `${ctx.launchId} run` }]
        : []),
    ],
  };
  if (exit.spawnError) {
    result.error = new DossierError(
      'provider_unavailable',
      `could not start ${resolved}: ${exit.spawnError.message}`,
      'Check that the program can run on the worker host, then launch again with a new idempotency_key.',
      { resolved },
    ).toToolError();
  }
  return result;
};

/** A registered artifact runs from a private, executable copy beside the workspace. */
async function artifactExecutable(ctx: EffectContext, digest: string): Promise<string> {
  const { artifact, file } = await registeredArtifact(ctx, digest);
  const dir = `${ctx.workspace}.bin`;
  await mkdir(dir);
  const copy = path.join(dir, (artifact.name ?? 'target').replace(/[^A-Za-z0-9._-]/g, '_') || 'target');
  await copyFile(file, copy);
  await chmod(copy, 0o500);
  return copy;
}

/** Hashing budget for the files a process leaves in its workspace. */
const FILE_HASH_BUDGET = 1024 * 1024 * 1024;

/** The wrappers in order: bubblewrap (isolation), prlimit (resource limits), strace (events), the program. */
export function commandLine(
  input: CaptureRun,
  resolved: string,
  workspace: string,
  traceDir: string,
  traceFile: string,
): string[] {
  let argv = [resolved, ...input.args];
  const tracer = tracerOf(input);
  if (tracer === 'strace') {
    const filter = input.trace_filter?.length ? ['-e', `trace=${input.trace_filter.join(',')}`] : [];
    argv = [helper('strace', 'strace'), '-f', '-qq', '-s', '96', '-o', traceFile, ...filter, '--', ...argv];
  } else if (tracer === 'ltrace') {
    const filter = input.call_filter ? ['-e', input.call_filter] : [];
    argv = [helper('ltrace', 'ltrace'), '-f', '-s', '96', '-o', traceFile, ...filter, '--', ...argv];
  }
  const { address_space_mb: as, open_files: nofile, processes: nproc } = input.limits;
  argv = [
    helper('prlimit', 'util-linux'),
    `--as=${as * 1024 * 1024}`,
    `--nofile=${nofile}`,
    `--nproc=${nproc}`,
    '--',
    ...argv,
  ];
  if (input.isolation === 'bubblewrap') {
    argv = [
      helper('bwrap', 'bubblewrap'),
      '--unshare-all',
      '--die-with-parent',
      '--ro-bind',
      '/',
      '/',
      '--dev',
      '/dev',
      '--proc',
      '/proc',
      '--tmpfs',
      '/tmp',
      '--bind',
      workspace,
      workspace,
      ...(tracer ? ['--bind', traceDir, traceDir] : []),
      ...(resolved.startsWith(`${workspace}.bin/`)
        ? ['--ro-bind', path.dirname(resolved), path.dirname(resolved)]
        : []),
      '--chdir',
      workspace,
      '--',
      ...argv,
    ];
  }
  return argv;
}

function sha(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** observe_native_calls: the same bounded capture, traced with ltrace -f into `events`. */
export const observeNativeCalls: Effect = (raw, ctx) =>
  captureProcess({ ...(raw as CaptureRun), trace_syscalls: false, tracer: 'ltrace' }, ctx);
