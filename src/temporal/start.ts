// The key contract's one start, for launches, analyses and database builds
// alike: a workflow is started under its ID, or the call attaches to the run
// that already holds the ID (running, or closed and not to be run again under
// the reuse policy the caller gives).
import {
  WorkflowExecutionAlreadyStartedError,
  type Client,
  type WorkflowStartOptions,
} from '@temporalio/client';

/** A launch: its key's one run, attached to while it runs and after it closes, never run again. */
export const RUN_ONCE = {
  workflowIdConflictPolicy: 'USE_EXISTING',
  workflowIdReusePolicy: 'REJECT_DUPLICATE',
} as const;

/** An analysis or a database build: answered once; a failed run may run again, a successful one is read from the store. */
export const ANSWER_ONCE = {
  workflowIdConflictPolicy: 'USE_EXISTING',
  workflowIdReusePolicy: 'ALLOW_DUPLICATE_FAILED_ONLY',
} as const;

export interface Started {
  runId: string;
  /** false: an earlier call had started it and this one attached. */
  started: boolean;
}

export async function startOrAttachWorkflow(
  client: Client,
  workflowType: string,
  options: WorkflowStartOptions,
): Promise<Started> {
  try {
    const handle = await client.workflow.start(workflowType, options);
    return { runId: handle.firstExecutionRunId, started: true };
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    const described = await client.workflow.getHandle(options.workflowId).describe();
    return { runId: described.runId, started: false };
  }
}
