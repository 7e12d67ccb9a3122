// Launches dispatched as standalone activities (DOSSIER_LAUNCH_DISPATCH=standalone, Temporal 1.31+):
// the effect's activity is started by the launch's ID on its capability's queue, with no workflow
// around it. The activity records its own outcome in the store, as under a workflow; what a workflow
// would record when the effect ends without one (a lost worker, a cancel, no worker at all) the
// gateway records here, from the activity's failure and the journal.
import { ActivityExecutionFailedError, ActivityNotFoundError, type Client } from '@temporalio/client';
import { CancelledFailure, TimeoutFailure } from '@temporalio/common';
import type { LaunchOutcome, LaunchRecord, Principal } from '../domain/types.ts';
import { cancelledOutcome, failureOutcome, noWorkerOutcome } from '../launches/outcomes.ts';
import type { LaunchStore } from '../store/launches.ts';
import { capabilityQueue } from '../temporal/queues.ts';
import { auditAttributes, launchTargets } from '../temporal/searchAttributes.ts';
import { TOOLS_BY_NAME } from '../tools/catalog.ts';
import type { ToolContract } from '../tools/contract.ts';
import { launchRequest, unavailable, type deviceAttributes } from './launchStart.ts';

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
  return failureOutcome(cause, record.effect === 'started');
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

/**
 * The launches running since before `olderThanMs` ago whose activity has ended with a failure, each
 * with it (a launch that is a workflow, or whose activity still runs, is left).
 */
export async function endedWithoutOutcome(
  client: Client,
  launches: LaunchStore,
  olderThanMs = 15_000,
): Promise<[LaunchRecord, ActivityExecutionFailedError][]> {
  const running = await launches.running(new Date(Date.now() - olderThanMs).toISOString(), 50);
  const ended: [LaunchRecord, ActivityExecutionFailedError][] = [];
  for (const record of running) {
    const handle = client.activity.getHandle(record.workflowId, record.runId ?? undefined);
    try {
      if ((await handle.describe()).status === 'RUNNING') continue;
      await handle.result();
    } catch (err) {
      if (err instanceof ActivityExecutionFailedError) ended.push([record, err]);
      else if (!(err instanceof ActivityNotFoundError)) throw err;
    }
  }
  return ended;
}
