// Residual unknowns as bundles carry them: each with its revisions, read for
// an export and merged on import. A merge never overwrites work: an unknown is
// taken whole when the store lacks it, moved forward when the store holds an
// earlier revision of the same history, kept when the store is ahead on it,
// and otherwise left as it is and reported as a conflict for the team to
// settle with update_unknown.
import type { UnknownRecord, UnknownRevision, UnknownStatus } from '../domain/types.ts';
import { addCandidates, type Candidate } from './candidates.ts';
import { json, parse, type Row } from './rows.ts';
import type { SqlExecutor } from './sql.ts';

/** An unknown in a bundle: its current state and every revision the store kept of it. */
export interface BundledUnknown extends UnknownRecord {
  revisions: UnknownRevision[];
}

export interface UnknownMerge {
  imported: number;
  updated: number;
  already_present: number;
  /** Unknowns whose history here and in the bundle went apart: left as they were here. */
  conflicts: string[];
}

const SCAN = 1_000;
const IN_CHUNK = 500;

function toRevision(r: Row): UnknownRevision {
  return {
    revision: Number(r.revision),
    status: r.status as UnknownStatus,
    note: (r.note as string | null) ?? null,
    settled_by: parse<string[]>(r.settled_by),
    evidence_ids: JSON.parse(r.evidence_ids as string) as string[],
    changed_by: r.changed_by as string,
    changed_at: r.changed_at as string,
  };
}

/**
 * The team's unknowns that name one of `evidenceIds` or belong to `investigation`, each with its
 * revisions, in unknown_id order; more than `max` is refused by `tooMany`.
 */
export async function unknownsForBundle(
  db: SqlExecutor,
  team: string,
  evidenceIds: ReadonlySet<string>,
  investigation: string | null,
  max: number,
  toUnknown: (r: Row) => UnknownRecord,
  tooMany: () => Error,
): Promise<BundledUnknown[]> {
  const found: UnknownRecord[] = [];
  // The team's unknowns by primary key, a page at a time: evidence_ids is a JSON list, not an index.
  for (let after = ''; ;) {
    const rows = await db.all<Row>(
      'SELECT * FROM unknowns WHERE team = ? AND unknown_id > ? ORDER BY unknown_id LIMIT ?',
      [team, after, SCAN],
    );
    for (const r of rows) {
      const u = toUnknown(r);
      if (
        (investigation && u.investigation === investigation) ||
        u.evidence_ids.some((e) => evidenceIds.has(e))
      )
        found.push(u);
      if (found.length > max) throw tooMany();
    }
    if (rows.length < SCAN) break;
    after = rows[rows.length - 1]!.unknown_id as string;
  }
  const revisions = new Map<string, UnknownRevision[]>();
  for (let i = 0; i < found.length; i += IN_CHUNK) {
    const ids = found.slice(i, i + IN_CHUNK).map((u) => u.unknown_id);
    const rows = await db.all<Row>(
      `SELECT * FROM unknown_revisions WHERE team = ? AND unknown_id IN (${ids.map(() => '?').join(', ')}) ORDER BY unknown_id, revision`,
      [team, ...ids],
    );
    for (const r of rows) {
      const id = r.unknown_id as string;
      revisions.set(id, [...(revisions.get(id) ?? []), toRevision(r)]);
    }
  }
  return found.map((u) => ({ ...u, revisions: revisions.get(u.unknown_id) ?? [] }));
}

/** Whether two states of an unknown say the same (who made them and when aside). */
const sameState = (
  a: Pick<UnknownRevision, 'status' | 'note' | 'settled_by'>,
  b: Pick<UnknownRevision, 'status' | 'note' | 'settled_by'>,
) => a.status === b.status && a.note === b.note && json(a.settled_by) === json(b.settled_by);

async function keepRevisions(tx: SqlExecutor, team: string, u: BundledUnknown, above: number) {
  for (const r of u.revisions.filter((r) => r.revision > above))
    await tx.run(
      `INSERT INTO unknown_revisions (team, unknown_id, revision, status, note, settled_by, evidence_ids, changed_by, changed_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
      [
        team,
        u.unknown_id,
        r.revision,
        r.status,
        r.note,
        json(r.settled_by),
        JSON.stringify(r.evidence_ids),
        r.changed_by,
        r.changed_at,
      ],
    );
}

/** Merges a bundle's unknowns into `team`'s, inside the import's transaction. */
export async function importUnknowns(
  tx: SqlExecutor,
  team: string,
  unknowns: BundledUnknown[],
  toUnknown: (r: Row) => UnknownRecord,
): Promise<UnknownMerge> {
  const merge: UnknownMerge = { imported: 0, updated: 0, already_present: 0, conflicts: [] };
  for (const u of unknowns) {
    const row = await tx.get<Row>('SELECT * FROM unknowns WHERE team = ? AND unknown_id = ?', [
      team,
      u.unknown_id,
    ]);
    const here = row ? toUnknown(row) : undefined;
    if (!here) {
      await tx.run(
        `INSERT INTO unknowns (team, unknown_id, question, scope, status, revision, investigation, evidence_ids, settled_by, note, created_by, created_at, updated_at, updated_by)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        [
          team,
          u.unknown_id,
          u.question,
          u.scope,
          u.status,
          u.revision,
          u.investigation,
          JSON.stringify(u.evidence_ids),
          json(u.settled_by),
          u.note,
          u.created_by,
          u.created_at,
          u.updated_at,
          u.updated_by,
        ],
      );
      await keepRevisions(tx, team, u, 0);
      await addCandidates(tx, team, [
        ...(u.status === 'open' ? [['open_unknown', '', u.unknown_id] as Candidate] : []),
        ...(u.investigation ? [['investigation', '', u.investigation] as Candidate] : []),
      ]);
      merge.imported++;
      continue;
    }
    if (here.revision === u.revision && sameState(here, u)) {
      merge.already_present++;
      continue;
    }
    // Forward only along one history: the bundle must hold this store's current revision as it is.
    const same = u.revisions.find((r) => r.revision === here.revision);
    if (here.revision < u.revision && same && sameState(here, same)) {
      await tx.run(
        `UPDATE unknowns SET status = ?, note = ?, settled_by = ?, evidence_ids = ?, revision = ?, updated_at = ?, updated_by = ?
         WHERE team = ? AND unknown_id = ? AND revision = ?`,
        [
          u.status,
          u.note,
          json(u.settled_by),
          JSON.stringify(u.evidence_ids),
          u.revision,
          u.updated_at,
          u.updated_by,
          team,
          u.unknown_id,
          here.revision,
        ],
      );
      await keepRevisions(tx, team, u, here.revision);
      merge.updated++;
      continue;
    }
    // This store is ahead along the same history: the bundle's revision is one of its own.
    const kept = await tx.get<Row>(
      'SELECT * FROM unknown_revisions WHERE team = ? AND unknown_id = ? AND revision = ?',
      [team, u.unknown_id, u.revision],
    );
    if (here.revision > u.revision && kept && sameState(toRevision(kept), u)) merge.already_present++;
    else merge.conflicts.push(u.unknown_id);
  }
  return merge;
}
