// awaitAnalysisDatabase: an analysis waits on its database's build workflow,
// whoever started it; the team's own database only, by the name it is built under.
import { WorkflowFailedError } from '@temporalio/client';
import type { ToolError } from '../../domain/errors.ts';
import type { DatabaseRef, DatabaseRequest } from '../../launches/protocol.ts';
import { WORKFLOW_TASK_QUEUE } from '../../temporal/queues.ts';
import { auditAttributes } from '../../temporal/searchAttributes.ts';
import { ANSWER_ONCE, startOrAttachWorkflow } from '../../temporal/start.ts';
import { vouchForDatabase } from '../provenance.ts';
import { beating, DATABASE_TOOL, refOf, toolFailure, type AnalysisDeps } from './context.ts';

/** Starts the build workflow or attaches to it, and waits for its database. */
async function buildWorkflowResult(deps: AnalysisDeps, req: DatabaseRequest): Promise<DatabaseRef> {
  const { store, client } = deps;
  const { started, runId } = await startOrAttachWorkflow(client, 'analysisDatabaseWorkflow', {
    taskQueue: WORKFLOW_TASK_QUEUE,
    workflowId: req.workflowId,
    args: [req],
    ...ANSWER_ONCE,
    // The team's audit lists its builds beside its analyses: the UI narrows lists to DossierTeam.
    memo: {
      tool: DATABASE_TOOL,
      team: req.team,
      requested_by: req.requestedBy,
      artifact: req.artifact,
    },
    typedSearchAttributes: auditAttributes({
      tool: DATABASE_TOOL,
      principal: req.requestedBy,
      team: req.team,
      key: req.key,
      artifacts: [req.artifact],
      targets: [req.artifact],
    }),
  });
  // Attached to a run closed already and not failed: the database exists; the store says where.
  if (started) await store.analyses.markRunning(req.workflowId, runId);
  const handle = client.workflow.getHandle(req.workflowId);
  try {
    return (await handle.result()) as DatabaseRef;
  } catch (err) {
    const failed = await store.analyses.get(req.team, req.key);
    if (err instanceof WorkflowFailedError && failed?.error)
      throw toolFailure(failed.error as unknown as ToolError);
    throw err;
  }
}

export async function awaitAnalysisDatabase(deps: AnalysisDeps, req: DatabaseRequest): Promise<DatabaseRef> {
  const { store } = deps;
  // Only the team's own database, by the name it is built under: never another workflow's result.
  await vouchForDatabase(store, req);
  const ready = await store.analyses.get(req.team, req.key);
  if (ready?.status === 'succeeded' && ready.result) return refOf(ready);
  const { record } = await store.analyses.claim({
    team: req.team,
    key: req.key,
    kind: 'database',
    tool: DATABASE_TOOL,
    input: { artifact: req.artifact, profile: req.profile },
    databaseKey: null,
    workflowId: req.workflowId,
    requestedBy: req.requestedBy,
  });
  if (record.status === 'failed') await store.analyses.retryFailed(req.team, req.key, req.requestedBy);
  return beating(() => buildWorkflowResult(deps, req));
}
