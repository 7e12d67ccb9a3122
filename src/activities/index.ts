// The activities a worker registers. runEffect wraps every effectful tool in the
// same launch discipline: journal before the effect, heartbeat while it runs,
// retain the complete result as Evidence, record the outcome, return only a
// small reference (Temporal payloads must stay far below 2 MiB).
import { Context } from '@temporalio/activity';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import type { Config } from '../config.ts';
import { sha256Hex } from '../domain/canonical.ts';
import { toToolError } from '../domain/errors.ts';
import type { EvidenceStore } from '../evidence/store.ts';
import type { LaunchOutcome } from '../evidence/types.ts';
import { isFinished } from '../evidence/types.ts';
import { TOOLS_BY_NAME } from '../tools/catalog.ts';
import { exportEvidenceBundle } from './bundle.ts';
import { captureProcess, observeNativeCalls } from './capture.ts';
import { extractArchive } from './extract.ts';
import { extractFirmware } from './firmware.ts';
import type { Effect, EffectContext } from './effect.ts';
import { Sandbox } from '../sandbox/sandbox.ts';
import type { BookkeepingActivities, EffectActivities, JournalView, LaunchRequest } from './types.ts';

export const PROVIDER = { name: 'dossier', version: '0.1.0' };

/** Effect implementations by tool name; a tool's contract says which capability serves it. */
export const EFFECTS: Record<string, Effect> = {
  capture_process_scenario: captureProcess,
  export_evidence_bundle: exportEvidenceBundle,
  extract_artifact: extractArchive,
  observe_native_calls: observeNativeCalls,
  extract_firmware: extractFirmware,
};

const PROGRESS_WRITE_INTERVAL_MS = 1_000;

function filterableOf(tool: string): Record<string, string[]> {
  const collections = TOOLS_BY_NAME.get(tool)?.collections ?? {};
  return Object.fromEntries(Object.entries(collections).map(([name, spec]) => [name, spec.filterable]));
}

export function createActivities(deps: { store: EvidenceStore; config: Config }) {
  const { store, config } = deps;
  const sandbox = new Sandbox(config.sandbox);

  async function runEffect(req: LaunchRequest): Promise<LaunchOutcome> {
    const activity = Context.current();
    const effect = EFFECTS[req.tool];
    if (!effect)
      throw ApplicationFailure.nonRetryable(`no effect implementation for tool ${req.tool}`, 'UnknownTool');
    const runId = activity.info.workflowExecution?.runId ?? 'unknown';
    const workspace = path.join(
      config.home,
      'workspaces',
      sha256Hex(req.workflowId).slice(0, 24),
      `${runId}-${activity.info.attempt}`,
    );
    await mkdir(path.dirname(workspace), { recursive: true });
    await mkdir(workspace); // fails if it exists: a workspace is never shared

    let begun = false;
    let lastWrite = 0;
    let latest: Record<string, unknown> = { phase: 'starting' };
    activity.heartbeat(latest);
    const beat = setInterval(() => activity.heartbeat(latest), 1_000);
    const ctx: EffectContext = {
      config,
      launchId: req.workflowId,
      caller: { principal: req.principal, team: req.team },
      store,
      sandbox,
      workspace,
      signal: activity.cancellationSignal,
      begin: async () => {
        if (!(await store.journalEffectStarted(req.workflowId, { phase: 'started' }))) {
          throw ApplicationFailure.nonRetryable(
            'the journal says an earlier attempt already began this effect; it is not run again',
            'EffectAlreadyStarted',
          );
        }
        begun = true;
      },
      progress: (facts) => {
        latest = facts;
        activity.heartbeat(facts);
        if (Date.now() - lastWrite >= PROGRESS_WRITE_INTERVAL_MS) {
          lastWrite = Date.now();
          store.recordProgress(req.workflowId, facts).catch(() => undefined);
        }
      },
    };

    let outcome: LaunchOutcome;
    try {
      const result = await effect(req.input, ctx);
      const evidence = await store.putEvidence({
        record: {
          tool: req.tool,
          provider: PROVIDER,
          parameters: req.input,
          parameters_digest: req.bodyDigest,
          target: result.target,
          principal: req.principal,
          team: req.team,
          investigation: req.investigation,
          launch: { workflow_id: req.workflowId, run_id: runId },
          created_at: new Date().toISOString(),
          summary: result.summary,
          truncated: result.truncated,
          limitations: result.limitations,
        },
        document: result.document,
        collections: result.collections,
        filterable: filterableOf(req.tool),
        unknowns: result.unknowns,
      });
      outcome = {
        status: result.status,
        evidenceId: evidence.evidence_id,
        summary: result.summary,
        error: (result.error as unknown as Record<string, unknown>) ?? null,
      };
    } catch (err) {
      if (err instanceof ApplicationFailure && err.type === 'EffectAlreadyStarted') throw err;
      const error = toToolError(err);
      outcome = {
        status: 'failed',
        evidenceId: null,
        summary: null,
        error: { ...error, details: { ...error.details, effect_began: begun } },
      };
    } finally {
      clearInterval(beat);
    }
    const stored = await finishLaunch(req.workflowId, outcome);
    if (outcome.status === 'cancelled') throw new CancelledFailure('the launch was cancelled', [stored]);
    return stored;
  }

  async function readJournal(workflowId: string): Promise<JournalView> {
    const record = await store.getLaunchByWorkflowId(workflowId);
    if (!record) return { effect: 'not_started', finished: null };
    return {
      effect: record.effect,
      finished: isFinished(record.status)
        ? {
            status: record.status,
            evidenceId: record.evidenceId,
            summary: record.summary,
            error: record.error,
          }
        : null,
    };
  }

  /** First writer wins: returns the outcome that the store holds afterwards. */
  async function finishLaunch(workflowId: string, outcome: LaunchOutcome): Promise<LaunchOutcome> {
    const record = await store.finishLaunch(workflowId, outcome);
    if (!record || !isFinished(record.status)) return outcome;
    return {
      status: record.status,
      evidenceId: record.evidenceId,
      summary: record.summary,
      error: record.error,
    };
  }

  const effects: EffectActivities = { runEffect };
  const bookkeeping: BookkeepingActivities = { readJournal, finishLaunch };
  return { effects, bookkeeping };
}
