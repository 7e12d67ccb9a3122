// Retained Evidence: records, documents, collection rows with their filter
// keys and per-value counts, and the residual unknowns a result leaves, all
// retained in one transaction. Pages read only the rows they return.
import type { EvidenceRecord, NewEvidence, Page } from '../domain/types.ts';
import { buildEvidenceInSteps, keyOf, type BuiltEvidence } from '../domain/evidence.ts';
import { CHUNK, insertMany, now, pageBy, teamFilter, type Row } from './rows.ts';
import type { SqlDriver, SqlExecutor } from './sql.ts';
import { addCandidates, type Candidate } from './candidates.ts';
import { readPage, type PageQuery, type PageResult } from './evidencePages.ts';

/** Results with more rows and keys than this are retained in short transactions (see put). */
const STAGE_ABOVE = 20_000;
const STAGE_BATCH = 4_000;
/** Lets the event loop serve other calls between two steps of a long retention. */
const breathe = () => new Promise<void>((resolve) => setImmediate(resolve));
/** Above this many filter keys in one retention, PostgreSQL gets fresh statistics. */
const ANALYZE_AFTER_KEYS = 50_000;

export interface EvidenceFilter {
  tool?: string;
  investigation?: string;
  workflowId?: string;
  cursor?: string;
  limit: number;
}

/** The inserts of a result's rows, filter keys and per-value counts: statement head, width, values. */
function rowInserts(id: string, built: BuiltEvidence): [string, number, unknown[][]][] {
  return [
    [
      'INSERT INTO evidence_rows (evidence_id, collection, source_index, row)',
      4,
      built.rows.map((x) => [id, x.collection, x.sourceIndex, x.json]),
    ],
    [
      'INSERT INTO evidence_row_keys (evidence_id, collection, field, value, ordinal, source_index)',
      6,
      built.keys.map((k) => [id, k.collection, k.field, k.value, k.ordinal, k.sourceIndex]),
    ],
    [
      'INSERT INTO evidence_key_counts (evidence_id, collection, field, value, rows)',
      5,
      built.counts.map((c) => [id, c.collection, c.field, c.value, c.rows]),
    ],
  ];
}

/**
 * Ends a staging in the transaction that writes its record: whether its rows are still there (the
 * sweep took neither the note nor them). When the note is gone, the record's rows are written again.
 */
async function unstage(tx: SqlExecutor, id: string): Promise<boolean> {
  return (await tx.run('DELETE FROM evidence_staging WHERE evidence_id = ?', [id])).changes === 1;
}

export class EvidenceStore {
  constructor(private readonly db: SqlDriver) {}

  /**
   * Retains a complete result (for `team`, by default the record's); idempotent
   * because the id is content-addressed. Built in steps that let other work
   * run; a large result's rows go in in short transactions first, invisible
   * until the record itself is written (so no other call waits long for the
   * store, and a crash midway leaves only rows that sweepStaged removes).
   */
  async put(e: NewEvidence, team = e.record.team): Promise<EvidenceRecord> {
    const steps = buildEvidenceInSteps(e);
    let step = steps.next();
    while (!step.done) {
      await breathe();
      step = steps.next();
    }
    const built = step.value;
    if (built.rows.length + built.keys.length <= STAGE_ABOVE) {
      await this.db.transaction((tx) => this.retain(tx, built, team));
      return built.record;
    }
    const id = built.record.evidence_id;
    if (await this.get(team, id)) return built.record;
    await this.stage(built);
    await this.db.transaction(async (tx) => {
      await this.retain(tx, built, team, { rowsWritten: await unstage(tx, id) });
    });
    return built.record;
  }

  /**
   * Writes a large result's rows, keys and counts in short transactions, noted in evidence_staging
   * until its record is written (retain with rowsWritten, in the caller's transaction).
   */
  private async stage(built: BuiltEvidence) {
    const id = built.record.evidence_id;
    // A retry of a staging that failed starts the clock again, so the sweep does not take its rows.
    await this.db.run(
      `INSERT INTO evidence_staging (evidence_id, started_at) VALUES (?, ?)
       ON CONFLICT (evidence_id) DO UPDATE SET started_at = excluded.started_at`,
      [id, now()],
    );
    for (const [head, width, values] of rowInserts(id, built)) {
      for (let at = 0; at < values.length; at += STAGE_BATCH) {
        await this.db.transaction((tx) =>
          insertMany(
            tx,
            head,
            width,
            values.slice(at, at + STAGE_BATCH),
            CHUNK[this.db.dialect],
            'ON CONFLICT DO NOTHING',
          ),
        );
        await breathe();
      }
    }
  }

  /**
   * Removes the rows of retentions that never wrote their record (their worker
   * died midway) and began more than `olderThanMs` ago. Returns how many.
   */
  async sweepStaged(olderThanMs = 6 * 3_600_000): Promise<number> {
    const cutoff = new Date(Date.now() - olderThanMs).toISOString();
    const stale = await this.db.all<Row>('SELECT evidence_id FROM evidence_staging WHERE started_at < ?', [
      cutoff,
    ]);
    for (const { evidence_id: id } of stale) {
      await this.db.transaction(async (tx) => {
        // Read again here: a retention may have written its record, or staged again, since.
        const still = await tx.run('DELETE FROM evidence_staging WHERE evidence_id = ? AND started_at < ?', [
          id,
          cutoff,
        ]);
        if (still.changes === 0) return;
        const kept = await tx.get('SELECT 1 AS kept FROM evidence WHERE evidence_id = ? LIMIT 1', [id]);
        if (!kept)
          for (const table of ['evidence_rows', 'evidence_row_keys', 'evidence_key_counts'])
            await tx.run(`DELETE FROM ${table} WHERE evidence_id = ?`, [id]);
      });
    }
    return stale.length;
  }

  /**
   * Retains every item, or none; `then` runs in the same transaction (a bundle's unknowns and
   * annotations). A large item's rows go in first in short transactions, as put's do, so no other
   * call waits long for the store; they are seen only once that transaction writes its record.
   */
  async importAll<T = undefined>(
    team: string,
    items: BuiltEvidence[],
    then?: (tx: SqlExecutor) => Promise<T>,
  ): Promise<{ imported: number; present: number; then?: T }> {
    const staged = new Set<string>();
    for (const built of items) {
      const id = built.record.evidence_id;
      if (built.rows.length + built.keys.length <= STAGE_ABOVE || staged.has(id)) continue;
      if (await this.get(team, id)) continue;
      await this.stage(built);
      staged.add(id);
    }
    let imported = 0;
    const after = await this.db.transaction(async (tx) => {
      const written = new Set<string>();
      for (const id of staged) if (await unstage(tx, id)) written.add(id);
      for (const built of items) {
        const rowsWritten = written.has(built.record.evidence_id);
        if (await this.retain(tx, built, team, { rowsWritten })) imported++;
      }
      return then?.(tx);
    });
    return { imported, present: items.length - imported, then: after };
  }

  private async retain(
    tx: SqlExecutor,
    built: BuiltEvidence,
    team: string,
    opts: { rowsWritten?: boolean } = {},
  ): Promise<boolean> {
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
    // Rows are content-addressed by evidence_id: another team's copy (or a staged retention) may hold some already.
    if (built.rows.length > 0 && !opts.rowsWritten) {
      for (const [head, width, values] of rowInserts(r.evidence_id, built))
        await insertMany(tx, head, width, values, chunk, 'ON CONFLICT DO NOTHING');
    }
    if (built.unknowns.length > 0) {
      const at = now();
      const evidenceIds = JSON.stringify([r.evidence_id]);
      await insertMany(
        tx,
        'INSERT INTO unknowns (team, unknown_id, question, scope, status, revision, investigation, evidence_ids, created_by, created_at, updated_at, updated_by)',
        12,
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
          r.principal,
        ]),
        chunk,
        'ON CONFLICT DO NOTHING',
      );
      // The first revision of each unknown this retention created (not of one that existed already).
      await tx.run(
        `INSERT INTO unknown_revisions (team, unknown_id, revision, status, note, settled_by, evidence_ids, changed_by, changed_at)
         SELECT team, unknown_id, 1, status, note, settled_by, evidence_ids, created_by, created_at FROM unknowns
         WHERE team = ? AND status = 'open' AND created_at = ? AND revision = 1 AND evidence_ids = ?
         ON CONFLICT DO NOTHING`,
        [team, at, evidenceIds],
      );
    }
    await addCandidates(tx, team, [
      ['evidence', '', r.evidence_id],
      ...built.unknowns.map((u): Candidate => ['open_unknown', '', u.unknown_id]),
      ...(r.investigation ? [['investigation', '', r.investigation] as Candidate] : []),
    ]);
    if (this.db.dialect === 'postgres' && built.keys.length > ANALYZE_AFTER_KEYS) {
      // Fresh bulk loads leave the planner without statistics; it would then scan instead of seeking.
      await tx.run('ANALYZE evidence_rows, evidence_row_keys, evidence_key_counts');
    }
    return true;
  }

  async get(team: string, evidenceId: string): Promise<EvidenceRecord | undefined> {
    const row = await this.db.get<Row>('SELECT record FROM evidence WHERE team = ? AND evidence_id = ?', [
      team,
      evidenceId,
    ]);
    return row ? (JSON.parse(row.record as string) as EvidenceRecord) : undefined;
  }

  async document(team: string, evidenceId: string): Promise<Record<string, unknown> | undefined> {
    const row = await this.db.get<Row>('SELECT document FROM evidence WHERE team = ? AND evidence_id = ?', [
      team,
      evidenceId,
    ]);
    return row ? (JSON.parse(row.document as string) as Record<string, unknown>) : undefined;
  }

  async list(team: string, f: EvidenceFilter): Promise<Page<EvidenceRecord>> {
    const { where, args } = teamFilter(team, [
      ['tool', f.tool],
      ['investigation', f.investigation],
      ['workflow_id', f.workflowId],
    ]);
    return pageBy(
      this.db,
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
   * The team's Evidence of `tools`, newest first, with a row whose filterable `field` in
   * `collection` holds `value` (the extraction an entry's artifact digest came from, say): each
   * candidate is one primary-key read of the value's count.
   */
  async withRowKey(
    team: string,
    tools: string[],
    q: { collection: string; field: string; value: unknown; limit: number },
  ): Promise<string[]> {
    const rows = await this.db.all<Row>(
      `SELECT e.evidence_id FROM evidence e JOIN evidence_key_counts k
         ON k.evidence_id = e.evidence_id AND k.collection = ? AND k.field = ? AND k.value = ?
       WHERE e.team = ? AND e.tool IN (${tools.map(() => '?').join(', ')}) AND k.rows > 0
       ORDER BY e.created_at DESC, e.evidence_id DESC LIMIT ?`,
      [q.collection, q.field, keyOf(q.value)!, team, ...tools, q.limit],
    );
    return rows.map((r) => r.evidence_id as string);
  }

  /** One page of a collection (see readPage). */
  page(q: PageQuery): Promise<PageResult> {
    return readPage(this.db, q);
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
}
