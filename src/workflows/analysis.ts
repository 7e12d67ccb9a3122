// The analysis workflows: one builds an artifact's analysis database (once per
// team, artifact, profile and provider: every analysis of that artifact waits
// on the same build), the other answers one analysis tool call from it (once
// per team and input). Both are read-only, so their activities may retry.
// Deterministic: no I/O here.
import {
  ActivityFailure,
  ApplicationFailure,
  isCancellation,
  proxyActivities,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import type {
  AnalysisActivities,
  AnalysisBookkeeping,
  AnalysisOutcome,
  AnalysisRequest,
  DatabaseRef,
  DatabaseRequest,
} from '../launches/protocol.ts';
import { errorOutcome } from '../launches/outcomes.ts';
import { UNVOUCHED } from '../launches/protocol.ts';
import { isUnvouched } from './launch.ts';
import { capabilityQueue, WORKFLOW_TASK_QUEUE } from '../temporal/queues.ts';
import { SEARCH_ATTRIBUTES } from '../temporal/searchAttributes.ts';

/** Failures that say what is wrong with the request or the target: trying again cannot help. */
const NON_RETRYABLE = ['ToolError'];

function work(maxRunMs: number) {
  return proxyActivities<AnalysisActivities>({
    taskQueue: capabilityQueue('analysis'),
    startToCloseTimeout: maxRunMs,
    // A lost worker is noticed through missed heartbeats; a read-only analysis may simply run again.
    heartbeatTimeout: '60 seconds',
    scheduleToStartTimeout: '10 minutes',
    retry: { maximumAttempts: 2, nonRetryableErrorTypes: NON_RETRYABLE },
  });
}

export async function analysisDatabaseWorkflow(req: DatabaseRequest): Promise<DatabaseRef> {
  // The activity records the database (or why it failed) in the store itself.
  try {
    return ended('succeeded', await work(req.maxRunMs).buildAnalysisDatabase(req));
  } catch (err) {
    throw ended(isCancellation(err) ? 'cancelled' : 'failed', err);
  }
}

/** The audit finds a build or an analysis by how it ended, as it finds launches (DossierOutcome). */
function ended<T>(outcome: 'succeeded' | 'failed' | 'cancelled', value: T): T {
  upsertSearchAttributes([{ key: SEARCH_ATTRIBUTES.outcome, value: outcome }]);
  return value;
}

export async function analysisWorkflow(req: AnalysisRequest): Promise<AnalysisOutcome> {
  const bookkeeping = proxyActivities<AnalysisBookkeeping>({
    taskQueue: WORKFLOW_TASK_QUEUE,
    // Waiting for the database may take as long as its build, and a retry re-attaches to it.
    startToCloseTimeout: (req.database?.maxRunMs ?? 0) + 15 * 60_000,
    heartbeatTimeout: '60 seconds',
    retry: { maximumAttempts: 5, nonRetryableErrorTypes: NON_RETRYABLE },
  });
  try {
    const database = req.database ? await bookkeeping.awaitAnalysisDatabase(req.database) : null;
    // A diff reads a second build's database, shared like any other.
    if (!req.baseDatabase) return ended('succeeded', await work(req.maxRunMs).runAnalysis(req, database));
    const base = await bookkeeping.awaitAnalysisDatabase(req.baseDatabase);
    return ended('succeeded', await work(req.maxRunMs).runAnalysis(req, database, base));
  } catch (err) {
    // Not the analysis claimed under this ID (a forged start): nothing is written over the claim.
    if (isUnvouched(err)) throw ApplicationFailure.nonRetryable(err.cause.message, UNVOUCHED);
    const outcome = failed(err);
    await bookkeeping.finishAnalysis(req.workflowId, outcome);
    // End as Failed, so the audit says so and the same question may be asked again.
    throw ended(
      'failed',
      ApplicationFailure.nonRetryable(
        String(outcome.error?.message ?? 'analysis failed'),
        'ToolError',
        outcome.error,
      ),
    );
  }
}

function failed(err: unknown): AnalysisOutcome {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  const detail =
    cause instanceof ApplicationFailure
      ? (cause.details?.[0] as Record<string, unknown> | undefined)
      : undefined;
  if (detail?.code) {
    const evidenceId = (detail.details as { evidence_id?: string } | undefined)?.evidence_id ?? null;
    return { status: 'failed', evidenceId, summary: null, error: detail };
  }
  const lost = errorOutcome(
    'failed',
    'provider_unavailable',
    `The analysis could not finish: ${(cause as Error)?.message ?? String(cause)}`,
    'Ask again; if it keeps failing, check that a worker serves the analysis capability.',
  );
  return { status: 'failed', evidenceId: null, summary: null, error: lost.error };
}
