// The activities a worker registers. runEffect wraps every effectful tool in the
// same launch discipline: journal before the effect, heartbeat while it runs,
// retain the complete result as Evidence, record the outcome, return only a
// small reference (Temporal payloads must stay far below 2 MiB).
import { Context } from '@temporalio/activity';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import path from 'node:path';
import type { Config } from '../config.ts';
import { sha256Hex } from '../domain/canonical.ts';
import { PRODUCT } from '../domain/product.ts';
import { DossierError, toToolError } from '../domain/errors.ts';
import type { Store } from '../store/store.ts';
import type { LaunchOutcome } from '../domain/types.ts';
import { isFinished } from '../domain/types.ts';
import { CATALOG, TOOLS_BY_NAME } from '../tools/catalog.ts';
import { isLaunchTool } from '../tools/contract.ts';
import { bindAll } from '../tools/registry.ts';
import type { EffectContext, EffectResult } from './effect.ts';
import { makeWorkspace, sweepWorkspaces } from './workspaces/workspaces.ts';
import { TeamDisk } from './workspaces/teamDisk.ts';
import { EFFECT_BINDINGS } from './effects.ts';
import { interruptedOnDevice } from './devices/devices.ts';
import { MUTATING_DEVICE_TOOLS } from '../tools/devices.ts';
import { unknownId } from '../domain/evidence.ts';
import { createAnalysisActivities } from './analysis/analyses.ts';
import { ownWorkflow, vouchForLaunch } from './provenance.ts';
import type { Client } from '@temporalio/client';
import { effectSeconds } from '../metrics/metrics.ts';
import { Sandbox } from '../sandbox/sandbox.ts';
import { payloadKeys } from '../temporal/codec.ts';
import {
  WORKER_SHUTDOWN,
  type BookkeepingActivities,
  type EffectActivities,
  type JournalView,
  type LaunchRequest,
} from '../launches/protocol.ts';

export const PROVIDER = PRODUCT;

const PROGRESS_WRITE_INTERVAL_MS = 1_000;

function filterableOf(tool: string): Record<string, string[]> {
  const collections = TOOLS_BY_NAME.get(tool)?.collections ?? {};
  return Object.fromEntries(Object.entries(collections).map(([name, spec]) => [name, spec.filterable]));
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

export function createActivities(deps: { store: Store; config: Config; client: Client }) {
  const { store, config } = deps;
  const sandbox = new Sandbox(config.sandbox);
  const analyses = createAnalysisActivities({ store, config, sandbox, client: deps.client });
  const keys = payloadKeys(config.payloadKeys, config.home);
  const effects = bindAll('worker', CATALOG, EFFECT_BINDINGS, isLaunchTool);
  const teamDisk = new TeamDisk({
    store,
    home: config.home,
    boundBytes: config.teamWorkspaceBytes,
    retentionMs: config.workspaceRetentionMs,
    log: (line) => console.error(line),
  });
  /** What a finished launch keeps is recorded for its team, and the team kept under its bound; never fails the launch. */
  const retain = (req: LaunchRequest, workspace: string) =>
    teamDisk.retain(req.team, req.workflowId, workspace).catch((err: unknown) => {
      console.error(`dossier: keeping the team bound after ${req.workflowId} failed:`, err);
    });

  /** The worker's housekeeping: workspaces past their retention, rows of retentions a dead worker left. */
  async function maintain() {
    await sweepWorkspaces(config.home, config.workspaceRetentionMs).catch(() => undefined);
    await teamDisk.sweep().catch(() => undefined);
    await store.evidence.sweepStaged().catch(() => undefined);
  }

  async function runEffect(req: LaunchRequest): Promise<LaunchOutcome> {
    const activity = Context.current();
    await vouchForLaunch(store, req);
    const effect = effects.get(req.tool)?.run;
    if (!effect)
      throw ApplicationFailure.nonRetryable(`no effect implementation for tool ${req.tool}`, 'UnknownTool');
    const runId = activity.info.workflowExecution?.runId ?? 'unknown';
    const workspace = path.join(
      config.home,
      'workspaces',
      sha256Hex(req.workflowId).slice(0, 24),
      // One per dispatch: a launch re-dispatched after a lost worker is another activity of the same run.
      `${runId}-${activity.info.activityId}-${activity.info.attempt}`,
    );
    await makeWorkspace(workspace);

    let begun = false;
    let lastWrite = 0;
    // The first heartbeat goes after a second (well inside the 10 s heartbeat timeout): a launch
    // that ends sooner costs Temporal no heartbeat at all.
    let latest: Record<string, unknown> = { phase: 'starting' };
    // Progress reaches the store at most once a second; the last facts of a burst go with the next beat.
    let written: Record<string, unknown> | undefined = latest;
    const writeProgress = () => {
      written = latest;
      lastWrite = Date.now();
      store.launches.recordProgress(req.workflowId, latest).catch(() => undefined);
    };
    const ran = effectSeconds.startTimer({ tool: req.tool });
    const beat = setInterval(() => {
      activity.heartbeat(latest);
      if (written !== latest) writeProgress();
    }, 1_000);
    const ctx: EffectContext = {
      config,
      launchId: req.workflowId,
      caller: { principal: req.principal, team: req.team },
      store,
      sandbox,
      keys,
      attemptId: path.basename(workspace),
      workspace,
      signal: activity.cancellationSignal,
      stopping: () => Boolean(activity.cancellationDetails?.workerShutdown),
      begin: async () => {
        if (!(await store.launches.journalStarted(req.workflowId, { phase: 'started' }))) {
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
        if (Date.now() - lastWrite >= PROGRESS_WRITE_INTERVAL_MS) writeProgress();
      },
    };

    let outcome: LaunchOutcome;
    try {
      const result = boundCollections(await effect(req.input, ctx), config.maxCollectionRows);
      const evidence = await store.evidence.put({
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
      if (err instanceof ApplicationFailure && err.type === 'EffectAlreadyStarted') {
        await retain(req, workspace);
        throw err;
      }
      if (!begun && activity.cancellationDetails?.workerShutdown) {
        await retain(req, workspace);
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
      clearInterval(beat);
    }
    if (outcome.status !== 'succeeded' && activity.cancellationDetails?.workerShutdown) {
      // A stopping worker is not a principal cancelling: the launch was interrupted, and says why.
      outcome = {
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
    ran({ status: outcome.status });
    // Before the launch is seen finished: its reply finds the team's disk already within its bound.
    await retain(req, workspace);
    const stored = await finishLaunch(req.workflowId, outcome);
    if (outcome.status === 'cancelled') throw new CancelledFailure('the launch was cancelled', [stored]);
    return stored;
  }

  async function readJournal(workflowId: string): Promise<JournalView> {
    ownWorkflow(workflowId);
    const record = await store.launches.byWorkflowId(workflowId);
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
    ownWorkflow(workflowId);
    const record = await store.launches.finish(workflowId, outcome);
    if (!record || !isFinished(record.status)) return outcome;
    if (record.status === 'interrupted' && MUTATING_DEVICE_TOOLS.has(record.tool)) {
      // A device operation lost mid-way leaves the device in a state nobody knows: say so, on the device.
      const unknown = interruptedOnDevice(record.tool, record.input as Record<string, unknown>, workflowId);
      await store.unknowns.record(
        record.team,
        record.principal,
        { ...unknown, unknown_id: unknownId(unknown) },
        record.investigation,
        [],
      );
    }
    return {
      status: record.status,
      evidenceId: record.evidenceId,
      summary: record.summary,
      error: record.error,
    };
  }

  /**
   * runEffect, whose own unexpected failures (not the effect's, which it records) reach the
   * workflow as an `internal` tool error with a reference: the failure's text, which may name host
   * folders, goes to this worker's log under that reference, never to the caller or the audit UI.
   */
  async function runEffectReported(req: LaunchRequest): Promise<LaunchOutcome> {
    try {
      return await runEffect(req);
    } catch (err) {
      if (err instanceof ApplicationFailure || err instanceof CancelledFailure) throw err;
      const error = toToolError(err);
      throw ApplicationFailure.nonRetryable(error.message, 'DossierInternal', error);
    }
  }

  const effectActivities: EffectActivities = { runEffect: runEffectReported };
  const bookkeeping: BookkeepingActivities = { readJournal, finishLaunch };
  return {
    maintain,
    effects: effectActivities,
    bookkeeping: { ...bookkeeping, ...analyses.bookkeeping },
    analysis: analyses.work,
  };
}
