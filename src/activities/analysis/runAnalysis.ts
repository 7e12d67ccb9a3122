// runAnalysis: a tool call answered from the team's database (or, for a rule
// scan, from the artifact alone) and retained as Evidence; finishAnalysis
// records an analysis's outcome.
import { ApplicationFailure } from '@temporalio/common';
import { openDatabase } from '../../analysis/files.ts';
import type { QueryResult } from '../../analysis/queries.ts';
import { toToolError } from '../../domain/errors.ts';
import type { AnalysisOutcome, AnalysisRequest, DatabaseRef } from '../../launches/protocol.ts';
import { evidenceOf } from '../evidenceRecord.ts';
import { ownRun, ownWorkflow, refuse, vouchForAnalysis } from '../provenance.ts';
import type { AnalysisBinding, AnalysisContext } from './bindings.ts';
import { artifactFile, beating, providerOf, refOf, toolFailure, type AnalysisDeps } from './context.ts';

type Answer = QueryResult & { provider?: DatabaseRef['provider'] };

/** The team's built database under `key`; refused when it is not the one `claimed` names. */
async function teamDatabase(
  deps: AnalysisDeps,
  team: string,
  key: string,
  claimed: DatabaseRef,
): Promise<DatabaseRef> {
  const row = await deps.store.analyses.get(team, key);
  if (row?.status !== 'succeeded' || !row.result || refOf(row).digest !== claimed.digest)
    refuse(`team ${team} has no built database ${claimed.digest} under ${key}: refused`);
  return refOf(row);
}

/** The answer retained as Evidence, with the database's facts (or the scanner's provider). */
async function retainAnswer(
  deps: AnalysisDeps,
  req: AnalysisRequest,
  artifact: string,
  database: DatabaseRef | null,
  result: Answer,
): Promise<string> {
  const evidence = await deps.store.evidence.put(
    evidenceOf({
      tool: req.tool,
      provider: database?.provider ?? result.provider ?? { name: 'unknown', version: 'unknown' },
      parameters: req.input,
      parametersDigest: req.key,
      target: { digest: artifact },
      principal: req.requestedBy,
      team: req.team,
      investigation: null,
      workflowId: req.workflowId,
      summary: result.summary,
      truncated: Boolean(result.truncated) || Boolean(database?.truncated),
      limitations: [...(result.limitations ?? []), ...(database?.limitations ?? [])],
      document: {
        ...result.document,
        ...(database
          ? {
              provider: { ...database.provider, profile: database.profile, parameters: database.parameters },
              database: database.digest,
            }
          : { provider: result.provider }),
      },
      collections: result.collections,
      unknowns: result.unknowns,
    }),
  );
  return evidence.evidence_id;
}

/** Opens the databases the request names; an analysis without a database (a rule scan) reads none. */
async function opened(
  deps: AnalysisDeps,
  database: DatabaseRef | null,
  base: DatabaseRef | null,
): Promise<AnalysisContext['opened']> {
  if (!database) return null;
  const { config, store } = deps;
  return {
    db: await openDatabase(config.home, database.digest, store.blobs),
    database,
    base: base
      ? { db: await openDatabase(config.home, base.digest, store.blobs), database: base }
      : undefined,
  };
}

export async function runAnalysis(
  deps: AnalysisDeps,
  bindings: ReadonlyMap<string, AnalysisBinding>,
  req: AnalysisRequest,
  built: DatabaseRef | null,
  builtBase?: DatabaseRef,
): Promise<AnalysisOutcome> {
  const { store, config, sandbox } = deps;
  await vouchForAnalysis(store, req);
  // The database is the one the store holds for this team, whatever the argument says.
  const database = req.database && built ? await teamDatabase(deps, req.team, req.database.key, built) : null;
  if (req.baseDatabase && !builtBase) refuse(`${req.workflowId} needs its base build's database: refused`);
  const baseRef = req.baseDatabase
    ? await teamDatabase(deps, req.team, req.baseDatabase.key, builtBase!)
    : null;
  const done = await store.analyses.get(req.team, req.key);
  if (done?.status === 'succeeded') {
    return { status: 'succeeded', evidenceId: done.evidenceId, summary: done.result, error: null };
  }
  const binding = bindings.get(req.tool);
  if (!binding) throw ApplicationFailure.nonRetryable(`no analysis bound for ${req.tool}`, 'UnknownTool');
  const run = ownRun(req.workflowId);
  await store.analyses.started(req.workflowId, run);
  try {
    const artifact = (req.input.artifact ?? req.input.evidence_id) as string;
    const ctx: AnalysisContext = {
      opened: await opened(deps, database, baseRef),
      artifact,
      sandbox,
      team: req.team,
      store,
      config,
      provider: () => providerOf(config),
      artifactFile: () => artifactFile(deps, req.team, artifact),
    };
    const result: Answer = await beating(async () => binding.run(req.input, ctx));
    const evidenceId = await retainAnswer(deps, req, artifact, database, result);
    // A diff's matches become the team's links between the two builds (annotations follow them).
    if (result.links?.length) await store.functions.recordLinks(req.team, result.links);
    const outcome: AnalysisOutcome = {
      status: 'succeeded',
      evidenceId,
      summary: result.summary,
      error: null,
    };
    await store.analyses.finish(req.workflowId, { ...outcome, result: result.summary }, run);
    return outcome;
  } catch (err) {
    throw toolFailure(toToolError(err));
  }
}

export async function finishAnalysis(
  deps: AnalysisDeps,
  workflowId: string,
  outcome: AnalysisOutcome,
): Promise<AnalysisOutcome> {
  ownWorkflow(workflowId);
  await deps.store.analyses.finish(workflowId, { ...outcome, result: outcome.summary }, ownRun(workflowId));
  return outcome;
}
