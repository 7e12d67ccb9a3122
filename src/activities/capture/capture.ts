// The capture_process_scenario effect: run the program without a shell in the
// sandbox (its own namespaces and uid, the launch's workspace its only
// writable place), with an explicit environment; cap and hash the output; end
// every process it started on timeout, cancel or exit.
import { createHash } from 'node:crypto';
import { constants as osConstants } from 'node:os';
import { chmod, chown, mkdir } from 'node:fs/promises';
import path from 'node:path';
import { DossierError } from '../../domain/errors.ts';
import { ARTIFACT_DIGEST } from '../../domain/types.ts';
import { verifyArtifact } from '../../evidence/artifacts.ts';
import { openUnder } from '../../sandbox/paths.ts';
import { helperPath, type Mount, type SandboxedProcess } from '../../sandbox/sandbox.ts';
import { KILL_GRACE_MS, type ObserveInput } from '../../tools/capture.ts';
import type { Effect, EffectContext } from '../effect.ts';
import { registeredArtifact } from '../policy.ts';
import { listTree, parseLtraceLine, readStrace, readTrace, tracedExit } from './observe.ts';
import { workspaceUsage } from '../workspaces/workspaces.ts';
import { whenAborted } from '../../domain/abort.ts';
import { captureResult, SANDBOX_PATHS, type CaptureRan, type Ending } from './result.ts';
import type { CaptureRun } from './run.ts';

import { CappedOutput } from '../../domain/capped.ts';

export type { CaptureRun };

/** The tracer a capture runs under: a syscall filter asks for the trace it filters. */
function tracerOf(input: CaptureRun): 'strace' | 'ltrace' | undefined {
  return input.tracer ?? (input.trace_syscalls || input.trace_filter !== undefined ? 'strace' : undefined);
}

export const captureProcess: Effect<CaptureRun> = async (input, ctx) => {
  const tracer = tracerOf(input);
  const { proc, program, traceFile, shown } = await startProgram(input, ctx, tracer);
  const ran = await superviseRun(input, ctx, proc);
  const { exit } = ran;
  const [trace, tree] = await Promise.all([
    tracer === 'strace'
      ? readStrace(traceFile, input.max_events)
      : tracer === 'ltrace'
        ? readTrace(traceFile, input.max_events, parseLtraceLine)
        : undefined,
    listTree(ctx.workspace, input.max_files, FILE_HASH_BUDGET),
  ]);
  // ltrace exits 0 whatever its program did: the program's own ending is in its output.
  const traced = tracer === 'ltrace' && !exit.error ? await tracedExit(traceFile) : undefined;
  if (traced) Object.assign(exit, traced);
  const status = traced
    ? { signal: traced.signal, inferred: false }
    : exitStatus(exit, input.isolation !== 'none');
  return captureResult({
    ...ran,
    input,
    ctx,
    tracer,
    program: { ...program, real: shown(program.real) },
    pid: proc.child.pid,
    sandboxFacts: proc.facts,
    commandLine: [...tracerArgs(input, shown(traceFile)), shown(program.path), ...input.args],
    status,
    trace,
    tree,
    traced,
  });
};

/** Checks the program, readies the workspace (and the tracer's folder), journals the start and spawns it. */
async function startProgram(input: CaptureRun, ctx: EffectContext, tracer: 'strace' | 'ltrace' | undefined) {
  ctx.sandbox.check({ network: input.network, isolation: input.isolation });
  const program = ARTIFACT_DIGEST.test(input.executable)
    ? await artifactProgram(ctx, input.executable)
    : await allowedProgram(input.executable, ctx.config.allowedRoots);

  const traceDir = `${ctx.workspace}.trace`;
  const traceFile = path.join(traceDir, 'trace.txt');
  const hostFolders = { workspace: ctx.workspace, trace: traceDir, artifact: `${ctx.workspace}.bin` };
  /** A worker's path as the sandbox names it: what the Evidence says, whatever the isolation. */
  const shown = (p: string) => {
    for (const [name, host] of Object.entries(hostFolders) as [keyof typeof SANDBOX_PATHS, string][])
      if (p === host || p.startsWith(`${host}/`)) return SANDBOX_PATHS[name] + p.slice(host.length);
    return p;
  };
  /** A path as the program is given it: the sandbox's name, or the worker's own without namespaces. */
  const given = (p: string) => (input.isolation === 'none' ? p : shown(p));
  const identity = ctx.sandbox.identity();
  let proc: SandboxedProcess;
  try {
    // The workspace (and the tracer's folder) belong to the program's uid alone.
    await chown(ctx.workspace, identity.uid, identity.gid);
    await chmod(ctx.workspace, 0o700);
    if (tracer) {
      await mkdir(traceDir, { mode: 0o700 });
      await chown(traceDir, identity.uid, identity.gid);
    }
    await ctx.begin();
    proc = ctx.sandbox.spawn(
      {
        argv: [...tracerArgs(input, given(traceFile)), given(program.path), ...input.args],
        env: input.env,
        cwd: given(ctx.workspace),
        mounts: [
          { host: ctx.workspace, inside: SANDBOX_PATHS.workspace, writable: true },
          ...(tracer ? [{ host: traceDir, inside: SANDBOX_PATHS.trace, writable: true }] : []),
          program.mount,
        ],
        network: input.network,
        isolation: input.isolation,
        stdin: { content: input.stdin ?? '' },
        limits: {
          addressSpaceBytes: input.limits.address_space_mb * 1024 * 1024,
          openFiles: input.limits.open_files,
          processes: input.limits.processes,
          // No one file may outgrow the workspace's bound between two of its checks.
          fileBytes: ctx.config.workspaceBytes,
        },
      },
      identity,
    );
  } catch (err) {
    identity.release();
    await program.close();
    throw err;
  }
  // The checked file stays open until the program holds its own descriptor of it (the timeout and
  // a cancel apply meanwhile).
  void proc.started.finally(() => program.close().catch(() => undefined));
  return { proc, program, traceFile, shown };
}

/** Watches the program to its end: its output capped, its workspace bounded, its time and the launch's signal obeyed. */
async function superviseRun(
  input: CaptureRun,
  ctx: EffectContext,
  proc: SandboxedProcess,
): Promise<CaptureRan> {
  const startedAt = new Date();
  const t0 = performance.now();
  const { child } = proc;
  const stdout = new CappedOutput(input.max_output_bytes);
  const stderr = new CappedOutput(input.max_output_bytes);
  child.stdout.on('data', (c: Buffer) => stdout.push(c));
  child.stderr.on('data', (c: Buffer) => stderr.push(c));

  let ending: Ending | undefined;
  const end = (why: Ending) => {
    if (ending) return;
    ending = why;
    proc.terminate();
    setTimeout(() => proc.kill(), KILL_GRACE_MS).unref();
  };
  const timer = setTimeout(() => end('timeout'), input.timeout_ms);
  const onAbort = () => end(ctx.stopping() ? 'shutdown' : 'cancel');
  const stopAbort = whenAborted(ctx.signal, onAbort);
  let workspaceBytes = 0;
  /** Why the workspace could not be measured, when that is what ended the program. */
  let unmeasured: string | undefined;
  let checking = false;
  const ticker = setInterval(() => {
    ctx.progress({
      phase: 'running',
      pid: child.pid,
      elapsed_ms: Math.round(performance.now() - t0),
      stdout_bytes: stdout.total,
      stderr_bytes: stderr.total,
      workspace_bytes: workspaceBytes,
    });
    // The workspace's disk is bounded: past DOSSIER_WORKSPACE_BYTES the program is ended.
    if (checking) return;
    checking = true;
    workspaceUsage(ctx.workspace, proc.members(), ctx.config.workspaceBytes)
      .then((usage) => {
        workspaceBytes = usage.bytes;
        if (usage.unmeasured && !ending) unmeasured = usage.unmeasured;
        if (usage.over) end('workspace_limit');
      })
      .catch(() => {
        // A check that could not run says nothing of the disk: as over the bound, never as empty.
        if (!ending) unmeasured = 'the check failed';
        end('workspace_limit');
      })
      .finally(() => (checking = false));
  }, 1_000);

  // Count what the program left running when its first process ended; the sandbox ends them all.
  let strays = 0;
  child.once('exit', () => (strays = proc.members().length));
  const exit = await proc.exited;
  const durationMs = Math.round(performance.now() - t0);
  clearTimeout(timer);
  clearInterval(ticker);
  stopAbort();
  await new Promise<void>((resolve) => {
    if (child.stdout.closed && child.stderr.closed) return resolve();
    child.once('close', () => resolve());
    setTimeout(resolve, 1_000).unref();
  });
  // The uid is given back: nothing of it may reach the workspace, or its tracer's folder, any more.
  // (Its mode too: the program owned the folder, so it could have opened it to everyone.)
  for (const folder of [ctx.workspace, `${ctx.workspace}.trace`]) {
    await chown(folder, process.getuid?.() ?? 0, process.getgid?.() ?? 0).catch(() => undefined);
    await chmod(folder, 0o700).catch(() => undefined);
  }

  return { startedAt, durationMs, exit, ending, unmeasured, strays, stdout, stderr };
}

/** The program a capture runs: where the sandbox shows it, what was checked, and its mount. */
interface Program {
  path: string;
  real: string;
  sha256: string;
  bytes: number;
  mount: Mount;
  close(): Promise<void>;
}

/**
 * A path under the allowed roots: opened, then checked (what the kernel says
 * was opened lies under a root), hashed through that descriptor, and mounted
 * into the sandbox by the same descriptor, so exactly the checked file runs.
 */
async function allowedProgram(executable: string, roots: string[]): Promise<Program> {
  const opened = await openUnder(executable, roots, 'DOSSIER_ALLOWED_ROOTS');
  try {
    if ((opened.stat.mode & 0o111) === 0) {
      throw new DossierError(
        'unsupported_target',
        `${opened.real} is not executable.`,
        'Pass a file with execute permission.',
        { resolved: opened.real },
      );
    }
    const hash = createHash('sha256');
    for await (const chunk of opened.handle.createReadStream({ autoClose: false, start: 0 })) {
      hash.update(chunk as Buffer);
    }
    return {
      path: opened.real,
      real: opened.real,
      sha256: hash.digest('hex'),
      bytes: opened.stat.size,
      mount: { host: opened.handle.fd, inside: opened.real },
      close: () => opened.handle.close(),
    };
  } catch (err) {
    await opened.handle.close();
    throw err;
  }
}

/** A registered artifact runs from a private copy made from its verified bytes, read-only to the program. */
async function artifactProgram(ctx: EffectContext, digest: string): Promise<Program> {
  const artifact = await registeredArtifact(ctx, digest);
  const dir = `${ctx.workspace}.bin`;
  await mkdir(dir, { mode: 0o755 });
  const copy = path.join(dir, (artifact.name ?? 'target').replace(/[^A-Za-z0-9._-]/g, '_') || 'target');
  await verifyArtifact(ctx.config.home, digest, copy, ctx.store.blobs);
  return {
    path: copy,
    real: copy,
    sha256: digest.slice('sha256:'.length),
    bytes: artifact.size,
    mount: { host: dir, inside: SANDBOX_PATHS.artifact },
    close: async () => undefined,
  };
}

/** Hashing budget for the files a process leaves in its workspace. */
const FILE_HASH_BUDGET = 1024 * 1024 * 1024;

/** The tracer in front of the program, if the capture asks for one. */
export function tracerArgs(input: CaptureRun, traceFile: string): string[] {
  const tracer = tracerOf(input);
  if (tracer === 'strace') {
    const filter = input.trace_filter?.length ? ['-e', `trace=${input.trace_filter.join(',')}`] : [];
    return [helperPath('strace', 'strace'), '-f', '-qq', '-s', '96', '-o', traceFile, ...filter, '--'];
  }
  if (tracer === 'ltrace') {
    const filter = input.call_filter ? ['-e', input.call_filter] : [];
    return [helperPath('ltrace', 'ltrace'), '-f', '-s', '96', '-o', traceFile, ...filter, '--'];
  }
  return [];
}

/** observe_native_calls: the same bounded capture, traced with ltrace -f into `events`. */
export const observeNativeCalls: Effect<ObserveInput> = (input, ctx) =>
  captureProcess({ ...input, trace_syscalls: false, tracer: 'ltrace' }, ctx);

/**
 * How the program ended. bwrap's init reaps the program and exits with
 * 128+N when a signal N killed it, so a sandboxed death by signal reaches
 * the worker as an exit status: read back as that signal, and said to be read.
 */
export function exitStatus(
  exit: { code: number | null; signal: NodeJS.Signals | null },
  sandboxed: boolean,
): { signal: string | null; inferred: boolean } {
  if (exit.signal || !sandboxed || exit.code === null || exit.code <= 128) {
    return { signal: exit.signal, inferred: false };
  }
  const name = Object.entries(osConstants.signals).find(([, n]) => n === exit.code! - 128)?.[0];
  return name ? { signal: name, inferred: true } : { signal: null, inferred: false };
}
