// The launch workflow: runs one effectful tool at most once and records how it
// ended. Deterministic: no I/O here, all of it is in the activities.
import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  isCancellation,
  proxyActivities,
  proxyLocalActivities,
  sleep,
  TimeoutFailure,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import { SEARCH_ATTRIBUTES } from '../temporal/searchAttributes.ts';
import {
  NOT_SERVED_HERE,
  UNVOUCHED,
  WORKER_SHUTDOWN,
  type BookkeepingActivities,
  type EffectActivities,
  type LaunchRequest,
} from '../launches/protocol.ts';
import type { LaunchOutcome } from '../domain/types.ts';
import { cancelledOutcome, failureOutcome, noWorkerOutcome } from '../launches/outcomes.ts';
import { capabilityQueue, WORKFLOW_TASK_QUEUE } from '../temporal/queues.ts';

/** How often a launch may be re-dispatched when the journal proves the effect never began. */
const MAX_DISPATCHES = 3;

// Bookkeeping only touches the store and is idempotent, so it may retry freely.
const bookkeeping = proxyActivities<BookkeepingActivities>({
  taskQueue: WORKFLOW_TASK_QUEUE,
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '200 ms', maximumInterval: '5 seconds', maximumAttempts: 20 },
});

export async function launchWorkflow(req: LaunchRequest): Promise<LaunchOutcome> {
  const effects = proxyActivities<EffectActivities>({
    taskQueue: capabilityQueue(req.capability),
    // The effect must never run twice on its own: one attempt, and a dead worker
    // is noticed through missed heartbeats rather than by waiting for the end.
    retry: { maximumAttempts: 1 },
    startToCloseTimeout: req.maxRunMs,
    heartbeatTimeout: '10 seconds',
    // Fail rather than wait forever when no worker serves the capability.
    scheduleToStartTimeout: '10 minutes',
    cancellationType: 'WAIT_CANCELLATION_COMPLETED',
  });
  // The same effect run by the worker that runs this workflow task, without a task of its own:
  // the journal keeps it to one run when a lost worker's task is run again elsewhere.
  const inTask = proxyLocalActivities<EffectActivities>({
    retry: { maximumAttempts: 1 },
    startToCloseTimeout: req.maxRunMs,
    cancellationType: 'WAIT_CANCELLATION_COMPLETED',
  });

  let outcome: LaunchOutcome | undefined;
  let here = req.dispatch === 'local';
  for (let dispatch = 1; !outcome; dispatch++) {
    // Only the first dispatch may be local; any later one goes to the capability's queue.
    const local = here;
    here = false;
    try {
      // runEffect records its own outcome in the store before returning it,
      // so the happy path needs no further bookkeeping round trip.
      return settle(await (local ? inTask : effects).runEffect(req));
    } catch (err) {
      if (err instanceof ApplicationFailure && err.type === LAUNCH_FAILED) throw err;
      // A worker that does not serve the capability refuses a local dispatch before anything
      // runs, and the capability's queue takes it (the refusal is no dispatch).
      if (local && failedWith(err, NOT_SERVED_HERE)) {
        dispatch--;
        continue;
      }
      // Not the launch claimed under this ID (a forged start): nothing ran, and nothing is written
      // over the claim, which its own workflow settles.
      if (failedWith(err, UNVOUCHED)) throw ApplicationFailure.nonRetryable(causeOf(err).message, UNVOUCHED);
      // A local effect cancelled through the store ends before Temporal's cancel reaches here.
      const cancelledHere = local && failedWith(err, CANCELLED_TYPE);
      if (isCancellation(err) || cancelledHere) {
        // Record, then let the workflow end as Canceled so the UI shows it so.
        const stored = await CancellationScope.nonCancellable(() =>
          bookkeeping.finishLaunch(req.workflowId, cancelledOutcome()),
        );
        return cancelledHere ? settleCancelled(stored) : endCancelled(err);
      }
      // After a local dispatch, Temporal's cancel may arrive while the journal is read (its task
      // was run again): the journal is read to the end, so the workflow settles as the store says.
      const journal = local
        ? await CancellationScope.nonCancellable(() => bookkeeping.readJournal(req.workflowId))
        : await bookkeeping.readJournal(req.workflowId);
      if (noWorkerServes(err) && journal.effect === 'not_started') {
        outcome = noWorkerOutcome(req.capability, capabilityQueue(req.capability));
      } else if (journal.finished) {
        // The activity recorded its own outcome before failing to report it.
        outcome = journal.finished;
      } else if (
        journal.effect === 'not_started' &&
        dispatch < MAX_DISPATCHES &&
        (isLostWorker(err) || isStoppedWorker(err))
      ) {
        // The journal proves the effect never began: dispatching again is safe.
        continue;
      } else {
        outcome = failureOutcome(causeOf(err), journal.effect === 'started');
      }
    }
  }
  // Record even if a cancellation arrives at this very moment.
  const recorded = outcome;
  const stored = await CancellationScope.nonCancellable(() =>
    bookkeeping.finishLaunch(req.workflowId, recorded),
  );
  if (req.dispatch === 'local' && stored.status === 'cancelled') return settleCancelled(stored);
  return settle(stored);
}

/** How a CancelledFailure thrown by a local activity that Temporal did not cancel reaches its workflow. */
const CANCELLED_TYPE = 'CancelledFailure';

/**
 * A local effect hears cancel_launch through the store, which the gateway writes once Temporal has
 * the cancel: the cancel reaches this workflow a moment later, and the workflow ends Canceled then.
 */
async function settleCancelled(stored: LaunchOutcome): Promise<LaunchOutcome> {
  try {
    await sleep(CANCEL_ARRIVES_MS);
  } catch (err) {
    if (isCancellation(err)) return endCancelled(err);
    throw err;
  }
  return settle(stored);
}

/** How long a launch whose local effect was cancelled waits for Temporal's cancel to reach it. */
const CANCEL_ARRIVES_MS = 30_000;

/** Ends the workflow Canceled, its outcome in the audit. */
function endCancelled(err: unknown): never {
  upsertSearchAttributes([{ key: SEARCH_ATTRIBUTES.outcome, value: 'cancelled' }]);
  throw err;
}

/** The failure type of a launch that ended without succeeding; its details hold the outcome. */
export const LAUNCH_FAILED = 'DossierLaunchFailed';

/**
 * Ends the workflow as the launch ended, for the audit: the outcome (and the
 * Evidence) in search attributes, and a launch that did not succeed ends the
 * workflow Failed with the dossier error as its failure, the outcome in its details.
 */
function settle(outcome: LaunchOutcome): LaunchOutcome {
  upsertSearchAttributes([
    { key: SEARCH_ATTRIBUTES.outcome, value: outcome.status },
    ...(outcome.evidenceId ? [{ key: SEARCH_ATTRIBUTES.evidence, value: outcome.evidenceId }] : []),
  ]);
  if (outcome.status === 'succeeded') return outcome;
  const error = outcome.error as { code?: string; message?: string } | null;
  throw ApplicationFailure.create({
    type: LAUNCH_FAILED,
    message: `${outcome.status}: ${error?.code ?? 'error'}: ${error?.message ?? 'the launch did not succeed'}`,
    nonRetryable: true,
    details: [outcome],
  });
}

/** An activity refused its request as not vouched for (activities/provenance.ts). */
export function isUnvouched(err: unknown): err is ActivityFailure & { cause: ApplicationFailure } {
  return (
    err instanceof ActivityFailure && err.cause instanceof ApplicationFailure && err.cause.type === UNVOUCHED
  );
}

/** What a dispatch failed with: an activity's failure wraps it, a local activity's is it. */
function causeOf(err: unknown): Error {
  return (err instanceof ActivityFailure ? err.cause : err) as Error;
}

function failedWith(err: unknown, type: string): boolean {
  const cause = causeOf(err);
  return cause instanceof ApplicationFailure && cause.type === type;
}

function isLostWorker(err: unknown): boolean {
  return causeOf(err) instanceof TimeoutFailure;
}

/** The effect's worker was stopped before the effect began (runEffect says so). */
function isStoppedWorker(err: unknown): boolean {
  return failedWith(err, WORKER_SHUTDOWN);
}

function noWorkerServes(err: unknown): boolean {
  const cause = causeOf(err);
  return cause instanceof TimeoutFailure && cause.timeoutType === 'SCHEDULE_TO_START';
}
