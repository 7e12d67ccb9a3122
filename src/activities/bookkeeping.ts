// The launch workflow's bookkeeping activities: what the journal says of a
// launch, and its outcome recorded once (first writer wins).
import { unknownId } from '../domain/evidence.ts';
import { isFinished, type LaunchOutcome } from '../domain/types.ts';
import type { JournalView } from '../launches/protocol.ts';
import type { Store } from '../store/store.ts';
import { MUTATING_DEVICE_TOOLS } from '../tools/devices.ts';
import { interruptedOnDevice } from './devices/devices.ts';
import { noLaunchWorkflows, ownRun, ownWorkflow } from './provenance.ts';
import type { Config } from '../config.ts';

export async function readJournal(
  store: Store,
  workflowId: string,
  dispatch: Config['launchDispatch'],
): Promise<JournalView> {
  noLaunchWorkflows(dispatch, workflowId);
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
export async function finishLaunch(
  store: Store,
  workflowId: string,
  outcome: LaunchOutcome,
  dispatch: Config['launchDispatch'],
): Promise<LaunchOutcome> {
  noLaunchWorkflows(dispatch, workflowId);
  ownWorkflow(workflowId);
  return recordOutcome(store, workflowId, outcome, ownRun(workflowId));
}

/** Records a vouched-for launch's outcome (first writer wins) and what it leaves on a device. */
export async function recordOutcome(
  store: Store,
  workflowId: string,
  outcome: LaunchOutcome,
  runId: string | null,
): Promise<LaunchOutcome> {
  // The calls waiting on the launch answer once all it leaves is written (the unknown below).
  const record = await store.launches.finish(workflowId, outcome, { announce: false, runId });
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
  store.launches.announceEnd(workflowId);
  return {
    status: record.status,
    evidenceId: record.evidenceId,
    summary: record.summary,
    error: record.error,
  };
}
