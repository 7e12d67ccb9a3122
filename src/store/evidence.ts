// Retained Evidence: records, documents, collection rows with their filter
// keys and per-value counts, and the residual unknowns a result leaves, all
// retained in one transaction. Pages read only the rows they return.
import { DossierError } from '../domain/errors.ts';
import type { EvidenceRecord, NewEvidence, Page, PageRow, Where } from '../domain/types.ts';
import { buildEvidenceInSteps, keyOf, type BuiltEvidence } from '../domain/evidence.ts';
import { CHUNK, insertMany, now, pageBy, teamFilter, type Row } from './rows.ts';
import type { SqlDriver, SqlExecutor } from './sql.ts';
import { addCandidates, type Candidate } from './candidates.ts';

/** Candidates a multi-value or multi-field filter may scan before it is refused. */
export const MAX_FILTER_SCAN = 1_000_000;
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

export interface PageQuery {
  evidenceId: string;
  collection: string;
  /** The collection's row count, from the Evidence record. */
  total: number;
  where?: Where;
  offset: number;
  limit: number;
}

export interface PageResult {
  rows: PageRow[];
  matched: number;
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
    await this.db.run(
      'INSERT INTO evidence_staging (evidence_id, started_at) VALUES (?, ?) ON CONFLICT DO NOTHING',
      [id, now()],
    );
    const batches: [string, number, unknown[][]][] = [
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
    for (const [head, width, values] of batches) {
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
    await this.db.transaction(async (tx) => {
      await this.retain(tx, built, team, { rowsWritten: true });
      await tx.run('DELETE FROM evidence_staging WHERE evidence_id = ?', [id]);
    });
    return built.record;
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
      const kept = await this.db.get('SELECT 1 AS kept FROM evidence WHERE evidence_id = ? LIMIT 1', [id]);
      await this.db.transaction(async (tx) => {
        if (!kept)
          for (const table of ['evidence_rows', 'evidence_row_keys', 'evidence_key_counts'])
            await tx.run(`DELETE FROM ${table} WHERE evidence_id = ?`, [id]);
        await tx.run('DELETE FROM evidence_staging WHERE evidence_id = ?', [id]);
      });
    }
    return stale.length;
  }

  /** Retains several Evidence records in one transaction: all of them, or none. */
  /** Retains every item, or none; `then` runs in the same transaction (a bundle's unknowns). */
  async importAll<T = undefined>(
    team: string,
    items: BuiltEvidence[],
    then?: (tx: SqlExecutor) => Promise<T>,
  ): Promise<{ imported: number; present: number; then?: T }> {
    let imported = 0;
    const after = await this.db.transaction(async (tx) => {
      for (const built of items) if (await this.retain(tx, built, team)) imported++;
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
      const id = r.evidence_id;
      await insertMany(
        tx,
        'INSERT INTO evidence_rows (evidence_id, collection, source_index, row)',
        4,
        built.rows.map((x) => [id, x.collection, x.sourceIndex, x.json]),
        chunk,
        'ON CONFLICT DO NOTHING',
      );
      await insertMany(
        tx,
        'INSERT INTO evidence_row_keys (evidence_id, collection, field, value, ordinal, source_index)',
        6,
        built.keys.map((k) => [id, k.collection, k.field, k.value, k.ordinal, k.sourceIndex]),
        chunk,
        'ON CONFLICT DO NOTHING',
      );
      await insertMany(
        tx,
        'INSERT INTO evidence_key_counts (evidence_id, collection, field, value, rows)',
        5,
        built.counts.map((c) => [id, c.collection, c.field, c.value, c.rows]),
        chunk,
        'ON CONFLICT DO NOTHING',
      );
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

    // Past the end there is nothing to read (and offset + limit must stay within SQL integers).
    if (offset > 0 && offset >= q.total)
      return { rows: [], matched: fields.length === 0 ? q.total : await this.matched(q) };
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

  /** How many rows a filter matches, for a page asked past the collection's end. */
  private async matched(q: PageQuery): Promise<number> {
    return (await this.page({ ...q, offset: 0, limit: 0 })).matched;
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
