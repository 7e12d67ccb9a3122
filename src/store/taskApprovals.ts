// Tasks that wait for a human before their launch exists: in the stateless era
// a client that declared the tasks extension gets a task at once for a capture
// that needs approval; the task asks (status input_required) and tasks/update
// carries the answer, on any replica. Nothing is claimed until the answer is
// "approved"; then the task follows the launch its key claimed.
import { randomBytes } from 'node:crypto';
import type { ToolError } from '../domain/errors.ts';
import { now, type Row } from './rows.ts';
import type { SqlExecutor } from './sql.ts';

/** approved: the launch was claimed; refused: the human said no, or the claim was refused (`reply`). */
export type ApprovalAnswer = 'approved' | 'refused' | 'cancelled';

export interface TaskApproval {
  task_id: string;
  team: string;
  principal: string;
  tool: string;
  idempotency_key: string;
  body_digest: string;
  /** The call's arguments, to claim the key with once approved. */
  arguments: Record<string, unknown>;
  /** What the human is shown (gateway/approval.ts ApprovalPlan). */
  plan: Record<string, unknown>;
  answer: ApprovalAnswer | null;
  /** Why a refused call ran nothing: the tool error its call answered. */
  reply: ToolError | null;
  ttl_ms: number | null;
  poll_interval_ms: number;
  created_at: string;
  answered_at: string | null;
}

function toApproval(r: Row): TaskApproval {
  return {
    task_id: r.task_id as string,
    team: r.team as string,
    principal: r.principal as string,
    tool: r.tool as string,
    idempotency_key: r.idempotency_key as string,
    body_digest: r.body_digest as string,
    arguments: JSON.parse(r.arguments as string) as Record<string, unknown>,
    plan: JSON.parse(r.plan as string) as Record<string, unknown>,
    answer: (r.answer as ApprovalAnswer | null) ?? null,
    reply: r.reply ? (JSON.parse(r.reply as string) as ToolError) : null,
    ttl_ms: r.ttl_ms === null || r.ttl_ms === undefined ? null : Number(r.ttl_ms),
    poll_interval_ms: Number(r.poll_interval_ms),
    created_at: r.created_at as string,
    answered_at: (r.answered_at as string | null) ?? null,
  };
}

export class TaskApprovalStore {
  constructor(private readonly db: SqlExecutor) {}

  /**
   * The approval task of this call (principal, key and body): made on the first request, the same
   * one while it is unanswered; an answered one is replaced by a new question.
   */
  async ask(
    a: Omit<TaskApproval, 'task_id' | 'answer' | 'reply' | 'created_at' | 'answered_at'>,
    maxOpen: number,
  ): Promise<TaskApproval | 'full'> {
    const where = 'team = ? AND principal = ? AND idempotency_key = ? AND body_digest = ?';
    const keys = [a.team, a.principal, a.idempotency_key, a.body_digest];
    await this.db.run(`DELETE FROM task_approvals WHERE ${where} AND answer IS NOT NULL`, keys);
    const asked = await this.db.get<Row>(`SELECT * FROM task_approvals WHERE ${where}`, keys);
    if (asked) return toApproval(asked);
    // A new question counts against the principal's open ones (approximately, under a race).
    if ((await this.open(a.team, a.principal)) >= maxOpen) return 'full';
    await this.db.run(
      `INSERT INTO task_approvals (task_id, team, principal, tool, idempotency_key, body_digest, arguments, plan, ttl_ms, poll_interval_ms, created_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
      [
        `tsk_${randomBytes(24).toString('hex')}`,
        a.team,
        a.principal,
        a.tool,
        a.idempotency_key,
        a.body_digest,
        JSON.stringify(a.arguments),
        JSON.stringify(a.plan),
        a.ttl_ms,
        a.poll_interval_ms,
        now(),
      ],
    );
    return toApproval((await this.db.get<Row>(`SELECT * FROM task_approvals WHERE ${where}`, keys))!);
  }

  /** How many questions of this principal wait for an answer. */
  async open(team: string, principal: string): Promise<number> {
    const row = await this.db.get<Row>(
      'SELECT COUNT(*) AS n FROM task_approvals WHERE team = ? AND principal = ? AND answer IS NULL',
      [team, principal],
    );
    return Number(row?.n ?? 0);
  }

  /** An approval task of this principal, whatever its answer. */
  async get(team: string, principal: string, taskId: string): Promise<TaskApproval | undefined> {
    const row = await this.db.get<Row>(
      'SELECT * FROM task_approvals WHERE task_id = ? AND team = ? AND principal = ?',
      [taskId, team, principal],
    );
    return row ? toApproval(row) : undefined;
  }

  /** Records the answer once: true for the request that recorded it, false when one was there. */
  async answer(taskId: string, answer: ApprovalAnswer): Promise<boolean> {
    const { changes } = await this.db.run(
      'UPDATE task_approvals SET answer = ?, answered_at = ? WHERE task_id = ? AND answer IS NULL',
      [answer, now(), taskId],
    );
    return changes === 1;
  }

  /** Records why an answered call ran nothing (declined, or its claim refused). */
  async refuse(taskId: string, reply: ToolError): Promise<void> {
    await this.db.run(
      "UPDATE task_approvals SET answer = 'refused', reply = ?, answered_at = ? WHERE task_id = ?",
      [JSON.stringify(reply), now(), taskId],
    );
  }

  /** Forgets approval tasks whose ttl has passed; how many. */
  async sweep(at = Date.now()): Promise<number> {
    const rows = await this.db.all<Row>(
      'SELECT task_id, created_at, ttl_ms FROM task_approvals WHERE ttl_ms IS NOT NULL ORDER BY created_at LIMIT 5000',
    );
    let n = 0;
    for (const r of rows) {
      if (Date.parse(r.created_at as string) + Number(r.ttl_ms) >= at) continue;
      n += (await this.db.run('DELETE FROM task_approvals WHERE task_id = ?', [r.task_id])).changes;
    }
    return n;
  }
}
