// Launches dispatched as standalone activities (DOSSIER_LAUNCH_DISPATCH=standalone, Temporal 1.31+):
// the effect's activity is started by the launch's ID on its capability's queue, with no workflow
// around it. The activity records its own outcome in the store, as under a workflow; what a workflow
// would record when the effect ends without one (a lost worker, a cancel, no worker at all) the
// gateway records here, from the activity's failure and the journal.
import {
  ActivityExecutionAlreadyStartedError,
  ActivityExecutionFailedError,
  ActivityNotFoundError,
  type Client,
} from '@temporalio/client';
import { ApplicationFailure, CancelledFailure, TimeoutFailure } from '@temporalio/common';
import type { LaunchOutcome, LaunchRecord, Principal } from '../domain/types.ts';
import { cancelledOutcome, errorOutcome, failureOutcome, noWorkerOutcome } from '../launches/outcomes.ts';
import { WORKER_SHUTDOWN } from '../launches/protocol.ts';
import type { LaunchStore } from '../store/launches.ts';
import { capabilityQueue } from '../temporal/queues.ts';
import { auditAttributes, launchTargets } from '../temporal/searchAttributes.ts';
import { TOOLS_BY_NAME } from '../tools/catalog.ts';
import type { ToolContract } from '../tools/contract.ts';
import { launchRequest, unavailable, type deviceAttributes } from './launchStart.ts';

/** How long the background round gives Temporal to describe one launch's activity. */
const LOOK_MS = 5_000;

/** Starts the launch's activity, or attaches to the one its ID has; answers its run's id. */
export async function startStandalone(
  client: Client,
  record: LaunchRecord,
  contract: ToolContract,
  how: { deadline: number; device: Awaited<ReturnType<typeof deviceAttributes>> },
): Promise<string> {
  const request = launchRequest(record, contract, 'standalone');
  try {
    const handle = await client.connection.withDeadline(how.deadline, () =>
      client.activity.start('runEffect', {
        id: record.workflowId,
        taskQueue: capabilityQueue(contract.runsOn),
        args: [request],
        // As the launch workflow's effect: one attempt, a lost worker noticed by its heartbeat.
        retry: { maximumAttempts: 1 },
        startToCloseTimeout: request.maxRunMs,
        heartbeatTimeout: '10 seconds',
        scheduleToStartTimeout: '10 minutes',
        idConflictPolicy: 'USE_EXISTING',
        idReusePolicy: 'REJECT_DUPLICATE',
        typedSearchAttributes: [
          ...auditAttributes({ ...record, targets: launchTargets(request.input) }),
          ...how.device,
        ],
      }),
    );
    return handle.runId ?? '';
  } catch (err) {
    // The key's one activity has ended (a start whose reply was lost): attach to it.
    if (err instanceof ActivityExecutionAlreadyStartedError && err.runId) return err.runId;
    throw unavailable(err);
  }
}

/** The outcome of a launch whose activity failed without recording one (as the workflow decides it). */
export function standaloneOutcome(record: LaunchRecord, cause: unknown): LaunchOutcome {
  if (cause instanceof CancelledFailure) return cancelledOutcome();
  const capability = TOOLS_BY_NAME.get(record.tool)?.runsOn;
  if (
    capability &&
    cause instanceof TimeoutFailure &&
    cause.timeoutType === 'SCHEDULE_TO_START' &&
    record.effect === 'not_started'
  ) {
    return noWorkerOutcome(capability, capabilityQueue(capability));
  }
  const stopped = cause instanceof ApplicationFailure && cause.type === WORKER_SHUTDOWN;
  if (record.effect === 'not_started' && (stopped || cause instanceof TimeoutFailure)) {
    // A workflow would dispatch it again; the key's one activity cannot be.
    return errorOutcome(
      'failed',
      'provider_unavailable',
      'The worker that took this launch was lost or stopped before the effect began: nothing ran, and a standalone launch is not dispatched again.',
      'Launch again with a new idempotency_key.',
    );
  }
  if (record.effect === 'started') return failureOutcome(cause, true);
  if (cause instanceof ApplicationFailure && cause.details?.[0]) return failureOutcome(cause, false);
  return errorOutcome(
    'failed',
    'internal',
    `The launch failed: ${(cause as Error | undefined)?.message ?? String(cause)}`,
    `Look at its activity in Temporal (temporal activity describe --activity-id '${record.workflowId}'); start a new launch with a new key once fixed.`,
  );
}

/**
 * Asks a launch's activity to cancel (its effect hears it through its heartbeat; the outcome is
 * recorded once the activity ends). False when the launch has no activity of its own (a workflow).
 */
export async function cancelStandalone(
  client: Client,
  caller: Principal,
  record: LaunchRecord,
): Promise<boolean> {
  if (!record.runId) return false;
  try {
    await client.activity
      .getHandle(record.workflowId, record.runId)
      .cancel(`cancel_launch by ${caller.principal} of team ${caller.team}`);
    return true;
  } catch (err) {
    if (err instanceof ActivityNotFoundError) return false;
    throw unavailable(err, 'cancel');
  }
}

/** How many running launches one background round looks at; the next round goes on after them. */
const LOOKS_PER_ROUND = 50;

/**
 * Of the running launches claimed after `cursor.after` and more than `olderThanMs` ago (the next
 * LOOKS_PER_ROUND, oldest first), those whose activity has ended with a failure, each with it (a
 * launch that is a workflow, or whose activity still runs, is left). Moves the cursor past them, or
 * back to the start after the last.
 */
export async function endedWithoutOutcome(
  client: Client,
  launches: LaunchStore,
  cursor: { after: string; id: string },
  olderThanMs = 15_000,
): Promise<[LaunchRecord, ActivityExecutionFailedError][]> {
  const before = new Date(Date.now() - olderThanMs).toISOString();
  const running = await launches.running(cursor, before, LOOKS_PER_ROUND);
  const ended: [LaunchRecord, ActivityExecutionFailedError][] = [];
  // Each look is bounded: a slow Temporal delays the round by seconds, not by its whole list.
  const within = <T>(fn: () => Promise<T>) => client.connection.withDeadline(Date.now() + LOOK_MS, fn);
  for (const record of running) {
    const handle = client.activity.getHandle(record.workflowId, record.runId ?? undefined);
    try {
      if ((await within(() => handle.describe())).status !== 'RUNNING') await within(() => handle.result());
    } catch (err) {
      if (err instanceof ActivityExecutionFailedError) ended.push([record, err]);
      else if (!(err instanceof ActivityNotFoundError)) return ended; // Temporal did not answer: next round, here
    }
    Object.assign(cursor, { after: record.createdAt, id: record.workflowId });
  }
  // After the last of them, the next round starts over.
  if (running.length < LOOKS_PER_ROUND) Object.assign(cursor, { after: '', id: '' });
  return ended;
}
