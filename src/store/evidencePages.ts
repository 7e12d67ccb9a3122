// Pages of a retained collection. Unfiltered pages and single-value filters
// read exactly the rows they return (by source_index, or by the value's
// ordinal); other filters scan the candidates of their most selective field.
import { DossierError } from '../domain/errors.ts';
import type { PageRow, Where } from '../domain/types.ts';
import { keyOf } from '../domain/evidence.ts';
import type { Row } from './rows.ts';
import type { SqlExecutor } from './sql.ts';

/** Candidates a multi-value or multi-field filter may scan before it is refused. */
export const MAX_FILTER_SCAN = 1_000_000;

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

/** A filtered field with its distinct filter keys. */
interface KeyedField {
  field: string;
  keys: string[];
}

const marks = (values: unknown[]) => values.map(() => '?').join(', ');
const pageRow = (r: Row): PageRow => ({
  source_index: Number(r.source_index),
  row: JSON.parse(r.row as string),
});

/** One page of a collection. */
export async function readPage(db: SqlExecutor, q: PageQuery): Promise<PageResult> {
  const { evidenceId, collection, offset, limit } = q;
  const fields = Object.entries(q.where ?? {});
  // Past the end there is nothing to read (and offset + limit must stay within SQL integers).
  if (offset > 0 && offset >= q.total)
    return {
      rows: [],
      matched: fields.length === 0 ? q.total : (await readPage(db, { ...q, offset: 0, limit: 0 })).matched,
    };
  if (fields.length === 0) {
    const rows = await db.all<Row>(
      `SELECT source_index, row FROM evidence_rows WHERE evidence_id = ? AND collection = ? AND source_index >= ? AND source_index < ? ORDER BY source_index`,
      [evidenceId, collection, offset, offset + limit],
    );
    return { rows: rows.map(pageRow), matched: q.total };
  }
  if (fields.some(([, values]) => values.length === 0)) return { rows: [], matched: 0 };

  const keyed = fields.map(([field, values]): KeyedField => ({
    field,
    keys: [...new Set(values.map((v) => keyOf(v)!))],
  }));
  const counts = await Promise.all(keyed.map((k) => matchCount(db, q, k)));
  if (keyed.length === 1 && keyed[0]!.keys.length === 1) {
    const { field, keys } = keyed[0]!;
    const hits = await db.all<Row>(
      `SELECT source_index FROM evidence_row_keys WHERE evidence_id = ? AND collection = ? AND field = ? AND value = ? AND ordinal >= ? AND ordinal < ? ORDER BY ordinal`,
      [evidenceId, collection, field, keys[0], offset, offset + limit],
    );
    return {
      rows: await rowsAt(
        db,
        q,
        hits.map((h) => Number(h.source_index)),
      ),
      matched: counts[0]!,
    };
  }
  const candidates = await scanCandidates(db, q, keyed, counts);
  return { rows: await rowsAt(db, q, candidates.slice(offset, offset + limit)), matched: candidates.length };
}

/** The rows at `indexes` of the page's collection, in source order. */
async function rowsAt(db: SqlExecutor, q: PageQuery, indexes: number[]): Promise<PageRow[]> {
  if (indexes.length === 0) return [];
  const rows = await db.all<Row>(
    `SELECT source_index, row FROM evidence_rows WHERE evidence_id = ? AND collection = ? AND source_index IN (${marks(indexes)}) ORDER BY source_index`,
    [q.evidenceId, q.collection, ...indexes],
  );
  return rows.map(pageRow);
}

/** How many rows hold one of the field's values, from the per-value counts. */
async function matchCount(db: SqlExecutor, q: PageQuery, { field, keys }: KeyedField): Promise<number> {
  const r = await db.get<Row>(
    `SELECT COALESCE(SUM(rows), 0) AS n FROM evidence_key_counts WHERE evidence_id = ? AND collection = ? AND field = ? AND value IN (${marks(keys)})`,
    [q.evidenceId, q.collection, field, ...keys],
  );
  return Number(r?.n ?? 0);
}

/** General case: the candidates of the most selective field, checked against the others. */
async function scanCandidates(
  db: SqlExecutor,
  q: PageQuery,
  keyed: KeyedField[],
  counts: number[],
): Promise<number[]> {
  const { evidenceId, collection } = q;
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
    await db.all<Row>(
      `SELECT DISTINCT source_index FROM evidence_row_keys WHERE evidence_id = ? AND collection = ? AND field = ? AND value IN (${marks(first.keys)}) ORDER BY source_index`,
      [evidenceId, collection, first.field, ...first.keys],
    )
  ).map((h) => Number(h.source_index));
  for (const [, i] of order.slice(1)) {
    const other = keyed[i]!;
    const allowed = new Set<number>();
    // Check the remaining candidates against this field, a bounded batch at a time.
    for (let at = 0; at < candidates.length; at += 500) {
      const batch = candidates.slice(at, at + 500);
      const hits = await db.all<Row>(
        `SELECT DISTINCT k.source_index FROM evidence_row_keys k WHERE k.evidence_id = ? AND k.collection = ? AND k.field = ? AND k.value IN (${marks(other.keys)}) AND k.source_index IN (${marks(batch)})`,
        [evidenceId, collection, other.field, ...other.keys, ...batch],
      );
      for (const h of hits) allowed.add(Number(h.source_index));
    }
    candidates = candidates.filter((c) => allowed.has(c));
  }
  return candidates;
}
