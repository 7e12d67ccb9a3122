// What an activity may believe of its arguments. A workflow's input is
// whatever its starter sent, and anyone who can start a workflow on
// Temporal (an operator's tool, a hole in something in front of it) can send
// any team's name in it. What vouches for a request is the workflow ID the
// activity runs for (Temporal's own, unique per running workflow; dossier's
// IDs name their team) and, for a launch, the row the gateway claimed in the
// store under that ID: the team, the principal, the tool and the body digest.
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { bodyDigest, workflowOwner } from '../launches/keys.ts';
import type { LaunchRequest } from '../launches/protocol.ts';
import type { Store } from '../store/store.ts';

/** The failure type of a request nothing vouches for; never retried. */
export const UNVOUCHED = 'DossierUnvouchedRequest';

/** Ends the activity: what it was asked is not vouched for. */
export function refuse(message: string): never {
  throw ApplicationFailure.create({ type: UNVOUCHED, message, nonRetryable: true });
}

function running(): string {
  const id = Context.current().info.workflowExecution?.workflowId;
  if (!id) refuse('this activity runs for no workflow: refused');
  return id;
}

/** Refuses an activity asked about another workflow than the one it runs for. */
export function ownWorkflow(named: string): void {
  const id = running();
  if (id !== named) refuse(`this activity runs for workflow ${id}, and was asked about ${named}: refused`);
}

/** Refuses an activity whose request names another team than its workflow's ID. */
export function ownTeam(team: string): void {
  const id = running();
  const owner = workflowOwner(id);
  if (owner?.team !== team) refuse(`workflow ${id} does not belong to team ${team}: refused`);
}

/**
 * Refuses a launch request that is not what the gateway claimed under its
 * workflow's ID: another workflow, team, principal, key or tool, or a body
 * whose digest is not the claimed one. Nothing of such a request runs.
 */
export async function vouchForLaunch(store: Store, req: LaunchRequest): Promise<void> {
  ownWorkflow(req.workflowId);
  const claimed = await store.launches.byWorkflowId(req.workflowId);
  if (!claimed) refuse(`no launch was claimed under ${req.workflowId}: nothing runs`);
  const same =
    claimed.team === req.team &&
    claimed.principal === req.principal &&
    claimed.key === req.key &&
    claimed.tool === req.tool &&
    claimed.bodyDigest === req.bodyDigest &&
    bodyDigest(req.tool, req.input) === claimed.bodyDigest;
  if (!same)
    refuse(`the request of workflow ${req.workflowId} is not the launch claimed under it: nothing runs`);
}
