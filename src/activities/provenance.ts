// What an activity may believe of its arguments. A workflow's input is
// whatever its starter sent, and anyone who can start a workflow on
// Temporal (an operator's tool, a hole in something in front of it) can send
// any team's name in it. What vouches for a request is the workflow ID the
// activity runs for (Temporal's own, unique per running workflow; dossier's
// IDs name their team) and the row the gateway claimed in the store under
// that ID: for a launch its team, principal, key, tool and body digest; for an
// analysis its team, key, tool, asker and database. A database is named by
// what it is (team, artifact, profile, provider): no other name is one. A
// refused request ends its workflow without writing over the claim.
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { providerKeyOf } from '../analysis/providers.ts';
import { providerKey } from '../analysis/venv.ts';
import { analysisKey, bodyDigest, databaseKey, databaseWorkflowId, workflowOwner } from '../launches/keys.ts';
import {
  UNVOUCHED,
  type AnalysisRequest,
  type DatabaseRequest,
  type LaunchRequest,
} from '../launches/protocol.ts';
import type { LaunchRecord } from '../domain/types.ts';
import type { Config } from '../config.ts';
import type { Store } from '../store/store.ts';
import { capabilityQueue } from '../temporal/queues.ts';
import { TOOLS_BY_NAME } from '../tools/catalog.ts';
import { DEFAULT_MAX_RUN_MS } from '../tools/contract.ts';

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

/**
 * The run of `workflowId` this activity works for, or null when it works for another workflow: the
 * row of `workflowId` keeps it even when the run ends before its starter records it, and never
 * keeps another workflow's run.
 */
export function ownRun(workflowId: string): string | null {
  const execution = Context.current().info.workflowExecution;
  return execution?.workflowId === workflowId ? execution.runId : null;
}

/** Refuses an activity whose request names another team than its workflow's ID. */
export function ownTeam(team: string): void {
  const id = running();
  const owner = workflowOwner(id);
  if (owner?.team !== team) refuse(`workflow ${id} does not belong to team ${team}: refused`);
}

/**
 * A launch's effect runs for its launch: under its workflow, or, on a worker that runs launches as
 * standalone activities (DOSSIER_LAUNCH_DISPATCH=standalone), as the `runEffect` activity started
 * under the launch's ID, and only so. Activity IDs are apart from workflow IDs: a worker that took
 * either for the other would let a second run hold a running launch's ID.
 */
function ownLaunch(req: LaunchRequest, dispatch: Config['launchDispatch']): void {
  if (dispatch !== 'standalone') return ownWorkflow(req.workflowId);
  const { info } = Context.current();
  if (info.inWorkflow || info.activityType !== 'runEffect' || info.activityId !== req.workflowId)
    refuse(
      `this worker runs launches as standalone activities (DOSSIER_LAUNCH_DISPATCH=standalone), and this is not the one started under ${req.workflowId}: refused`,
    );
}

/**
 * The run this activity works for: its workflow's, or its own as a standalone activity. For a launch's
 * effect, once vouched for, that is the launch's run.
 */
export function currentRun(): string | null {
  const { info } = Context.current();
  return info.workflowExecution?.runId ?? info.activityRunId ?? null;
}

/**
 * Refuses the launch workflows' bookkeeping on a worker that runs launches as standalone
 * activities: no launch there has a workflow, so one that asks is not the launch's.
 */
export function noLaunchWorkflows(dispatch: Config['launchDispatch'], workflowId: string): void {
  if (dispatch === 'standalone')
    refuse(
      `this worker runs launches as standalone activities (DOSSIER_LAUNCH_DISPATCH=standalone): workflow ${workflowId} is not a launch's: refused`,
    );
}

/**
 * Refuses a launch request that is not what the gateway claimed under its
 * workflow's ID: another workflow, team, principal, key or tool, or a body
 * whose digest is not the claimed one. Nothing of such a request runs.
 * Answers the claimed row, as read.
 */
export async function vouchForLaunch(
  store: Store,
  req: LaunchRequest,
  dispatch: Config['launchDispatch'],
): Promise<LaunchRecord> {
  ownLaunch(req, dispatch);
  const claimed = await store.launches.byWorkflowId(req.workflowId);
  if (!claimed) refuse(`no launch was claimed under ${req.workflowId}: nothing runs`);
  // What the gateway derives from the tool's contract: its capability's queue, its time bound.
  const contract = TOOLS_BY_NAME.get(req.tool);
  const same =
    claimed.team === req.team &&
    claimed.principal === req.principal &&
    claimed.key === req.key &&
    claimed.tool === req.tool &&
    claimed.bodyDigest === req.bodyDigest &&
    claimed.investigation === req.investigation &&
    bodyDigest(req.tool, req.input) === claimed.bodyDigest &&
    contract !== undefined &&
    req.capability === contract.runsOn &&
    Context.current().info.taskQueue === capabilityQueue(contract.runsOn) &&
    req.maxRunMs === (contract.maxRunMs?.(req.input) ?? DEFAULT_MAX_RUN_MS);
  if (!same)
    refuse(`the request of workflow ${req.workflowId} is not the launch claimed under it: nothing runs`);
  // A standalone launch's one run is the activity the gateway recorded (or the first, before it has).
  const { info } = Context.current();
  if (!info.inWorkflow && claimed.runId && claimed.runId !== info.activityRunId)
    refuse(`launch ${req.workflowId} runs as activity run ${claimed.runId}, not this one: nothing runs`);
  return claimed;
}

/**
 * Refuses a database request whose workflow ID and key are not the ones
 * its team, artifact and profile make (a database is named by what it is,
 * so any other name is someone else's workflow), or that runs for a
 * workflow other than the team's build of it or the team's analysis that
 * the gateway claimed on it.
 */
export async function vouchForDatabase(store: Store, req: DatabaseRequest): Promise<void> {
  const provider = providerKey();
  if (
    req.workflowId !== databaseWorkflowId(req.team, req.artifact, req.profile, provider) ||
    req.key !== databaseKey(req.artifact, req.profile, provider)
  )
    refuse(
      `${req.workflowId} is not team ${req.team}'s database of ${req.artifact} (${req.profile}): refused`,
    );
  const id = running();
  if (id === req.workflowId) return ownTeam(req.team);
  const analysis = await store.analyses.byWorkflowId(id);
  // A diff reads its base build's database too, named by the same profile and provider.
  const base = analysis?.input.base;
  const baseKey =
    typeof base === 'string'
      ? databaseKey(base, String(analysis?.input.profile ?? 'default'), provider)
      : null;
  if (analysis?.team !== req.team || (analysis.databaseKey !== req.key && baseKey !== req.key))
    refuse(`workflow ${id} is no analysis of team ${req.team} on ${req.key}: refused`);
}

/**
 * Refuses an analysis request that is not the one the gateway claimed under
 * its workflow's ID: another team, key, tool, asker or database, or an
 * input whose key is not the claimed one.
 */
export async function vouchForAnalysis(store: Store, req: AnalysisRequest): Promise<void> {
  ownWorkflow(req.workflowId);
  const claimed = await store.analyses.byWorkflowId(req.workflowId);
  if (!claimed) refuse(`no analysis was claimed under ${req.workflowId}: nothing runs`);
  const same =
    claimed.kind === 'query' &&
    claimed.team === req.team &&
    claimed.key === req.key &&
    claimed.tool === req.tool &&
    claimed.requestedBy === req.requestedBy &&
    claimed.databaseKey === (req.database?.key ?? null) &&
    analysisKey(req.tool, req.input, providerKeyOf(req.tool)) === req.key &&
    (req.database === null || req.input.artifact === req.database.artifact) &&
    req.input.base === req.baseDatabase?.artifact &&
    (!req.baseDatabase || req.baseDatabase.profile === req.database?.profile);
  if (!same)
    refuse(`the request of workflow ${req.workflowId} is not the analysis claimed under it: nothing runs`);
  if (req.database) await vouchForDatabase(store, req.database);
  if (req.baseDatabase) await vouchForDatabase(store, req.baseDatabase);
}
