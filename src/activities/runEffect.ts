// runEffect wraps every effectful tool in the same launch discipline: journal
// before the effect, heartbeat while it runs, retain the complete result as
// Evidence, record the outcome, return only a small reference (Temporal
// payloads must stay far below 2 MiB).
import { Context } from '@temporalio/activity';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import type { Config } from '../config.ts';
import { sha256Hex } from '../domain/canonical.ts';
import { DossierError, toToolError } from '../domain/errors.ts';
import { PRODUCT } from '../domain/product.ts';
import { isFinished, type LaunchOutcome } from '../domain/types.ts';
import { WORKER_SHUTDOWN, type LaunchRequest } from '../launches/protocol.ts';
import { effectSeconds } from '../metrics/metrics.ts';
import type { Sandbox } from '../sandbox/sandbox.ts';
import type { Store } from '../store/store.ts';
import type { PayloadKey } from '../temporal/codec.ts';
import { recordOutcome } from './bookkeeping.ts';
import type { EffectContext, EffectResult } from './effect.ts';
import type { EffectBinding } from './effects.ts';
import { evidenceOf } from './evidenceRecord.ts';
import { currentRun, vouchForLaunch } from './provenance.ts';
import { makeWorkspace } from './workspaces/workspaces.ts';

export const PROVIDER = PRODUCT;

const PROGRESS_WRITE_INTERVAL_MS = 1_000;

/** What every launch on this worker shares. */
export interface EffectDeps {
  store: Store;
  config: Config;
  sandbox: Sandbox;
  keys: PayloadKey[];
  effects: ReadonlyMap<string, EffectBinding>;
  /** Records what a finished launch keeps for its team; never fails. */
  retain(req: LaunchRequest, workspace: string): Promise<void>;
  /**
   * Aborted once a stopping worker's grace period (DOSSIER_SHUTDOWN_GRACE_MS) is over. The SDK
   * cancels its activities then, but not its local activities: a local effect ends on this.
   */
  stopped?: AbortSignal;
}

type Activity = ReturnType<typeof Context.current>;

/**
 * What ends the effect early: its cancel. A local activity holds its workflow task, so a cancel
 * reaches it through Temporal only when the SDK renews that task (8 s at most): it also looks, each
 * second, whether cancel_launch asked it in the store; and it ends on its worker's stop.
 */
function endSignal(deps: EffectDeps, req: LaunchRequest, activity: Activity) {
  if (!activity.info.isLocal) return { signal: activity.cancellationSignal, stop: () => undefined };
  // One controller of its own, its listeners taken off at the end: the worker-wide `stopped`
  // signal must not keep a reference to every local effect it has seen.
  const ends = new AbortController();
  const end = () => ends.abort(new CancelledFailure('CANCELLED'));
  const sources = [activity.cancellationSignal, ...(deps.stopped ? [deps.stopped] : [])];
  for (const source of sources) {
    if (source.aborted) end();
    else source.addEventListener('abort', end, { once: true });
  }
  const look = setInterval(() => {
    deps.store.launches
      .cancelRequested(req.workflowId)
      .then((yes) => yes && end())
      .catch(() => undefined);
  }, 1_000);
  return {
    signal: ends.signal,
    stop: () => {
      clearInterval(look);
      for (const source of sources) source.removeEventListener('abort', end);
    },
  };
}

/** The worker is stopping: an activity's cancel says so in its details, a local activity's worker itself. */
function workerStopping(deps: EffectDeps, activity: Activity): boolean {
  if (activity.cancellationDetails?.workerShutdown) return true;
  return activity.info.isLocal && Boolean(deps.stopped?.aborted);
}

/**
 * The launch's own workspace: one per dispatch (a launch re-dispatched after a lost worker is another
 * activity of the same run). A local activity run again after its worker was lost has the same ID
 * and attempt as the lost one: a nonce tells them apart (its workspace, its device turn).
 */
function workspaceOf(config: Config, req: LaunchRequest, activity: Activity): string {
  const runId = currentRun() ?? 'unknown';
  const nonce = activity.info.isLocal ? `-${randomUUID().slice(0, 8)}` : '';
  return path.join(
    config.home,
    'workspaces',
    sha256Hex(req.workflowId).slice(0, 24),
    // A standalone activity's ID is the launch's (with slashes): its run names it alone.
    `${runId}-${activity.info.inWorkflow ? activity.info.activityId : 'standalone'}-${activity.info.attempt}${nonce}`,
  );
}

/**
 * The launch's heartbeat and progress. The first heartbeat goes after a second (well inside the
 * 10 s heartbeat timeout): a launch that ends sooner costs Temporal no heartbeat at all. Progress
 * reaches the store at most once a second; the last facts of a burst go with the next beat.
 */
function launchProgress(store: Store, req: LaunchRequest, activity: Activity) {
  let lastWrite = 0;
  let latest: Record<string, unknown> = { phase: 'starting' };
  let written: Record<string, unknown> | undefined = latest;
  const writeProgress = () => {
    written = latest;
    lastWrite = Date.now();
    store.launches.recordProgress(req.workflowId, latest).catch(() => undefined);
  };
  // A local activity has no heartbeat: its workflow task is its worker's, kept alive by the SDK.
  const heartbeat = activity.info.isLocal ? () => undefined : (facts: unknown) => activity.heartbeat(facts);
  const beat = setInterval(() => {
    heartbeat(latest);
    if (written !== latest) writeProgress();
  }, 1_000);
  return {
    progress(facts: Record<string, unknown>) {
      latest = facts;
      heartbeat(facts);
      if (Date.now() - lastWrite >= PROGRESS_WRITE_INTERVAL_MS) writeProgress();
    },
    stop: () => clearInterval(beat),
  };
}

/** What the effect gets: `begin` journals the effect's start, once over every attempt. */
function effectContext(
  deps: EffectDeps,
  req: LaunchRequest,
  workspace: string,
  activity: Activity,
  signal: AbortSignal,
  progress: (facts: Record<string, unknown>) => void,
  began: () => void,
): EffectContext {
  const { config, store, sandbox, keys } = deps;
  return {
    config,
    launchId: req.workflowId,
    caller: { principal: req.principal, team: req.team },
    store,
    sandbox,
    keys,
    attemptId: path.basename(workspace),
    workspace,
    signal,
    stopping: () => workerStopping(deps, activity),
    begin: async () => {
      if (!(await store.launches.journalStarted(req.workflowId, { phase: 'started' }, currentRun())))
        throw alreadyStarted();
      began();
    },
    progress,
  };
}

function alreadyStarted(): ApplicationFailure {
  return ApplicationFailure.nonRetryable(
    'the journal says an earlier attempt already began this effect; it is not run again',
    'EffectAlreadyStarted',
  );
}

/** Keeps every collection within `max` rows, and says so in the result's limitations. */
export function boundCollections(result: EffectResult, max: number): EffectResult {
  const over = Object.entries(result.collections).filter(([, rows]) => rows.length > max);
  if (over.length === 0) return result;
  return {
    ...result,
    collections: {
      ...result.collections,
      ...Object.fromEntries(over.map(([name, rows]) => [name, rows.slice(0, max)])),
    },
    truncated: true,
    limitations: [
      ...result.limitations,
      ...over.map(
        ([name]) =>
          `${name} had more than ${max} rows; the first ${max} are retained (DOSSIER_MAX_COLLECTION_ROWS)`,
      ),
    ],
  };
}

/** The effect's complete result retained as Evidence; the outcome names it. */
async function retainResult(store: Store, req: LaunchRequest, result: EffectResult): Promise<LaunchOutcome> {
  const evidence = await store.evidence.put(
    evidenceOf({
      tool: req.tool,
      provider: PROVIDER,
      parameters: req.input,
      parametersDigest: req.bodyDigest,
      target: result.target,
      principal: req.principal,
      team: req.team,
      investigation: req.investigation,
      workflowId: req.workflowId,
      summary: result.summary,
      truncated: result.truncated,
      limitations: result.limitations,
      document: result.document,
      collections: result.collections,
      unknowns: result.unknowns,
    }),
  );
  return {
    status: result.status,
    evidenceId: evidence.evidence_id,
    summary: result.summary,
    error: (result.error as unknown as Record<string, unknown>) ?? null,
  };
}

/** A stopping worker is not a principal cancelling: the launch was interrupted, and says why. */
function interruptedByShutdown(outcome: LaunchOutcome, begun: boolean, config: Config): LaunchOutcome {
  return {
    ...outcome,
    status: 'interrupted',
    error: new DossierError(
      'interrupted',
      `The worker running this launch was stopped (a graceful shutdown) and ended it after waiting ${config.shutdownGraceMs} ms (DOSSIER_SHUTDOWN_GRACE_MS); what it saw is retained and it was not re-run.`,
      'Inspect the Evidence for what was done, then launch again with a new idempotency_key if you still want the effect.',
      { reason: 'worker_shutdown', effect_began: begun },
    ).toToolError() as unknown as Record<string, unknown>,
  };
}

async function runEffect(deps: EffectDeps, req: LaunchRequest): Promise<LaunchOutcome> {
  const { store, config } = deps;
  const activity = Context.current();
  const claimed = await vouchForLaunch(store, req, config.launchDispatch);
  const effect = deps.effects.get(req.tool)?.run;
  if (!effect)
    throw ApplicationFailure.nonRetryable(`no effect implementation for tool ${req.tool}`, 'UnknownTool');
  // A local activity is run again when its workflow task is (its worker lost): where the claimed
  // row already says the effect began or ended, nothing of it is prepared again (a workspace, a
  // device turn).
  if (activity.info.isLocal && (claimed.effect !== 'not_started' || isFinished(claimed.status)))
    throw alreadyStarted();
  const workspace = workspaceOf(config, req, activity);
  await makeWorkspace(workspace);

  let begun = false;
  const ran = effectSeconds.startTimer({ tool: req.tool });
  const beats = launchProgress(store, req, activity);
  const ends = endSignal(deps, req, activity);
  const ctx = effectContext(
    deps,
    req,
    workspace,
    activity,
    ends.signal,
    beats.progress,
    () => (begun = true),
  );
  let outcome: LaunchOutcome;
  try {
    const result = boundCollections(await effect(req.input, ctx), config.maxCollectionRows);
    outcome = await retainResult(store, req, result);
  } catch (err) {
    if (err instanceof ApplicationFailure && err.type === 'EffectAlreadyStarted') {
      await deps.retain(req, workspace);
      throw err;
    }
    if (!begun && workerStopping(deps, activity)) {
      await deps.retain(req, workspace);
      // Nothing was done: another worker may take the launch (the workflow dispatches it again).
      throw ApplicationFailure.create({
        type: WORKER_SHUTDOWN,
        message: 'the worker stopped before the effect began',
        nonRetryable: true,
      });
    }
    const error = toToolError(err);
    outcome = {
      status: 'failed',
      evidenceId: null,
      summary: null,
      error: { ...error, details: { ...error.details, effect_began: begun } },
    };
  } finally {
    beats.stop();
    ends.stop();
  }
  if (outcome.status !== 'succeeded' && workerStopping(deps, activity))
    outcome = interruptedByShutdown(outcome, begun, config);
  ran({ status: outcome.status });
  // Before the launch is seen finished: its reply finds the team's disk already within its bound.
  await deps.retain(req, workspace);
  const stored = await recordOutcome(store, req.workflowId, outcome, currentRun());
  if (outcome.status === 'cancelled') throw new CancelledFailure('the launch was cancelled', [stored]);
  return stored;
}

/**
 * runEffect, whose own unexpected failures (not the effect's, which it records) reach the
 * workflow as an `internal` tool error with a reference: the failure's text, which may name host
 * folders, goes to this worker's log under that reference, never to the caller or the audit UI.
 */
export async function runEffectReported(deps: EffectDeps, req: LaunchRequest): Promise<LaunchOutcome> {
  try {
    return await runEffect(deps, req);
  } catch (err) {
    if (err instanceof ApplicationFailure || err instanceof CancelledFailure) throw err;
    const error = toToolError(err);
    throw ApplicationFailure.nonRetryable(error.message, 'DossierInternal', error);
  }
}
