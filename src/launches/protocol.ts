// The activity surface as types, so workflow code can proxy it without importing I/O.
import type { EffectJournal, LaunchOutcome } from '../domain/types.ts';

/** The failure type of an activity's request that nothing vouches for (activities/provenance.ts); never retried. */
export const UNVOUCHED = 'DossierUnvouchedRequest';

/** The failure of an effect activity whose worker stopped before the effect began (safe to dispatch again). */
export const WORKER_SHUTDOWN = 'DossierWorkerShutdown';

export interface LaunchRequest {
  workflowId: string;
  tool: string;
  capability: string;
  input: Record<string, unknown>;
  principal: string;
  team: string;
  key: string;
  bodyDigest: string;
  investigation: string | null;
  maxRunMs: number;
  /**
   * `local`: the workflow task that schedules the effect runs it (a local activity), where its
   * worker serves the capability; elsewhere, and on any later dispatch, it is an activity on the
   * capability's queue. Absent: always the activity.
   */
  dispatch?: 'activity' | 'local';
}

/** A worker that does not serve the launch's capability refuses a local dispatch with this type. */
export const NOT_SERVED_HERE = 'DossierNotServedHere';

export interface JournalView {
  effect: EffectJournal;
  finished: LaunchOutcome | null;
}

export interface EffectActivities {
  runEffect(req: LaunchRequest): Promise<LaunchOutcome>;
}

export interface BookkeepingActivities {
  readJournal(workflowId: string): Promise<JournalView>;
  finishLaunch(workflowId: string, outcome: LaunchOutcome): Promise<LaunchOutcome>;
}

/** Build (or find) the analysis database of an artifact for a team. */
export interface DatabaseRequest {
  workflowId: string;
  team: string;
  key: string;
  artifact: string;
  profile: string;
  requestedBy: string;
  /** Upper bound of one build, from the configured time budget. */
  maxRunMs: number;
}

/** A built database, as the query activities need it. */
export interface DatabaseRef {
  file: string;
  digest: string;
  provider: { name: string; version: string };
  profile: string;
  truncated: boolean;
  limitations: string[];
  parameters: Record<string, unknown>;
}

/** Answer one analysis tool call from the database. */
export interface AnalysisRequest {
  workflowId: string;
  team: string;
  key: string;
  tool: string;
  input: Record<string, unknown>;
  requestedBy: string;
  /** The artifact database it reads; null for an analysis that reads none (a rule scan). */
  database: DatabaseRequest | null;
  /** A diff's second database: the base build's (diff_binaries). */
  baseDatabase?: DatabaseRequest;
  maxRunMs: number;
}

export interface AnalysisOutcome {
  status: 'succeeded' | 'failed';
  evidenceId: string | null;
  summary: Record<string, unknown> | null;
  error: Record<string, unknown> | null;
}

export interface AnalysisActivities {
  buildAnalysisDatabase(req: DatabaseRequest): Promise<DatabaseRef>;
  runAnalysis(
    req: AnalysisRequest,
    database: DatabaseRef | null,
    base?: DatabaseRef,
  ): Promise<AnalysisOutcome>;
}

export interface AnalysisBookkeeping {
  /** Starts the database's build workflow or attaches to it, and waits for it. */
  awaitAnalysisDatabase(req: DatabaseRequest): Promise<DatabaseRef>;
  finishAnalysis(workflowId: string, outcome: AnalysisOutcome): Promise<AnalysisOutcome>;
}
