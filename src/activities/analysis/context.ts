// What the analysis activities share: the worker's store, configuration,
// sandbox and Temporal client, the provider, the heartbeat of a long wait, and
// how a failure reaches the workflow.
import { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { provisionProvider, type AnalysisProvider } from '../../analysis/venv.ts';
import type { Config } from '../../config.ts';
import { artifactNotFound, type ToolError } from '../../domain/errors.ts';
import { verifyArtifact } from '../../evidence/artifacts.ts';
import type { DatabaseRef } from '../../launches/protocol.ts';
import type { Sandbox } from '../../sandbox/sandbox.ts';
import type { AnalysisRecord } from '../../store/analyses.ts';
import type { Store } from '../../store/store.ts';

export interface AnalysisDeps {
  store: Store;
  config: Config;
  sandbox: Sandbox;
  client: Client;
}

const HEARTBEAT_MS = 10_000;
/** What a database build is called where a tool's name goes: its records, its Evidence, its audit. */
export const DATABASE_TOOL = 'analysis_database';

export function toolFailure(error: ToolError): ApplicationFailure {
  return ApplicationFailure.nonRetryable(error.message, 'ToolError', error);
}

export function refOf(record: AnalysisRecord): DatabaseRef {
  return record.result as unknown as DatabaseRef;
}

/** One install per process at a time (provisionEnv shares it), then the cached provider. */
export function providerOf(config: Config): Promise<AnalysisProvider> {
  return provisionProvider(config.analysis.python, { log: (line) => console.error(line) });
}

/** Keeps an activity alive while `work` runs, with the latest progress as details. */
export async function beating<T>(
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

/** The team's artifact, verified against its digest. */
export async function artifactFile(deps: AnalysisDeps, team: string, digest: string): Promise<string> {
  if (!(await deps.store.artifacts.get(team, digest))) {
    throw artifactNotFound(digest);
  }
  return verifyArtifact(deps.config.home, digest, undefined, deps.store.blobs);
}
