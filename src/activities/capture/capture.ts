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
import { KILL_GRACE_MS, type CaptureInput, type ObserveInput } from '../../tools/capture.ts';
import type { Effect, EffectContext, EffectResult } from '../effect.ts';
import { registeredArtifact } from '../policy.ts';
import { listTree, parseLtraceLine, readStrace, readTrace, tracedExit } from './observe.ts';
import { workspaceUsage } from '../workspaces/workspaces.ts';
import { whenAborted } from '../../domain/abort.ts';
import { CappedOutput } from '../../domain/capped.ts';

const HEAD_CHARS = 512;

/**
 * Where a sandboxed program finds its workspace, its tracer's folder and a registered artifact's
 * copy: names of the sandbox's own, so nothing the program sees or prints, and nothing its Evidence
 * says, names the worker's folders (DOSSIER_HOME's layout is no business of the team's).
 */
export const SANDBOX_PATHS = { workspace: '/workspace', trace: '/trace', artifact: '/artifact' } as const;
const LINE_PART_CHARS = 4_096;

/**
 * Output as rows: one per line, long lines split into parts so no row is huge;
 * at most `limit` rows are made (runEffect keeps a result's collections within
 * DOSSIER_MAX_COLLECTION_ROWS and says so, so pass that plus one).
 */
export function lineRows(
  text: string,
  limit = Number.POSITIVE_INFINITY,
): { line: number; part: number; text: string }[] {
  const rows: { line: number; part: number; text: string }[] = [];
  let start = 0;
  for (let n = 1; start < text.length && rows.length < limit; n++) {
    const end = text.indexOf('\n', start);
    const line = text.slice(start, end === -1 ? text.length : end);
    for (
      let part = 0, at = 0;
      (part === 0 || at < line.length) && rows.length < limit;
      part++, at += LINE_PART_CHARS
    ) {
      rows.push({ line: n, part, text: line.slice(at, at + LINE_PART_CHARS) });
    }
    start = end === -1 ? text.length : end + 1;
  }
  return rows;
}

/** A capture as the effects run it: observe_native_calls sets the tracer to ltrace. */
export type CaptureRun = CaptureInput & { tracer?: 'ltrace'; call_filter?: string };

function tracerOf(input: CaptureRun): 'strace' | 'ltrace' | undefined {
  return input.tracer ?? (input.trace_syscalls ? 'strace' : undefined);
}

export const captureProcess: Effect<CaptureRun> = async (input, ctx) => {
  const tracer = tracerOf(input);
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
  const startedAt = new Date();
  const t0 = performance.now();
  const { child } = proc;
  const stdout = new CappedOutput(input.max_output_bytes);
  const stderr = new CappedOutput(input.max_output_bytes);
  child.stdout.on('data', (c: Buffer) => stdout.push(c));
  child.stderr.on('data', (c: Buffer) => stderr.push(c));

  let ending: 'timeout' | 'cancel' | 'shutdown' | 'workspace_limit' | undefined;
  const end = (why: NonNullable<typeof ending>) => {
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
  // The uid is given back: nothing of it may reach the workspace any more.
  await chown(ctx.workspace, process.getuid?.() ?? 0, process.getgid?.() ?? 0).catch(() => undefined);

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
  const out = stdout.describe();
  const err = stderr.describe();
  const outText = stdout.text();
  const errText = stderr.text();
  const limitations: string[] = [];
  if (out.truncated) limitations.push(`stdout was capped at ${input.max_output_bytes} bytes`);
  if (err.truncated) limitations.push(`stderr was capped at ${input.max_output_bytes} bytes`);
  if (ending === 'timeout') limitations.push(`the process was ended after timeout_ms=${input.timeout_ms}`);
  if (ending === 'cancel') limitations.push('the launch was cancelled; the process group was ended');
  if (ending === 'shutdown')
    limitations.push(
      `its worker was stopped and waited DOSSIER_SHUTDOWN_GRACE_MS=${ctx.config.shutdownGraceMs} ms; the process group was ended`,
    );
  if (ending === 'workspace_limit')
    limitations.push(
      unmeasured
        ? `the workspace's size could not be measured (${unmeasured}), which counts as past DOSSIER_WORKSPACE_BYTES=${ctx.config.workspaceBytes}; the process group was ended`
        : `the workspace passed DOSSIER_WORKSPACE_BYTES=${ctx.config.workspaceBytes} bytes (or 200,000 entries); the process group was ended`,
    );
  if (status.inferred)
    limitations.push(
      `the sandbox reports a program killed by signal N as exit status 128+N: exit status ${exit.code} is read as ${status.signal} (a program that exits with ${exit.code} itself reads the same)`,
    );
  if (trace?.truncated) limitations.push(`${tracer} events were capped at max_events=${input.max_events}`);
  if (tracer === 'ltrace' && !exit.error)
    limitations.push(
      traced
        ? "the exit status is the program's as ltrace reported it"
        : "ltrace reported no ending for the program (it was ended first): the exit status is ltrace's own",
    );
  if (tree.truncated) limitations.push(`the workspace listing was capped at max_files=${input.max_files}`);
  if (tree.unhashed) limitations.push(`${tree.unhashed} large workspace files were listed without SHA-256`);
  if (input.isolation === 'none') {
    limitations.push(
      `isolation "none" (allowed by the cluster admin): the program saw the worker host filesystem as its uid could, without namespaces; it ran in the worker's own folders, which this Evidence names as the sandbox does (${SANDBOX_PATHS.workspace}, ${SANDBOX_PATHS.trace}, ${SANDBOX_PATHS.artifact})`,
    );
  }
  if (process.getuid?.() !== 0) {
    limitations.push(
      'the worker is not root, so the program ran as the worker uid and the process limit (RLIMIT_NPROC) counted the worker too',
    );
  }

  const document = {
    executable: {
      path: input.executable,
      resolved_path: shown(program.real),
      sha256: program.sha256,
      bytes: program.bytes,
    },
    args: input.args,
    env_names: Object.keys(input.env).sort(),
    stdin:
      input.stdin === undefined ? null : { bytes: Buffer.byteLength(input.stdin), sha256: sha(input.stdin) },
    workspace: SANDBOX_PATHS.workspace,
    pid: child.pid ?? null,
    exit: { code: exit.code, signal: status.signal, signal_inferred: status.inferred },
    ended_by: ending ?? 'exit',
    stray_processes_killed: strays,
    isolation: input.isolation,
    sandbox: proc.facts,
    limits: input.limits,
    command_line: [...tracerArgs(input, shown(traceFile)), shown(program.path), ...input.args],
    trace: trace ? { tracer, events: trace.events.length, truncated: trace.truncated } : null,
    started_at: startedAt.toISOString(),
    duration_ms: durationMs,
    stdout: out,
    stderr: err,
  };
  const summary = {
    exit_code: exit.code,
    signal: status.signal,
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
    // A launch ended by its worker's stop is recorded interrupted (activities/index.ts), as cancelled here.
    status: ending === 'cancel' || ending === 'shutdown' ? 'cancelled' : exit.error ? 'failed' : 'succeeded',
    document,
    collections: {
      stdout: lineRows(outText, ctx.config.maxCollectionRows + 1),
      stderr: lineRows(errText, ctx.config.maxCollectionRows + 1),
      files: tree.files,
      ...(trace ? { events: trace.events } : {}),
    },
    summary,
    truncated: out.truncated || err.truncated,
    limitations,
    target: { path: shown(program.real), digest: `sha256:${program.sha256}` },
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
      ...(ending === 'shutdown'
        ? [
            {
              question: 'What would the process have done had its worker not stopped?',
              scope: `${ctx.launchId} run`,
            },
          ]
        : []),
    ],
  };
  if (exit.error) {
    result.error = new DossierError(
      'provider_unavailable',
      `could not start ${shown(program.real)}: ${exit.error.message}`,
      'Check that the program can run on the worker host, then launch again with a new idempotency_key.',
      { resolved: shown(program.real) },
    ).toToolError();
  }
  return result;
};

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

function sha(text: string): string {
  return createHash('sha256').update(text).digest('hex');
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
