// The floor of a launch on Temporal: a workflow that runs one activity and returns.
import { proxyActivities, proxyLocalActivities, upsertSearchAttributes } from '@temporalio/workflow';

const { spawnTrue } = proxyActivities<{ spawnTrue(): Promise<number> }>({
  startToCloseTimeout: '1 minute',
  retry: { maximumAttempts: 1 },
});

export async function floorWorkflow(): Promise<number> {
  return spawnTrue();
}

/** The same, and then the outcome in search attributes, as a dossier launch records it for the audit. */
export async function floorAuditedWorkflow(): Promise<number> {
  const code = await spawnTrue();
  upsertSearchAttributes({ DossierOutcome: ['succeeded'], DossierEvidence: ['ev_floor'] });
  return code;
}

const local = proxyLocalActivities<{ spawnTrue(): Promise<number> }>({
  startToCloseTimeout: '1 minute',
  retry: { maximumAttempts: 1 },
});

/**
 * The activity as a local activity: run by the worker inside the workflow task, one task in all.
 * Not a shape dossier can take as it is: a local activity runs where the workflow task runs (not on
 * its capability's workers), and a worker lost mid-activity re-runs it with the retried task.
 */
export async function floorLocalWorkflow(): Promise<number> {
  return local.spawnTrue();
}
