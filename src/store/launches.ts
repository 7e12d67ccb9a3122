// Launch records: the arbiter of idempotency keys and the effect journal that
// makes "at most once" provable.
import type { LaunchOutcome, LaunchRecord, LaunchStatus, Page, StoredLaunchStatus } from '../domain/types.ts';
import { json, now, pageBy, parse, teamFilter, type Row } from './rows.ts';
import { addCandidates, type Candidate } from './candidates.ts';
import type { SqlExecutor } from './sql.ts';
import { Finishes } from './finishes.ts';

/** What a caller claims a key with: the record before Temporal knows of it. */
export type NewLaunch = Pick<
  LaunchRecord,
  'team' | 'principal' | 'key' | 'tool' | 'bodyDigest' | 'input' | 'workflowId' | 'investigation'
>;

export interface LaunchFilter {
  status?: LaunchStatus;
  tool?: string;
  cursor?: string;
  limit: number;
}

function toLaunchRecord(r: Row): LaunchRecord {
  return {
    team: r.team as string,
    principal: r.principal as string,
    key: r.idempotency_key as string,
    tool: r.tool as string,
    bodyDigest: r.body_digest as string,
    input: JSON.parse(r.input as string),
    workflowId: r.workflow_id as string,
    runId: (r.run_id as string | null) ?? null,
    status: r.status as StoredLaunchStatus,
    effect: r.effect as LaunchRecord['effect'],
    evidenceId: (r.evidence_id as string | null) ?? null,
    summary: parse(r.summary),
    error: parse(r.error),
    progress: parse(r.progress),
    investigation: (r.investigation as string | null) ?? null,
    createdAt: r.created_at as string,
    startedAt: (r.started_at as string | null) ?? null,
    finishedAt: (r.finished_at as string | null) ?? null,
  };
}

export class LaunchStore {
  constructor(
    private readonly db: SqlExecutor,
    private readonly finishes: Finishes,
  ) {}

  /** Resolves when this process records the end of `workflowId` (see Finishes). */
  watchEnd(workflowId: string) {
    return this.finishes.watch(workflowId);
  }

  /** Tells the calls of this process waiting on a finished launch (see finish). */
  announceEnd(workflowId: string): void {
    this.finishes.announce(workflowId);
  }

  /** Inserts the launch unless the principal already used the key; returns the record that holds the key. */
  async claim(l: NewLaunch): Promise<{ created: boolean; record: LaunchRecord }> {
    const info = await this.db.run(
      `INSERT INTO launches (team, principal, idempotency_key, tool, body_digest, input, workflow_id, status, effect, investigation, created_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', 'not_started', ?, ?) ON CONFLICT DO NOTHING`,
      [
        l.team,
        l.principal,
        l.key,
        l.tool,
        l.bodyDigest,
        JSON.stringify(l.input),
        l.workflowId,
        l.investigation,
        now(),
      ],
    );
    if (info.changes === 1) {
      await addCandidates(this.db, l.team, [
        ['launch_key', l.principal, l.key],
        ...(l.investigation ? [['investigation', '', l.investigation] as Candidate] : []),
      ]);
    }
    const record = await this.get(l.team, l.principal, l.key);
    if (!record) throw new Error(`launch ${l.workflowId} vanished after claim`);
    return { created: info.changes === 1, record };
  }

  async get(team: string, principal: string, key: string): Promise<LaunchRecord | undefined> {
    const r = await this.db.get<Row>(
      'SELECT * FROM launches WHERE team = ? AND principal = ? AND idempotency_key = ?',
      [team, principal, key],
    );
    return r ? toLaunchRecord(r) : undefined;
  }

  async byWorkflowId(workflowId: string): Promise<LaunchRecord | undefined> {
    const r = await this.db.get<Row>('SELECT * FROM launches WHERE workflow_id = ?', [workflowId]);
    return r ? toLaunchRecord(r) : undefined;
  }

  async markRunning(workflowId: string, runId: string): Promise<void> {
    await this.db.run(
      `UPDATE launches SET run_id = ?, status = CASE WHEN status = 'pending' THEN 'running' ELSE status END
       WHERE workflow_id = ? AND (run_id IS NULL OR status = 'pending')`,
      [runId, workflowId],
    );
  }

  /**
   * Journals that the effect is about to begin. Returns false when the journal
   * already says `started`: an earlier attempt may have had the effect, so this
   * one must not run it again.
   */
  /** Launches claimed before `before` whose workflow was never started, oldest first. */
  async unstarted(before: string, limit: number): Promise<LaunchRecord[]> {
    const rows = await this.db.all<Row>(
      `SELECT * FROM launches WHERE status = 'pending' AND run_id IS NULL AND created_at < ? ORDER BY created_at LIMIT ?`,
      [before, limit],
    );
    return rows.map(toLaunchRecord);
  }

  /**
   * Launches claimed before `before` and after `from` (its claim time, then its workflow ID: launches
   * claimed in the same millisecond are told apart), started and not finished, oldest first.
   */
  async running(from: { after: string; id: string }, before: string, limit: number): Promise<LaunchRecord[]> {
    const rows = await this.db.all<Row>(
      `SELECT * FROM launches WHERE status = 'running' AND run_id IS NOT NULL AND created_at < ?
         AND (created_at > ? OR (created_at = ? AND workflow_id > ?))
       ORDER BY created_at, workflow_id LIMIT ?`,
      [before, from.after, from.after, from.id, limit],
    );
    return rows.map(toLaunchRecord);
  }

  async journalStarted(
    workflowId: string,
    progress?: Record<string, unknown>,
    runId: string | null = null,
  ): Promise<boolean> {
    const info = await this.db.run(
      `UPDATE launches SET effect = 'started', status = 'running', started_at = ?, progress = ?, run_id = COALESCE(run_id, ?)
       WHERE workflow_id = ? AND effect = 'not_started' AND status IN ('pending', 'running')`,
      [now(), json(progress ?? null), runId, workflowId],
    );
    return info.changes === 1;
  }

  /** Notes that a principal asked to cancel a launch that has not finished. */
  async requestCancel(workflowId: string): Promise<void> {
    await this.db.run(
      `UPDATE launches SET cancel_requested_at = ?
       WHERE workflow_id = ? AND status IN ('pending', 'running') AND cancel_requested_at IS NULL`,
      [now(), workflowId],
    );
  }

  /** Whether a cancel was asked of the launch (its local effect, which has no heartbeat, looks here). */
  async cancelRequested(workflowId: string): Promise<boolean> {
    const r = await this.db.get<Row>('SELECT cancel_requested_at FROM launches WHERE workflow_id = ?', [
      workflowId,
    ]);
    return Boolean(r?.cancel_requested_at);
  }

  async recordProgress(workflowId: string, progress: Record<string, unknown>): Promise<void> {
    await this.db.run(`UPDATE launches SET progress = ? WHERE workflow_id = ? AND status = 'running'`, [
      JSON.stringify(progress),
      workflowId,
    ]);
  }

  /**
   * Records the outcome once; a later call for a finished launch changes nothing. The calls of this
   * process waiting on the launch are told at once, or, with `announce: false`, when the caller
   * calls announceEnd (once what follows the end is written too). `runId`, the run that ended it,
   * is kept where the starter has not recorded its run yet: the run can end first.
   */
  async finish(
    workflowId: string,
    o: LaunchOutcome,
    opts: { announce?: boolean; runId?: string | null } = {},
  ): Promise<LaunchRecord | undefined> {
    const info = await this.db.run(
      `UPDATE launches SET status = ?, evidence_id = ?, summary = ?, error = ?, finished_at = ?, run_id = COALESCE(run_id, ?)
       WHERE workflow_id = ? AND status IN ('pending', 'running')`,
      [o.status, o.evidenceId, json(o.summary), json(o.error), now(), opts.runId ?? null, workflowId],
    );
    if (info.changes === 1 && opts.announce !== false) this.finishes.announce(workflowId);
    return this.byWorkflowId(workflowId);
  }

  /**
   * Records the outcome of a launch whose workflow never started, only if it is
   * still that (pending, no run, effect not begun); false when anything moved.
   */
  async finishUnstarted(workflowId: string, o: LaunchOutcome): Promise<boolean> {
    const info = await this.db.run(
      `UPDATE launches SET status = ?, evidence_id = ?, summary = ?, error = ?, finished_at = ?
       WHERE workflow_id = ? AND status = 'pending' AND run_id IS NULL AND effect = 'not_started'`,
      [o.status, o.evidenceId, json(o.summary), json(o.error), now(), workflowId],
    );
    if (info.changes === 1) this.finishes.announce(workflowId);
    return info.changes === 1;
  }

  async list(team: string, f: LaunchFilter): Promise<Page<LaunchRecord>> {
    // A launch claimed but not yet started (pending) is reported as running.
    const running = f.status === 'running';
    const { where, args } = teamFilter(team, [
      ['status', running ? undefined : f.status],
      ['tool', f.tool],
    ]);
    if (running) where.push("status IN ('pending', 'running')");
    return pageBy(this.db, 'launches', where, args, f, 'workflow_id', toLaunchRecord, (r) => [
      r.createdAt,
      r.workflowId,
    ]);
  }
}
