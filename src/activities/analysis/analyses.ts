// The analysis activities: build an artifact's database (the provider in the
// sandbox), wait on a build whoever started it, and answer a tool call from a
// database, retaining the answer as Evidence. Every analysis contract is bound
// to its query in analysisBindings.ts; the worker refuses to load with one unbound.
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { Client } from '@temporalio/client';
import { WorkflowFailedError } from '@temporalio/client';
import { buildDatabase } from '../../analysis/build.ts';
import { keepDatabase, openDatabase, scratchFile } from '../../analysis/files.ts';
import { provisionProvider, type AnalysisProvider } from '../../analysis/venv.ts';
import type { Config } from '../../config.ts';
import { artifactNotFound, toToolError, type ToolError } from '../../domain/errors.ts';
import { verifyArtifact } from '../../evidence/artifacts.ts';
import type {
  AnalysisBookkeeping,
  AnalysisOutcome,
  AnalysisRequest,
  DatabaseRef,
  DatabaseRequest,
} from '../../launches/protocol.ts';
import type { Sandbox } from '../../sandbox/sandbox.ts';
import { ownWorkflow, refuse, vouchForAnalysis, vouchForDatabase } from '../provenance.ts';
import type { Store } from '../../store/store.ts';
import type { AnalysisRecord } from '../../store/analyses.ts';
import { WORKFLOW_TASK_QUEUE } from '../../temporal/queues.ts';
import { startOrAttachWorkflow } from '../../temporal/start.ts';
import { SEARCH_ATTRIBUTES } from '../../temporal/searchAttributes.ts';
import { CATALOG, TOOLS_BY_NAME } from '../../tools/catalog.ts';
import { isAnalysisTool } from '../../tools/contract.ts';
import { bindAll } from '../../tools/registry.ts';
import type { QueryResult } from '../../analysis/queries.ts';
import { ANALYSIS_BINDINGS } from './bindings.ts';
import { indexIdentities } from './identityIndex.ts';

export { ANALYSIS_BINDINGS };

const HEARTBEAT_MS = 10_000;
/** What a database build is called where a tool's name goes: its records, its Evidence, its audit. */
const DATABASE_TOOL = 'analysis_database';

function toolFailure(error: ToolError): ApplicationFailure {
  return ApplicationFailure.nonRetryable(error.message, 'ToolError', error);
}

function refOf(record: AnalysisRecord): DatabaseRef {
  return record.result as unknown as DatabaseRef;
}

function filterableOf(tool: string): Record<string, string[]> {
  const collections = TOOLS_BY_NAME.get(tool)?.collections ?? {};
  return Object.fromEntries(Object.entries(collections).map(([name, spec]) => [name, spec.filterable]));
}

export function createAnalysisActivities(deps: {
  store: Store;
  config: Config;
  sandbox: Sandbox;
  client: Client;
}) {
  const { store, config, sandbox, client } = deps;
  const bindings = bindAll('worker', CATALOG, ANALYSIS_BINDINGS, isAnalysisTool);
  // One install per process at a time (provisionEnv shares it), then the cached provider.
  const provider = (): Promise<AnalysisProvider> =>
    provisionProvider(config.analysis.python, { log: (line) => console.error(line) });

  /** Keeps an activity alive while `work` runs, with the latest progress as details. */
  async function beating<T>(
    work: (beat: (facts: Record<string, unknown>) => void) => Promise<T>,
  ): Promise<T> {
    const ctx = Context.current();
    let latest: Record<string, unknown> = { phase: 'starting' };
    const timer = setInterval(() => ctx.heartbeat(latest), HEARTBEAT_MS);
    ctx.heartbeat(latest);
    try {
      return await work((facts) => {
        latest = facts;
        ctx.heartbeat(facts);
      });
    } finally {
      clearInterval(timer);
    }
  }

  async function artifactFile(team: string, digest: string): Promise<string> {
    if (!(await store.artifacts.get(team, digest))) {
      throw artifactNotFound(digest);
    }
    return verifyArtifact(config.home, digest, undefined, store.blobs);
  }

  async function buildAnalysisDatabase(req: DatabaseRequest): Promise<DatabaseRef> {
    ownWorkflow(req.workflowId);
    await vouchForDatabase(store, req);
    const existing = await store.analyses.get(req.team, req.key);
    if (existing?.status === 'succeeded' && existing.result) return refOf(existing);
    const activity = Context.current();
    await store.analyses.started(req.workflowId);
    let lastWrite = 0;
    try {
      const ref = await beating(async (beat) => {
        const progress = (facts: Record<string, unknown>) => {
          beat(facts);
          if (Date.now() - lastWrite > 1_000) {
            lastWrite = Date.now();
            store.analyses.recordProgress(req.workflowId, facts).catch(() => undefined);
          }
        };
        progress({ phase: 'analysis: provisioning angr' });
        const chosen = await provider();
        const binary = await artifactFile(req.team, req.artifact);
        const scratch = await scratchFile(config.home);
        const built = await buildDatabase(sandbox, scratch, {
          provider: chosen,
          binary,
          profile: req.profile,
          timeBudgetS: config.analysis.timeBudgetS,
          memoryBytes: config.analysis.memoryMb * 1024 * 1024,
          signal: activity.cancellationSignal,
          onProgress: progress,
        });
        const kept = await keepDatabase(config.home, scratch);
        // Analysis workers and gateways on other hosts fetch it from the store by digest.
        await store.blobs?.put(kept.digest, kept.file, req.team);
        // Its functions' identities join the team's index, so identical functions are found across artifacts.
        await indexIdentities(store, req, await openDatabase(config.home, kept.digest));
        const meta = built.meta;
        return {
          file: kept.file,
          digest: kept.digest,
          provider: { name: 'angr', version: String(meta.provider_version ?? chosen.version) },
          profile: req.profile,
          truncated: Boolean(meta.truncated),
          limitations: (meta.limitations as string[]) ?? [],
          parameters: {
            ...(meta.parameters as Record<string, unknown>),
            bytes: kept.bytes,
            counts: built.counts,
          },
        } satisfies DatabaseRef;
      });
      await store.analyses.finish(req.workflowId, {
        status: 'succeeded',
        evidenceId: null,
        result: ref as unknown as Record<string, unknown>,
        error: null,
      });
      return ref;
    } catch (err) {
      const error = toToolError(err);
      const evidenceId = await retainFailure(req, error);
      const recorded = { ...error, details: { ...error.details, evidence_id: evidenceId } };
      await store.analyses.finish(req.workflowId, {
        status: 'failed',
        evidenceId,
        result: null,
        error: { ...recorded },
      });
      throw toolFailure(recorded);
    }
  }

  /** A provider that failed leaves its stderr as Evidence, so the team can see why. */
  async function retainFailure(req: DatabaseRequest, error: ToolError): Promise<string | null> {
    const stderr = String(error.details.stderr_tail ?? '');
    if (!stderr) return null;
    const evidence = await store.evidence.put({
      record: {
        tool: DATABASE_TOOL,
        provider: { name: 'angr', version: 'unknown' },
        parameters: { artifact: req.artifact, profile: req.profile },
        parameters_digest: req.key,
        target: { digest: req.artifact },
        principal: req.requestedBy,
        team: req.team,
        investigation: null,
        launch: {
          workflow_id: req.workflowId,
          run_id: Context.current().info.workflowExecution?.runId ?? 'unknown',
        },
        created_at: new Date().toISOString(),
        summary: { code: error.code, message: error.message },
        truncated: false,
        limitations: ['the provider failed; stderr holds its last 64 KiB'],
      },
      document: { error },
      collections: { stderr: stderr.split('\n').map((text, i) => ({ line: i + 1, text })) },
      filterable: { stderr: ['line'] },
    });
    return evidence.evidence_id;
  }

  async function awaitAnalysisDatabase(req: DatabaseRequest): Promise<DatabaseRef> {
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
    return beating(async () => {
      const { started, runId } = await startOrAttachWorkflow(client, 'analysisDatabaseWorkflow', {
        taskQueue: WORKFLOW_TASK_QUEUE,
        workflowId: req.workflowId,
        args: [req],
        workflowIdConflictPolicy: 'USE_EXISTING',
        workflowIdReusePolicy: 'ALLOW_DUPLICATE_FAILED_ONLY',
        // The team's audit lists its builds beside its analyses: the UI narrows lists to DossierTeam.
        memo: {
          tool: DATABASE_TOOL,
          team: req.team,
          requested_by: req.requestedBy,
          artifact: req.artifact,
        },
        typedSearchAttributes: [
          { key: SEARCH_ATTRIBUTES.team, value: req.team },
          { key: SEARCH_ATTRIBUTES.tool, value: DATABASE_TOOL },
          { key: SEARCH_ATTRIBUTES.principal, value: req.requestedBy },
          { key: SEARCH_ATTRIBUTES.key, value: req.key },
          { key: SEARCH_ATTRIBUTES.artifact, value: [req.artifact] },
          { key: SEARCH_ATTRIBUTES.target, value: [req.artifact] },
        ],
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
    });
  }

  async function runAnalysis(
    req: AnalysisRequest,
    built: DatabaseRef | null,
    builtBase?: DatabaseRef,
  ): Promise<AnalysisOutcome> {
    await vouchForAnalysis(store, req);
    // The database is the one the store holds for this team, whatever the argument says.
    const database = req.database && built ? await teamDatabase(req.team, req.database.key, built) : null;
    if (req.baseDatabase && !builtBase) refuse(`${req.workflowId} needs its base build's database: refused`);
    const baseRef = req.baseDatabase && (await teamDatabase(req.team, req.baseDatabase.key, builtBase!));
    const done = await store.analyses.get(req.team, req.key);
    if (done?.status === 'succeeded') {
      return { status: 'succeeded', evidenceId: done.evidenceId, summary: done.result, error: null };
    }
    const binding = bindings.get(req.tool);
    if (!binding) throw ApplicationFailure.nonRetryable(`no analysis bound for ${req.tool}`, 'UnknownTool');
    await store.analyses.started(req.workflowId);
    try {
      const artifact = (req.input.artifact ?? req.input.evidence_id) as string;
      // An analysis without a database (a rule scan) never reads one.
      const db = database ? await openDatabase(config.home, database.digest, store.blobs) : (null as never);
      const base = baseRef && {
        db: await openDatabase(config.home, baseRef.digest, store.blobs),
        database: baseRef,
      };
      const result: QueryResult & { provider?: DatabaseRef['provider'] } = await beating(async () =>
        binding.run(req.input, {
          db,
          database: database ?? (null as never),
          artifact,
          base,
          sandbox,
          team: req.team,
          store,
          config,
          provider,
          artifactFile: () => artifactFile(req.team, artifact),
        }),
      );
      const evidence = await store.evidence.put({
        record: {
          tool: req.tool,
          provider: database?.provider ?? result.provider ?? { name: 'unknown', version: 'unknown' },
          parameters: req.input,
          parameters_digest: req.key,
          target: { digest: artifact },
          principal: req.requestedBy,
          team: req.team,
          investigation: null,
          launch: {
            workflow_id: req.workflowId,
            run_id: Context.current().info.workflowExecution?.runId ?? 'unknown',
          },
          created_at: new Date().toISOString(),
          summary: result.summary,
          truncated: Boolean(result.truncated) || Boolean(database?.truncated),
          limitations: [...(result.limitations ?? []), ...(database?.limitations ?? [])],
        },
        document: {
          ...result.document,
          ...(database
            ? {
                provider: {
                  ...database.provider,
                  profile: database.profile,
                  parameters: database.parameters,
                },
                database: database.digest,
              }
            : { provider: result.provider }),
        },
        collections: result.collections,
        filterable: filterableOf(req.tool),
        unknowns: result.unknowns,
      });
      // A diff's matches become the team's links between the two builds (annotations follow them).
      if (result.links?.length) await store.functions.recordLinks(req.team, result.links);
      const outcome: AnalysisOutcome = {
        status: 'succeeded',
        evidenceId: evidence.evidence_id,
        summary: result.summary,
        error: null,
      };
      await store.analyses.finish(req.workflowId, { ...outcome, result: result.summary });
      return outcome;
    } catch (err) {
      throw toolFailure(toToolError(err));
    }
  }

  /** The team's built database under `key`; refused when it is not the one `claimed` names. */
  async function teamDatabase(team: string, key: string, claimed: DatabaseRef): Promise<DatabaseRef> {
    const row = await store.analyses.get(team, key);
    if (row?.status !== 'succeeded' || !row.result || refOf(row).digest !== claimed.digest)
      refuse(`team ${team} has no built database ${claimed.digest} under ${key}: refused`);
    return refOf(row);
  }

  async function finishAnalysis(workflowId: string, outcome: AnalysisOutcome): Promise<AnalysisOutcome> {
    ownWorkflow(workflowId);
    await store.analyses.finish(workflowId, { ...outcome, result: outcome.summary });
    return outcome;
  }

  const bookkeeping: AnalysisBookkeeping = { awaitAnalysisDatabase, finishAnalysis };
  return { work: { buildAnalysisDatabase, runAnalysis }, bookkeeping };
}
