// The evidence store, written once over the SQL surface both backends share:
// SQLite (embedded default) and PostgreSQL (cluster).
import { DossierError } from '../domain/errors.ts';
import { buildEvidence, keyOf, type BuiltEvidence } from './evidence.ts';
import { MIGRATIONS } from './migrations.ts';
import type { SqlDriver, SqlExecutor } from './sql.ts';
import type {
  EvidenceFilter,
  EvidenceStore,
  LaunchFilter,
  NewLaunch,
  PageQuery,
  PageResult,
  TokenInfo,
  UnknownFilter,
} from './store.ts';
import { decodeCursor, encodeCursor, hashToken, newToken } from './tokens.ts';
import type {
  ArtifactRecord,
  EvidenceRecord,
  LaunchOutcome,
  LaunchRecord,
  NewEvidence,
  NewUnknown,
  Page,
  PageRow,
  Principal,
  Role,
  StoredLaunchStatus,
  UnknownRecord,
  UnknownStatus,
} from './types.ts';

type Row = Record<string, unknown>;

const now = () => new Date().toISOString();
const json = (v: unknown) => (v === null || v === undefined ? null : JSON.stringify(v));
const parse = <T>(v: unknown): T | null => (typeof v === 'string' ? (JSON.parse(v) as T) : null);

/** Parameters per multi-row INSERT: SQLite binds at most 32,766, PostgreSQL 65,535. */
const CHUNK = { sqlite: 2_000, postgres: 30_000 };
/** Candidates a multi-value or multi-field filter may scan before it is refused. */
export const MAX_FILTER_SCAN = 1_000_000;

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

function toUnknown(r: Row): UnknownRecord {
  return {
    unknown_id: r.unknown_id as string,
    question: r.question as string,
    scope: r.scope as string,
    status: r.status as UnknownStatus,
    revision: Number(r.revision),
    investigation: (r.investigation as string | null) ?? null,
    evidence_ids: JSON.parse(r.evidence_ids as string) as string[],
    settled_by: parse<string[]>(r.settled_by),
    note: (r.note as string | null) ?? null,
    created_by: r.created_by as string,
    created_at: r.created_at as string,
    updated_at: r.updated_at as string,
  };
}

async function insertMany(
  tx: SqlExecutor,
  head: string,
  width: number,
  rows: unknown[][],
  chunk: number,
  tail = '',
) {
  const per = Math.max(1, Math.floor(chunk / width));
  for (let i = 0; i < rows.length; i += per) {
    const slice = rows.slice(i, i + per);
    const tuple = `(${new Array(width).fill('?').join(', ')})`;
    await tx.run(`${head} VALUES ${slice.map(() => tuple).join(', ')} ${tail}`, slice.flat());
  }
}

/** `team = ?` plus `column = ?` for every filter that is set. */
function teamFilter(team: string, filters: [column: string, value: unknown][]) {
  const where = ['team = ?'];
  const args: unknown[] = [team];
  for (const [column, value] of filters) {
    if (value === undefined || value === null || value === '') continue;
    where.push(`${column} = ?`);
    args.push(value);
  }
  return { where, args };
}

/** Above this many filter keys in one retention, PostgreSQL gets fresh statistics. */
const ANALYZE_AFTER_KEYS = 50_000;

export class SqlStore implements EvidenceStore {
  private constructor(private readonly db: SqlDriver) {}

  static async open(db: SqlDriver): Promise<SqlStore> {
    await db.migrate(async (tx) => {
      await tx.exec(
        'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)',
      );
      const applied = new Set(
        (await tx.all<Row>('SELECT version FROM schema_migrations')).map((r) => Number(r.version)),
      );
      for (const m of MIGRATIONS) {
        if (applied.has(m.version)) continue;
        await tx.exec(m.sql);
        await tx.run('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)', [
          m.version,
          m.name,
          now(),
        ]);
      }
    });
    return new SqlStore(db);
  }

  get dialect() {
    return this.db.dialect;
  }

  // ── tokens ──────────────────────────────────────────────────────────────

  async createToken(p: Principal, label?: string): Promise<string> {
    const token = newToken();
    await this.db.run(
      'INSERT INTO tokens (token_hash, principal, team, role, label, created_at) VALUES (?, ?, ?, ?, ?, ?)',
      [hashToken(token), p.principal, p.team, p.role, label ?? null, now()],
    );
    return token;
  }

  async resolveToken(token: string): Promise<Principal | undefined> {
    const r = await this.db.get<Row>(
      'SELECT principal, team, role FROM tokens WHERE token_hash = ? AND revoked_at IS NULL',
      [hashToken(token)],
    );
    return r ? { principal: r.principal as string, team: r.team as string, role: r.role as Role } : undefined;
  }

  async listTokens(team?: string): Promise<TokenInfo[]> {
    const rows = await this.db.all<Row>(
      `SELECT * FROM tokens ${team ? 'WHERE team = ?' : ''} ORDER BY created_at, token_hash`,
      team ? [team] : [],
    );
    return rows.map((r) => ({
      id: (r.token_hash as string).slice(0, 12),
      principal: r.principal as string,
      team: r.team as string,
      role: r.role as Role,
      label: (r.label as string | null) ?? null,
      created_at: r.created_at as string,
      revoked_at: (r.revoked_at as string | null) ?? null,
    }));
  }

  async revokeToken(idPrefix: string): Promise<number> {
    if (!/^[0-9a-f]{8,64}$/.test(idPrefix))
      throw new Error('a token id is 8 to 64 hex digits (see `dossier token list`)');
    const info = await this.db.run(
      'UPDATE tokens SET revoked_at = ? WHERE token_hash LIKE ? AND revoked_at IS NULL',
      [now(), `${idPrefix}%`],
    );
    return info.changes;
  }

  // ── launches ────────────────────────────────────────────────────────────

  async claimLaunch(l: NewLaunch) {
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
    const record = await this.getLaunch(l.team, l.principal, l.key);
    if (!record) throw new Error(`launch ${l.workflowId} vanished after claim`);
    return { created: info.changes === 1, record };
  }

  async getLaunch(team: string, principal: string, key: string) {
    const r = await this.db.get<Row>(
      'SELECT * FROM launches WHERE team = ? AND principal = ? AND idempotency_key = ?',
      [team, principal, key],
    );
    return r ? toLaunchRecord(r) : undefined;
  }

  async getLaunchByWorkflowId(workflowId: string) {
    const r = await this.db.get<Row>('SELECT * FROM launches WHERE workflow_id = ?', [workflowId]);
    return r ? toLaunchRecord(r) : undefined;
  }

  async markLaunchRunning(workflowId: string, runId: string) {
    await this.db.run(
      `UPDATE launches SET run_id = ?, status = CASE WHEN status = 'pending' THEN 'running' ELSE status END
       WHERE workflow_id = ? AND (run_id IS NULL OR status = 'pending')`,
      [runId, workflowId],
    );
  }

  async journalEffectStarted(workflowId: string, progress?: Record<string, unknown>) {
    const info = await this.db.run(
      `UPDATE launches SET effect = 'started', status = 'running', started_at = ?, progress = ?
       WHERE workflow_id = ? AND effect = 'not_started' AND status IN ('pending', 'running')`,
      [now(), json(progress ?? null), workflowId],
    );
    return info.changes === 1;
  }

  async recordProgress(workflowId: string, progress: Record<string, unknown>) {
    await this.db.run(`UPDATE launches SET progress = ? WHERE workflow_id = ? AND status = 'running'`, [
      JSON.stringify(progress),
      workflowId,
    ]);
  }

  async finishLaunch(workflowId: string, o: LaunchOutcome) {
    await this.db.run(
      `UPDATE launches SET status = ?, evidence_id = ?, summary = ?, error = ?, finished_at = ?
       WHERE workflow_id = ? AND status IN ('pending', 'running')`,
      [o.status, o.evidenceId, json(o.summary), json(o.error), now(), workflowId],
    );
    return this.getLaunchByWorkflowId(workflowId);
  }

  async listLaunches(team: string, f: LaunchFilter): Promise<Page<LaunchRecord>> {
    // A launch claimed but not yet started (pending) is reported as running.
    const running = f.status === 'running';
    const { where, args } = teamFilter(team, [
      ['status', running ? undefined : f.status],
      ['tool', f.tool],
    ]);
    if (running) where.push("status IN ('pending', 'running')");
    return this.pageBy('launches', where, args, f, 'workflow_id', toLaunchRecord, (r) => [
      r.createdAt,
      r.workflowId,
    ]);
  }

  /** Keyset paging, newest first, over (created_at, tiebreak). */
  private async pageBy<T>(
    table: string,
    where: string[],
    args: unknown[],
    f: { cursor?: string; limit: number },
    tiebreak: string,
    map: (r: Row) => T,
    cursorOf: (item: T) => (string | number)[],
  ): Promise<Page<T>> {
    const cursor = decodeCursor(f.cursor);
    if (cursor) {
      where.push(`(created_at, ${tiebreak}) < (?, ?)`);
      args.push(cursor[0], cursor[1]);
    }
    const rows = await this.db.all<Row>(
      `SELECT * FROM ${table} WHERE ${where.join(' AND ')} ORDER BY created_at DESC, ${tiebreak} DESC LIMIT ?`,
      [...args, f.limit + 1],
    );
    const items = rows.slice(0, f.limit).map(map);
    const last = items[items.length - 1];
    return { items, nextCursor: rows.length > f.limit && last ? encodeCursor(cursorOf(last)) : null };
  }

  // ── evidence ────────────────────────────────────────────────────────────

  async putEvidence(e: NewEvidence, team = e.record.team): Promise<EvidenceRecord> {
    const built = buildEvidence(e);
    await this.db.transaction((tx) => this.retain(tx, built, team));
    return built.record;
  }

  /** Retains several Evidence records in one transaction: all of them, or none. */
  async importEvidence(team: string, items: BuiltEvidence[]): Promise<{ imported: number; present: number }> {
    let imported = 0;
    await this.db.transaction(async (tx) => {
      for (const built of items) if (await this.retain(tx, built, team)) imported++;
    });
    return { imported, present: items.length - imported };
  }

  private async retain(tx: SqlExecutor, built: BuiltEvidence, team: string): Promise<boolean> {
    const r = built.record;
    const chunk = CHUNK[this.db.dialect];
    const inserted = await tx.run(
      `INSERT INTO evidence (team, evidence_id, principal, tool, investigation, workflow_id, created_at, record, document)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
      [
        team,
        r.evidence_id,
        r.principal,
        r.tool,
        r.investigation,
        r.launch?.workflow_id ?? null,
        r.created_at,
        JSON.stringify(r),
        built.documentJson,
      ],
    );
    if (inserted.changes === 0) return false;
    // Rows are content-addressed by evidence_id: another team's copy may already hold them.
    const present = await tx.get('SELECT 1 AS present FROM evidence_rows WHERE evidence_id = ? LIMIT 1', [
      r.evidence_id,
    ]);
    if (built.rows.length > 0 && !present) {
      const id = r.evidence_id;
      await insertMany(
        tx,
        'INSERT INTO evidence_rows (evidence_id, collection, source_index, row)',
        4,
        built.rows.map((x) => [id, x.collection, x.sourceIndex, x.json]),
        chunk,
      );
      await insertMany(
        tx,
        'INSERT INTO evidence_row_keys (evidence_id, collection, field, value, ordinal, source_index)',
        6,
        built.keys.map((k) => [id, k.collection, k.field, k.value, k.ordinal, k.sourceIndex]),
        chunk,
      );
      await insertMany(
        tx,
        'INSERT INTO evidence_key_counts (evidence_id, collection, field, value, rows)',
        5,
        built.counts.map((c) => [id, c.collection, c.field, c.value, c.rows]),
        chunk,
      );
    }
    if (built.unknowns.length > 0) {
      const at = now();
      const evidenceIds = JSON.stringify([r.evidence_id]);
      await insertMany(
        tx,
        'INSERT INTO unknowns (team, unknown_id, question, scope, status, revision, investigation, evidence_ids, created_by, created_at, updated_at)',
        11,
        built.unknowns.map((u) => [
          team,
          u.unknown_id,
          u.question,
          u.scope,
          'open',
          1,
          r.investigation,
          evidenceIds,
          r.principal,
          at,
          at,
        ]),
        chunk,
        'ON CONFLICT DO NOTHING',
      );
    }
    if (this.db.dialect === 'postgres' && built.keys.length > ANALYZE_AFTER_KEYS) {
      // Fresh bulk loads leave the planner without statistics; it would then scan instead of seeking.
      await tx.run('ANALYZE evidence_rows, evidence_row_keys, evidence_key_counts');
    }
    return true;
  }

  async getEvidence(team: string, evidenceId: string) {
    const row = await this.db.get<Row>('SELECT record FROM evidence WHERE team = ? AND evidence_id = ?', [
      team,
      evidenceId,
    ]);
    return row ? (JSON.parse(row.record as string) as EvidenceRecord) : undefined;
  }

  async getEvidenceDocument(team: string, evidenceId: string) {
    const row = await this.db.get<Row>('SELECT document FROM evidence WHERE team = ? AND evidence_id = ?', [
      team,
      evidenceId,
    ]);
    return row ? (JSON.parse(row.document as string) as Record<string, unknown>) : undefined;
  }

  async listEvidence(team: string, f: EvidenceFilter): Promise<Page<EvidenceRecord>> {
    const { where, args } = teamFilter(team, [
      ['tool', f.tool],
      ['investigation', f.investigation],
      ['workflow_id', f.workflowId],
    ]);
    return this.pageBy(
      'evidence',
      where,
      args,
      f,
      'evidence_id',
      (r) => JSON.parse(r.record as string) as EvidenceRecord,
      (e) => [e.created_at, e.evidence_id],
    );
  }

  /**
   * One page of a collection. Unfiltered pages and single-value filters read
   * exactly the rows they return (by source_index, or by the value's ordinal);
   * other filters scan the candidates of their most selective field.
   */
  async page(q: PageQuery): Promise<PageResult> {
    const { evidenceId, collection, offset, limit } = q;
    const fields = Object.entries(q.where ?? {});
    const rowsAt = async (indexes: number[]): Promise<PageRow[]> => {
      if (indexes.length === 0) return [];
      const rows = await this.db.all<Row>(
        `SELECT source_index, row FROM evidence_rows WHERE evidence_id = ? AND collection = ? AND source_index IN (${indexes.map(() => '?').join(', ')}) ORDER BY source_index`,
        [evidenceId, collection, ...indexes],
      );
      return rows.map((r) => ({ source_index: Number(r.source_index), row: JSON.parse(r.row as string) }));
    };

    if (fields.length === 0) {
      const rows = await this.db.all<Row>(
        `SELECT source_index, row FROM evidence_rows WHERE evidence_id = ? AND collection = ? AND source_index >= ? AND source_index < ? ORDER BY source_index`,
        [evidenceId, collection, offset, offset + limit],
      );
      return {
        rows: rows.map((r) => ({ source_index: Number(r.source_index), row: JSON.parse(r.row as string) })),
        matched: q.total,
      };
    }
    if (fields.some(([, values]) => values.length === 0)) return { rows: [], matched: 0 };

    const keyed = fields.map(([field, values]) => ({
      field,
      keys: [...new Set(values.map((v) => keyOf(v)!))],
    }));
    const counts = await Promise.all(
      keyed.map(async ({ field, keys }) => {
        const r = await this.db.get<Row>(
          `SELECT COALESCE(SUM(rows), 0) AS n FROM evidence_key_counts WHERE evidence_id = ? AND collection = ? AND field = ? AND value IN (${keys.map(() => '?').join(', ')})`,
          [evidenceId, collection, field, ...keys],
        );
        return Number(r?.n ?? 0);
      }),
    );

    if (keyed.length === 1 && keyed[0]!.keys.length === 1) {
      const { field, keys } = keyed[0]!;
      const hits = await this.db.all<Row>(
        `SELECT source_index FROM evidence_row_keys WHERE evidence_id = ? AND collection = ? AND field = ? AND value = ? AND ordinal >= ? AND ordinal < ? ORDER BY ordinal`,
        [evidenceId, collection, field, keys[0], offset, offset + limit],
      );
      return { rows: await rowsAt(hits.map((h) => Number(h.source_index))), matched: counts[0]! };
    }

    // General case: candidates of the most selective field, checked against the others.
    const order = counts.map((n, i) => [n, i] as const).sort((a, b) => a[0] - b[0]);
    const [bestCount, best] = order[0]!;
    if (bestCount > MAX_FILTER_SCAN) {
      throw new DossierError(
        'resource_constraint',
        `This filter would scan ${bestCount} candidate rows (at most ${MAX_FILTER_SCAN}).`,
        'Narrow the filter: add a more selective field, or filter on a single value.',
        { candidates: bestCount, limit: MAX_FILTER_SCAN },
      );
    }
    const first = keyed[best]!;
    let candidates = (
      await this.db.all<Row>(
        `SELECT DISTINCT source_index FROM evidence_row_keys WHERE evidence_id = ? AND collection = ? AND field = ? AND value IN (${first.keys.map(() => '?').join(', ')}) ORDER BY source_index`,
        [evidenceId, collection, first.field, ...first.keys],
      )
    ).map((h) => Number(h.source_index));
    for (const [, i] of order.slice(1)) {
      const other = keyed[i]!;
      const allowed = new Set<number>();
      // Check the remaining candidates against this field, a bounded batch at a time.
      for (let at = 0; at < candidates.length; at += 500) {
        const batch = candidates.slice(at, at + 500);
        const hits = await this.db.all<Row>(
          `SELECT DISTINCT k.source_index FROM evidence_row_keys k WHERE k.evidence_id = ? AND k.collection = ? AND k.field = ? AND k.value IN (${other.keys.map(() => '?').join(', ')}) AND k.source_index IN (${batch.map(() => '?').join(', ')})`,
          [evidenceId, collection, other.field, ...other.keys, ...batch],
        );
        for (const h of hits) allowed.add(Number(h.source_index));
      }
      candidates = candidates.filter((c) => allowed.has(c));
    }
    return { rows: await rowsAt(candidates.slice(offset, offset + limit)), matched: candidates.length };
  }

  async allRows(evidenceId: string, collection: string): Promise<unknown[]> {
    const rows = await this.db.all<Row>(
      'SELECT row FROM evidence_rows WHERE evidence_id = ? AND collection = ? ORDER BY source_index',
      [evidenceId, collection],
    );
    return rows.map((r) => JSON.parse(r.row as string));
  }

  async allCollections(evidenceId: string): Promise<Record<string, unknown[]>> {
    const rows = await this.db.all<Row>(
      'SELECT collection, row FROM evidence_rows WHERE evidence_id = ? ORDER BY collection, source_index',
      [evidenceId],
    );
    const out: Record<string, unknown[]> = {};
    for (const r of rows) (out[r.collection as string] ??= []).push(JSON.parse(r.row as string));
    return out;
  }

  // ── residual unknowns ───────────────────────────────────────────────────

  private async recordUnknownIn(
    tx: SqlExecutor,
    team: string,
    principal: string,
    u: NewUnknown & { unknown_id: string },
    investigation: string | null,
    evidenceId: string | null,
  ): Promise<boolean> {
    const at = now();
    const inserted = await tx.run(
      `INSERT INTO unknowns (team, unknown_id, question, scope, status, revision, investigation, evidence_ids, created_by, created_at, updated_at)
       VALUES (?, ?, ?, ?, 'open', 1, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
      [
        team,
        u.unknown_id,
        u.question,
        u.scope,
        investigation,
        JSON.stringify(evidenceId ? [evidenceId] : []),
        principal,
        at,
        at,
      ],
    );
    return inserted.changes === 1;
  }

  async recordUnknown(
    team: string,
    principal: string,
    u: NewUnknown & { unknown_id: string },
    investigation: string | null,
    evidenceIds: string[],
  ) {
    return this.db.transaction(async (tx) => {
      const created = await this.recordUnknownIn(tx, team, principal, u, investigation, null);
      if (created && evidenceIds.length) {
        await tx.run('UPDATE unknowns SET evidence_ids = ? WHERE team = ? AND unknown_id = ?', [
          JSON.stringify(evidenceIds),
          team,
          u.unknown_id,
        ]);
      }
      const row = await tx.get<Row>('SELECT * FROM unknowns WHERE team = ? AND unknown_id = ?', [
        team,
        u.unknown_id,
      ]);
      return { created, unknown: toUnknown(row!) };
    });
  }

  async getUnknown(team: string, unknownId: string) {
    const row = await this.db.get<Row>('SELECT * FROM unknowns WHERE team = ? AND unknown_id = ?', [
      team,
      unknownId,
    ]);
    return row ? toUnknown(row) : undefined;
  }

  /** Compare-and-swap: applies only when the stored revision is `expectedRevision`. */
  async updateUnknown(
    team: string,
    unknownId: string,
    expectedRevision: number,
    change: { status?: UnknownStatus; note?: string | null; settledBy?: string[] | null },
  ): Promise<{ applied: boolean; unknown: UnknownRecord | undefined }> {
    const sets = ['revision = revision + 1', 'updated_at = ?'];
    const args: unknown[] = [now()];
    const assign = (column: string, value: unknown) => {
      sets.push(`${column} = ?`);
      args.push(value);
    };
    if (change.status !== undefined) assign('status', change.status);
    if (change.note !== undefined) assign('note', change.note);
    if (change.settledBy !== undefined) assign('settled_by', json(change.settledBy));
    const info = await this.db.run(
      `UPDATE unknowns SET ${sets.join(', ')} WHERE team = ? AND unknown_id = ? AND revision = ?`,
      [...args, team, unknownId, expectedRevision],
    );
    return { applied: info.changes === 1, unknown: await this.getUnknown(team, unknownId) };
  }

  async listUnknowns(team: string, f: UnknownFilter): Promise<Page<UnknownRecord>> {
    const { where, args } = teamFilter(team, [
      ['status', f.status],
      ['investigation', f.investigation],
    ]);
    return this.pageBy('unknowns', where, args, f, 'unknown_id', toUnknown, (u) => [
      u.created_at,
      u.unknown_id,
    ]);
  }

  // ── artifacts ───────────────────────────────────────────────────────────

  async putArtifact(team: string, a: ArtifactRecord) {
    const info = await this.db.run(
      `INSERT INTO artifacts (team, digest, size, mime_type, description, name, origin, registered_by, created_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
      [team, a.digest, a.size, a.mime_type, a.description, a.name, a.origin, a.registered_by, a.created_at],
    );
    return { created: info.changes === 1, artifact: (await this.getArtifact(team, a.digest))! };
  }

  async getArtifact(team: string, digest: string) {
    const r = await this.db.get<Row>('SELECT * FROM artifacts WHERE team = ? AND digest = ?', [team, digest]);
    return r ? toArtifact(r) : undefined;
  }

  async listArtifacts(team: string, f: { cursor?: string; limit: number }) {
    const { where, args } = teamFilter(team, []);
    return this.pageBy('artifacts', where, args, f, 'digest', toArtifact, (a) => [a.created_at, a.digest]);
  }

  async completionCandidates(
    team: string,
    principal: string,
    kind: 'artifact' | 'evidence' | 'launch_key' | 'open_unknown' | 'investigation',
    limit: number,
  ): Promise<string[]> {
    const queries = {
      artifact: [
        'SELECT digest AS v FROM artifacts WHERE team = ? ORDER BY created_at DESC LIMIT ?',
        [team, limit],
      ],
      evidence: [
        'SELECT evidence_id AS v FROM evidence WHERE team = ? ORDER BY created_at DESC LIMIT ?',
        [team, limit],
      ],
      launch_key: [
        'SELECT idempotency_key AS v FROM launches WHERE team = ? AND principal = ? ORDER BY created_at DESC LIMIT ?',
        [team, principal, limit],
      ],
      open_unknown: [
        "SELECT unknown_id AS v FROM unknowns WHERE team = ? AND status = 'open' ORDER BY created_at DESC LIMIT ?",
        [team, limit],
      ],
      investigation: [
        `SELECT v FROM (
           SELECT investigation AS v, created_at FROM evidence WHERE team = ? AND investigation IS NOT NULL
           UNION ALL SELECT investigation AS v, created_at FROM launches WHERE team = ? AND investigation IS NOT NULL
           UNION ALL SELECT investigation AS v, created_at FROM unknowns WHERE team = ? AND investigation IS NOT NULL
         ) AS candidates ORDER BY created_at DESC LIMIT ?`,
        [team, team, team, limit],
      ],
    } as const;
    const [sql, args] = queries[kind];
    return (await this.db.all<Row>(sql, [...args])).map((r) => r.v as string);
  }

  async close() {
    await this.db.close();
  }
}

function toArtifact(r: Row): ArtifactRecord {
  return {
    digest: r.digest as string,
    size: Number(r.size),
    mime_type: r.mime_type as string,
    description: r.description as string,
    name: (r.name as string | null) ?? null,
    origin: r.origin as string,
    registered_by: r.registered_by as string,
    created_at: r.created_at as string,
  };
}
