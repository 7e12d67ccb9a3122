// Analyses: the artifact databases a team's analysis tools are answered from
// (built once per artifact, profile and provider) and the queries answered
// from them (once per input). Keyed per team by what was asked, never by who.
import { json, now, parse, type Row } from './rows.ts';
import type { SqlExecutor } from './sql.ts';
import { Finishes } from './finishes.ts';

export type AnalysisKind = 'database' | 'query';
export type AnalysisStatus = 'pending' | 'running' | 'succeeded' | 'failed';

export interface AnalysisRecord {
  team: string;
  key: string;
  kind: AnalysisKind;
  tool: string;
  input: Record<string, unknown>;
  databaseKey: string | null;
  workflowId: string;
  runId: string | null;
  status: AnalysisStatus;
  evidenceId: string | null;
  result: Record<string, unknown> | null;
  error: Record<string, unknown> | null;
  progress: Record<string, unknown> | null;
  /** How many times the work itself ran (a database build, a query): coalescing keeps it at one. */
  runs: number;
  requestedBy: string;
  createdAt: string;
  startedAt: string | null;
  finishedAt: string | null;
}

export type NewAnalysis = Pick<
  AnalysisRecord,
  'team' | 'key' | 'kind' | 'tool' | 'input' | 'databaseKey' | 'workflowId' | 'requestedBy'
>;

function toRecord(r: Row): AnalysisRecord {
  return {
    team: r.team as string,
    key: r.analysis_key as string,
    kind: r.kind as AnalysisKind,
    tool: r.tool as string,
    input: JSON.parse(r.input as string) as Record<string, unknown>,
    databaseKey: (r.database_key as string | null) ?? null,
    workflowId: r.workflow_id as string,
    runId: (r.run_id as string | null) ?? null,
    status: r.status as AnalysisStatus,
    evidenceId: (r.evidence_id as string | null) ?? null,
    result: parse(r.result),
    error: parse(r.error),
    progress: parse(r.progress),
    runs: Number(r.runs),
    requestedBy: r.requested_by as string,
    createdAt: r.created_at as string,
    startedAt: (r.started_at as string | null) ?? null,
    finishedAt: (r.finished_at as string | null) ?? null,
  };
}

export class AnalysisStore {
  constructor(
    private readonly db: SqlExecutor,
    private readonly finishes: Finishes,
  ) {}

  /** Resolves when this process records the end of `workflowId` (see Finishes). */
  watchEnd(workflowId: string) {
    return this.finishes.watch(workflowId);
  }

  /** Inserts the analysis unless the team asked it already; returns the record that holds the key. */
  async claim(a: NewAnalysis): Promise<{ created: boolean; record: AnalysisRecord }> {
    const info = await this.db.run(
      `INSERT INTO analyses (team, analysis_key, kind, tool, input, database_key, workflow_id, status, requested_by, created_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?) ON CONFLICT DO NOTHING`,
      [
        a.team,
        a.key,
        a.kind,
        a.tool,
        JSON.stringify(a.input),
        a.databaseKey,
        a.workflowId,
        a.requestedBy,
        now(),
      ],
    );
    const record = await this.get(a.team, a.key);
    if (!record) throw new Error(`analysis ${a.workflowId} vanished after claim`);
    return { created: info.changes === 1, record };
  }

  async get(team: string, key: string): Promise<AnalysisRecord | undefined> {
    const r = await this.db.get<Row>('SELECT * FROM analyses WHERE team = ? AND analysis_key = ?', [
      team,
      key,
    ]);
    return r ? toRecord(r) : undefined;
  }

  async byWorkflowId(workflowId: string): Promise<AnalysisRecord | undefined> {
    const r = await this.db.get<Row>('SELECT * FROM analyses WHERE workflow_id = ?', [workflowId]);
    return r ? toRecord(r) : undefined;
  }

  /** A failed analysis may be asked again: it becomes pending, once, whoever asks. */
  async retryFailed(team: string, key: string, requestedBy: string): Promise<boolean> {
    const info = await this.db.run(
      `UPDATE analyses SET status = 'pending', error = NULL, evidence_id = NULL, result = NULL, progress = NULL,
         run_id = NULL, requested_by = ?, started_at = NULL, finished_at = NULL
       WHERE team = ? AND analysis_key = ? AND status = 'failed'`,
      [requestedBy, team, key],
    );
    return info.changes === 1;
  }

  async markRunning(workflowId: string, runId: string): Promise<void> {
    await this.db.run(
      `UPDATE analyses SET run_id = ?, status = CASE WHEN status = 'pending' THEN 'running' ELSE status END
       WHERE workflow_id = ? AND status IN ('pending', 'running')`,
      [runId, workflowId],
    );
  }

  /** Counts one run of the work itself, as it starts (`runId`, its run, kept if none is recorded yet). */
  async started(workflowId: string, runId: string | null = null): Promise<void> {
    await this.db.run(
      `UPDATE analyses SET runs = runs + 1, status = 'running', started_at = COALESCE(started_at, ?), run_id = COALESCE(run_id, ?)
       WHERE workflow_id = ? AND status IN ('pending', 'running')`,
      [now(), runId, workflowId],
    );
  }

  async recordProgress(workflowId: string, progress: Record<string, unknown>): Promise<void> {
    await this.db.run(
      `UPDATE analyses SET progress = ? WHERE workflow_id = ? AND status IN ('pending', 'running')`,
      [JSON.stringify(progress), workflowId],
    );
  }

  /** Records how it ended, once per run (`runId`, the run that ended it, kept if none is recorded yet). */
  async finish(
    workflowId: string,
    outcome: {
      status: 'succeeded' | 'failed';
      evidenceId: string | null;
      result: Record<string, unknown> | null;
      error: Record<string, unknown> | null;
    },
    runId: string | null = null,
  ): Promise<AnalysisRecord | undefined> {
    const info = await this.db.run(
      `UPDATE analyses SET status = ?, evidence_id = ?, result = ?, error = ?, finished_at = ?, run_id = COALESCE(run_id, ?)
       WHERE workflow_id = ? AND status IN ('pending', 'running')`,
      [
        outcome.status,
        outcome.evidenceId,
        json(outcome.result),
        json(outcome.error),
        now(),
        runId,
        workflowId,
      ],
    );
    if (info.changes === 1) this.finishes.announce(workflowId);
    return this.byWorkflowId(workflowId);
  }

  /** The team's newest succeeded database of an artifact, any profile (for completion). */
  async newestDatabase(team: string, artifact: string): Promise<AnalysisRecord | undefined> {
    const r = await this.db.get<Row>(
      `SELECT * FROM analyses WHERE team = ? AND kind = 'database' AND status = 'succeeded' AND analysis_key LIKE ?
       ORDER BY finished_at DESC LIMIT 1`,
      [team, `db:${artifact}:%`],
    );
    return r ? toRecord(r) : undefined;
  }
}
