// What a capture leaves: its output as rows, its limitations, its document,
// summary and unknowns (capture.ts runs the program).
import { createHash } from 'node:crypto';
import { DossierError } from '../../domain/errors.ts';
import type { CappedOutput } from '../../domain/capped.ts';
import type { SandboxedProcess } from '../../sandbox/sandbox.ts';
import type { EffectContext, EffectResult } from '../effect.ts';
import type { CaptureRun } from './run.ts';
import type { listTree, tracedExit } from './observe.ts';

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

export type Ending = 'timeout' | 'cancel' | 'shutdown' | 'workspace_limit';

/** How the program ran: when, how long, how it ended, what it printed. */
export interface CaptureRan {
  startedAt: Date;
  durationMs: number;
  exit: Awaited<SandboxedProcess['exited']>;
  ending: Ending | undefined;
  /** Why the workspace could not be measured, when that is what ended the program. */
  unmeasured: string | undefined;
  strays: number;
  stdout: CappedOutput;
  stderr: CappedOutput;
}

/** Everything the Evidence of a capture says; paths are as the sandbox names them. */
export interface CaptureFacts extends CaptureRan {
  input: CaptureRun;
  ctx: EffectContext;
  tracer: 'strace' | 'ltrace' | undefined;
  program: { real: string; sha256: string; bytes: number };
  pid: number | undefined;
  sandboxFacts: SandboxedProcess['facts'];
  commandLine: string[];
  status: { signal: string | null; inferred: boolean };
  trace: { events: unknown[]; truncated: boolean; unread?: string } | undefined;
  tree: Awaited<ReturnType<typeof listTree>>;
  traced: Awaited<ReturnType<typeof tracedExit>>;
}

function sha(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

function captureLimitations(f: CaptureFacts): string[] {
  const { input, ctx, ending, unmeasured, status, exit, trace, tracer, traced, tree } = f;
  const out = f.stdout.describe();
  const err = f.stderr.describe();
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
  if (trace?.unread)
    limitations.push(`${tracer}'s output (${SANDBOX_PATHS.trace}/trace.txt): ${trace.unread}`);
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

  return limitations;
}

function captureDocument(f: CaptureFacts) {
  const { input, program, exit, status, ending, strays, trace, tracer, startedAt, durationMs } = f;
  const out = f.stdout.describe();
  const err = f.stderr.describe();
  return {
    executable: {
      path: input.executable,
      resolved_path: program.real,
      sha256: program.sha256,
      bytes: program.bytes,
    },
    args: input.args,
    env_names: Object.keys(input.env).sort(),
    stdin:
      input.stdin === undefined ? null : { bytes: Buffer.byteLength(input.stdin), sha256: sha(input.stdin) },
    workspace: SANDBOX_PATHS.workspace,
    pid: f.pid ?? null,
    exit: { code: exit.code, signal: status.signal, signal_inferred: status.inferred },
    ended_by: ending ?? 'exit',
    stray_processes_killed: strays,
    isolation: input.isolation,
    sandbox: f.sandboxFacts,
    limits: input.limits,
    command_line: f.commandLine,
    trace: trace ? { tracer, events: trace.events.length, truncated: trace.truncated } : null,
    started_at: startedAt.toISOString(),
    duration_ms: durationMs,
    stdout: out,
    stderr: err,
  };
}

export function captureResult(f: CaptureFacts): EffectResult {
  const { ctx, program, exit, status, ending, trace, durationMs, tree, stdout, stderr } = f;
  const out = stdout.describe();
  const err = stderr.describe();
  const outText = stdout.text();
  const errText = stderr.text();
  const limitations = captureLimitations(f);
  const document = captureDocument(f);
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
    // A launch ended by its worker's stop is recorded interrupted (activities/runEffect.ts), as cancelled here.
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
    target: { path: program.real, digest: `sha256:${program.sha256}` },
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
      `could not start ${program.real}: ${exit.error.message}`,
      'Check that the program can run on the worker host, then launch again with a new idempotency_key.',
      { resolved: program.real },
    ).toToolError();
  }
  return result;
}
