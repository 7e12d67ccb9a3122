// MCP tasks: one per launch, created when a client asks for task-augmented
// execution, owned by the principal who asked. The id is random and resolves
// through the store, so any gateway replica, after any restart, finds it.
import { randomBytes } from 'node:crypto';
import type { Page } from '../domain/types.ts';
import { now, pageBy, type Row } from './rows.ts';
import type { SqlExecutor } from './sql.ts';

export interface TaskRecord {
  task_id: string;
  team: string;
  principal: string;
  workflow_id: string;
  tool: string;
  idempotency_key: string;
  /** How long after its creation the task stays readable (null: as long as the launch). */
  ttl_ms: number | null;
  poll_interval_ms: number;
  created_at: string;
}

function toTask(r: Row): TaskRecord {
  return {
    task_id: r.task_id as string,
    team: r.team as string,
    principal: r.principal as string,
    workflow_id: r.workflow_id as string,
    tool: r.tool as string,
    idempotency_key: r.idempotency_key as string,
    ttl_ms: r.ttl_ms === null || r.ttl_ms === undefined ? null : Number(r.ttl_ms),
    poll_interval_ms: Number(r.poll_interval_ms),
    created_at: r.created_at as string,
  };
}

export class TaskStore {
  constructor(private readonly db: SqlExecutor) {}

  /**
   * The task of a launch: made on first request, the same one on every later
   * request for that launch while its ttl lasts; once it has expired, a new
   * request makes a new task (a new id) for the same launch.
   */
  async forLaunch(t: Omit<TaskRecord, 'task_id' | 'created_at'>, at = Date.now()): Promise<TaskRecord> {
    const existing = await this.db.get<Row>('SELECT * FROM tasks WHERE workflow_id = ?', [t.workflow_id]);
    if (existing && expired(toTask(existing), at)) {
      await this.db.run('DELETE FROM tasks WHERE task_id = ?', [existing.task_id]);
    }
    await this.db.run(
      `INSERT INTO tasks (task_id, team, principal, workflow_id, tool, idempotency_key, ttl_ms, poll_interval_ms, created_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
      [
        `tsk_${randomBytes(24).toString('hex')}`,
        t.team,
        t.principal,
        t.workflow_id,
        t.tool,
        t.idempotency_key,
        t.ttl_ms,
        t.poll_interval_ms,
        now(),
      ],
    );
    const row = await this.db.get<Row>('SELECT * FROM tasks WHERE workflow_id = ?', [t.workflow_id]);
    return toTask(row!);
  }

  /** A task of this principal, unless it does not exist or its ttl has passed. */
  async get(
    team: string,
    principal: string,
    taskId: string,
    at = Date.now(),
  ): Promise<TaskRecord | undefined> {
    const row = await this.db.get<Row>(
      'SELECT * FROM tasks WHERE task_id = ? AND team = ? AND principal = ?',
      [taskId, team, principal],
    );
    const task = row ? toTask(row) : undefined;
    return task && !expired(task, at) ? task : undefined;
  }

  /** Forgets tasks whose ttl has passed (their launches stay); how many. */
  async sweep(at = Date.now()): Promise<number> {
    const rows = await this.db.all<Row>(
      'SELECT * FROM tasks WHERE ttl_ms IS NOT NULL ORDER BY created_at LIMIT ?',
      [SWEEP_BATCH],
    );
    let n = 0;
    for (const r of rows) {
      const task = toTask(r);
      if (!expired(task, at)) continue;
      n += (await this.db.run('DELETE FROM tasks WHERE task_id = ?', [task.task_id])).changes;
    }
    return n;
  }

  /** A principal's tasks, newest first (expired ones included: the caller leaves them out). */
  async list(
    team: string,
    principal: string,
    f: { cursor?: string; limit: number },
  ): Promise<Page<TaskRecord>> {
    return pageBy(
      this.db,
      'tasks',
      ['team = ?', 'principal = ?'],
      [team, principal],
      f,
      'task_id',
      toTask,
      (t) => [t.created_at, t.task_id],
    );
  }
}

/** How many tasks one sweep looks at (the next sweep takes the rest). */
const SWEEP_BATCH = 5_000;

export function expired(t: TaskRecord, at: number): boolean {
  return t.ttl_ms !== null && Date.parse(t.created_at) + t.ttl_ms < at;
}
