// buildAnalysisDatabase: the provider builds an artifact's database in the
// sandbox; the database is kept by digest, shared through the store's blobs,
// and its functions' identities join the team's index. A failed build leaves
// the provider's stderr as Evidence.
import { Context } from '@temporalio/activity';
import { buildDatabase } from '../../analysis/build.ts';
import { keepDatabase, openDatabase, scratchFile } from '../../analysis/files.ts';
import { toToolError, type ToolError } from '../../domain/errors.ts';
import type { DatabaseRef, DatabaseRequest } from '../../launches/protocol.ts';
import { evidenceOf } from '../evidenceRecord.ts';
import { ownRun, ownWorkflow, vouchForDatabase } from '../provenance.ts';
import {
  artifactFile,
  beating,
  DATABASE_TOOL,
  providerOf,
  refOf,
  toolFailure,
  type AnalysisDeps,
} from './context.ts';
import { indexIdentities } from './identityIndex.ts';

/** Builds and keeps the database, reporting progress to the heartbeat and (once a second) the store. */
async function buildAndKeep(
  deps: AnalysisDeps,
  req: DatabaseRequest,
  beat: (facts: Record<string, unknown>) => void,
): Promise<DatabaseRef> {
  const { store, config, sandbox } = deps;
  let lastWrite = 0;
  const progress = (facts: Record<string, unknown>) => {
    beat(facts);
    if (Date.now() - lastWrite > 1_000) {
      lastWrite = Date.now();
      store.analyses.recordProgress(req.workflowId, facts).catch(() => undefined);
    }
  };
  progress({ phase: 'analysis: provisioning angr' });
  const chosen = await providerOf(config);
  const binary = await artifactFile(deps, req.team, req.artifact);
  const scratch = await scratchFile(config.home);
  const built = await buildDatabase(sandbox, scratch, {
    provider: chosen,
    binary,
    profile: req.profile,
    timeBudgetS: config.analysis.timeBudgetS,
    memoryBytes: config.analysis.memoryMb * 1024 * 1024,
    signal: Context.current().cancellationSignal,
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
}

export async function buildAnalysisDatabase(deps: AnalysisDeps, req: DatabaseRequest): Promise<DatabaseRef> {
  const { store } = deps;
  ownWorkflow(req.workflowId);
  await vouchForDatabase(store, req);
  const existing = await store.analyses.get(req.team, req.key);
  if (existing?.status === 'succeeded' && existing.result) return refOf(existing);
  const run = ownRun(req.workflowId);
  await store.analyses.started(req.workflowId, run);
  try {
    const ref = await beating((beat) => buildAndKeep(deps, req, beat));
    await store.analyses.finish(
      req.workflowId,
      {
        status: 'succeeded',
        evidenceId: null,
        result: ref as unknown as Record<string, unknown>,
        error: null,
      },
      run,
    );
    return ref;
  } catch (err) {
    const error = toToolError(err);
    const evidenceId = await retainFailure(deps, req, error);
    const recorded = { ...error, details: { ...error.details, evidence_id: evidenceId } };
    await store.analyses.finish(
      req.workflowId,
      {
        status: 'failed',
        evidenceId,
        result: null,
        error: { ...recorded },
      },
      run,
    );
    throw toolFailure(recorded);
  }
}

/** A provider that failed leaves its stderr as Evidence, so the team can see why. */
async function retainFailure(
  deps: AnalysisDeps,
  req: DatabaseRequest,
  error: ToolError,
): Promise<string | null> {
  const stderr = String(error.details.stderr_tail ?? '');
  if (!stderr) return null;
  const evidence = await deps.store.evidence.put(
    evidenceOf({
      tool: DATABASE_TOOL,
      provider: { name: 'angr', version: 'unknown' },
      parameters: { artifact: req.artifact, profile: req.profile },
      parametersDigest: req.key,
      target: { digest: req.artifact },
      principal: req.requestedBy,
      team: req.team,
      investigation: null,
      workflowId: req.workflowId,
      summary: { code: error.code, message: error.message },
      truncated: false,
      limitations: ['the provider failed; stderr holds its last 64 KiB'],
      document: { error },
      collections: { stderr: stderr.split('\n').map((text, i) => ({ line: i + 1, text })) },
      filterable: { stderr: ['line'] },
    }),
  );
  return evidence.evidence_id;
}
