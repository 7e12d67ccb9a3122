// The embedded backend: one SQLite file in WAL mode, shared by the gateway and
// the workers of one machine. better-sqlite3 is synchronous; the async
// interface keeps it interchangeable with PostgreSQL.
import Database from 'better-sqlite3';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { buildEvidence } from './evidence.ts';
import { MIGRATIONS } from './migrations.ts';
import { decodeCursor, encodeCursor, hashToken, newToken } from './tokens.ts';
import type { EvidenceStore, LaunchFilter, NewLaunch } from './store.ts';
import type {
  EvidenceRecord,
  LaunchOutcome,
  LaunchRecord,
  NewEvidence,
  Page,
  Principal,
  Role,
  StoredLaunchStatus,
} from './types.ts';

type Row = Record<string, unknown>;

const now = () => new Date().toISOString();
const json = (v: unknown) => (v === null || v === undefined ? null : JSON.stringify(v));
const parse = <T>(v: unknown): T | null => (typeof v === 'string' ? (JSON.parse(v) as T) : null);

export function toLaunchRecord(r: Row): LaunchRecord {
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

export class SqliteStore implements EvidenceStore {
  private readonly db: Database.Database;

  constructor(file: string) {
    mkdirSync(path.dirname(file), { recursive: true });
    this.db = new Database(file);
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('busy_timeout = 10000');
    this.db.pragma('synchronous = NORMAL');
    this.migrate();
  }

  private migrate() {
    this.db.exec(
      'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT, applied_at TEXT)',
    );
    const applied = new Set(
      (this.db.prepare('SELECT version FROM schema_migrations').all() as Row[]).map(
        (r) => r.version as number,
      ),
    );
    for (const m of MIGRATIONS) {
      if (applied.has(m.version)) continue;
      this.db
        .transaction(() => {
          this.db.exec(m.sql);
          this.db
            .prepare('INSERT OR IGNORE INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)')
            .run(m.version, m.name, now());
        })
        .immediate();
    }
  }

  async createToken(p: Principal, label?: string): Promise<string> {
    const token = newToken();
    this.db
      .prepare(
        'INSERT INTO tokens (token_hash, principal, team, role, label, created_at) VALUES (?, ?, ?, ?, ?, ?)',
      )
      .run(hashToken(token), p.principal, p.team, p.role, label ?? null, now());
    return token;
  }

  async resolveToken(token: string): Promise<Principal | undefined> {
    const r = this.db
      .prepare('SELECT principal, team, role FROM tokens WHERE token_hash = ? AND revoked_at IS NULL')
      .get(hashToken(token)) as Row | undefined;
    return r ? { principal: r.principal as string, team: r.team as string, role: r.role as Role } : undefined;
  }

  async claimLaunch(l: NewLaunch) {
    const info = this.db
      .prepare(
        `INSERT INTO launches (team, principal, idempotency_key, tool, body_digest, input, workflow_id, status, effect, investigation, created_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', 'not_started', ?, ?) ON CONFLICT DO NOTHING`,
      )
      .run(
        l.team,
        l.principal,
        l.key,
        l.tool,
        l.bodyDigest,
        JSON.stringify(l.input),
        l.workflowId,
        l.investigation,
        now(),
      );
    const record = await this.getLaunch(l.team, l.principal, l.key);
    if (!record) throw new Error(`launch ${l.workflowId} vanished after claim`);
    return { created: info.changes === 1, record };
  }

  async getLaunch(team: string, principal: string, key: string) {
    const r = this.db
      .prepare('SELECT * FROM launches WHERE team = ? AND principal = ? AND idempotency_key = ?')
      .get(team, principal, key) as Row | undefined;
    return r ? toLaunchRecord(r) : undefined;
  }

  async getLaunchByWorkflowId(workflowId: string) {
    const r = this.db.prepare('SELECT * FROM launches WHERE workflow_id = ?').get(workflowId) as
      Row | undefined;
    return r ? toLaunchRecord(r) : undefined;
  }

  async markLaunchRunning(workflowId: string, runId: string) {
    this.db
      .prepare(
        `UPDATE launches SET run_id = ?, status = CASE WHEN status = 'pending' THEN 'running' ELSE status END
         WHERE workflow_id = ? AND (run_id IS NULL OR status = 'pending')`,
      )
      .run(runId, workflowId);
  }

  async journalEffectStarted(workflowId: string, progress?: Record<string, unknown>) {
    const info = this.db
      .prepare(
        `UPDATE launches SET effect = 'started', status = 'running', started_at = ?, progress = ?
         WHERE workflow_id = ? AND effect = 'not_started' AND status IN ('pending', 'running')`,
      )
      .run(now(), json(progress ?? null), workflowId);
    return info.changes === 1;
  }

  async recordProgress(workflowId: string, progress: Record<string, unknown>) {
    this.db
      .prepare(`UPDATE launches SET progress = ? WHERE workflow_id = ? AND status = 'running'`)
      .run(JSON.stringify(progress), workflowId);
  }

  async finishLaunch(workflowId: string, o: LaunchOutcome) {
    this.db
      .prepare(
        `UPDATE launches SET status = ?, evidence_id = ?, summary = ?, error = ?, finished_at = ?
         WHERE workflow_id = ? AND status IN ('pending', 'running')`,
      )
      .run(o.status, o.evidenceId, json(o.summary), json(o.error), now(), workflowId);
    return this.getLaunchByWorkflowId(workflowId);
  }

  async listLaunches(team: string, f: LaunchFilter): Promise<Page<LaunchRecord>> {
    const where = ['team = ?'];
    const args: unknown[] = [team];
    if (f.status) {
      where.push('status = ?');
      args.push(f.status);
    }
    if (f.tool) {
      where.push('tool = ?');
      args.push(f.tool);
    }
    const cursor = decodeCursor(f.cursor);
    if (cursor) {
      where.push('(created_at, workflow_id) < (?, ?)');
      args.push(cursor[0], cursor[1]);
    }
    const rows = this.db
      .prepare(
        `SELECT * FROM launches WHERE ${where.join(' AND ')} ORDER BY created_at DESC, workflow_id DESC LIMIT ?`,
      )
      .all(...args, f.limit + 1) as Row[];
    const items = rows.slice(0, f.limit).map(toLaunchRecord);
    const last = items[items.length - 1];
    return {
      items,
      nextCursor: rows.length > f.limit && last ? encodeCursor([last.createdAt, last.workflowId]) : null,
    };
  }

  async putEvidence(e: NewEvidence): Promise<EvidenceRecord> {
    const built = buildEvidence(e);
    const r = built.record;
    const insertRow = this.db.prepare(
      'INSERT OR IGNORE INTO evidence_rows (evidence_id, collection, source_index, row) VALUES (?, ?, ?, ?)',
    );
    this.db.transaction(() => {
      const info = this.db
        .prepare(
          `INSERT OR IGNORE INTO evidence (evidence_id, team, principal, tool, investigation, workflow_id, created_at, record, document)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        )
        .run(
          r.evidence_id,
          r.team,
          r.principal,
          r.tool,
          r.investigation,
          r.launch?.workflow_id ?? null,
          r.created_at,
          JSON.stringify(r),
          built.documentJson,
        );
      if (info.changes === 0) return;
      for (const row of built.rows) insertRow.run(r.evidence_id, row.collection, row.sourceIndex, row.json);
    })();
    return r;
  }

  async getEvidence(team: string, evidenceId: string) {
    const row = this.db
      .prepare('SELECT record FROM evidence WHERE team = ? AND evidence_id = ?')
      .get(team, evidenceId) as Row | undefined;
    return row ? (JSON.parse(row.record as string) as EvidenceRecord) : undefined;
  }

  async getEvidenceDocument(team: string, evidenceId: string) {
    const row = this.db
      .prepare('SELECT document FROM evidence WHERE team = ? AND evidence_id = ?')
      .get(team, evidenceId) as Row | undefined;
    return row ? (JSON.parse(row.document as string) as Record<string, unknown>) : undefined;
  }

  async close() {
    this.db.close();
  }
}
