// Residual unknowns: questions the evidence leaves open, with an identity of
// their own and compare-and-swap updates.
import type { NewUnknown, Page, UnknownRecord, UnknownRevision, UnknownStatus } from '../domain/types.ts';
import { addCandidates, type Candidate } from './candidates.ts';
import {
  importUnknowns,
  unknownsForBundle,
  type BundledUnknown,
  type UnknownMerge,
} from './unknownBundles.ts';
import { json, now, pageBy, parse, teamFilter, type Row } from './rows.ts';
import type { SqlDriver, SqlExecutor } from './sql.ts';

export interface UnknownFilter {
  status?: UnknownStatus;
  investigation?: string;
  cursor?: string;
  limit: number;
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
    updated_by: (r.updated_by as string | null) ?? null,
  };
}

/** Keeps the revision an unknown now has, as it is, with who made it. */
async function keepRevision(tx: SqlExecutor, team: string, unknownId: string, by: string) {
  await tx.run(
    `INSERT INTO unknown_revisions (team, unknown_id, revision, status, note, settled_by, evidence_ids, changed_by, changed_at)
     SELECT team, unknown_id, revision, status, note, settled_by, evidence_ids, ?, updated_at
     FROM unknowns WHERE team = ? AND unknown_id = ? ON CONFLICT DO NOTHING`,
    [by, team, unknownId],
  );
}

export class UnknownStore {
  constructor(private readonly db: SqlDriver) {}

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
      `INSERT INTO unknowns (team, unknown_id, question, scope, status, revision, investigation, evidence_ids, created_by, created_at, updated_at, updated_by)
       VALUES (?, ?, ?, ?, 'open', 1, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
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
        principal,
      ],
    );
    if (inserted.changes === 1) {
      await addCandidates(tx, team, [
        ['open_unknown', '', u.unknown_id],
        ...(investigation ? [['investigation', '', investigation] as Candidate] : []),
      ]);
    }
    return inserted.changes === 1;
  }

  async record(
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
      if (created) await keepRevision(tx, team, u.unknown_id, principal);
      const row = await tx.get<Row>('SELECT * FROM unknowns WHERE team = ? AND unknown_id = ?', [
        team,
        u.unknown_id,
      ]);
      return { created, unknown: toUnknown(row!) };
    });
  }

  async get(team: string, unknownId: string): Promise<UnknownRecord | undefined> {
    const row = await this.db.get<Row>('SELECT * FROM unknowns WHERE team = ? AND unknown_id = ?', [
      team,
      unknownId,
    ]);
    return row ? toUnknown(row) : undefined;
  }

  /** Compare-and-swap: applies only when the stored revision is `expectedRevision`; the new revision is kept in the history. */
  async update(
    team: string,
    unknownId: string,
    expectedRevision: number,
    change: { status?: UnknownStatus; note?: string | null; settledBy?: string[] | null },
    by: string,
  ): Promise<{ applied: boolean; unknown: UnknownRecord | undefined }> {
    const sets = ['revision = revision + 1', 'updated_at = ?', 'updated_by = ?'];
    const args: unknown[] = [now(), by];
    const assign = (column: string, value: unknown) => {
      sets.push(`${column} = ?`);
      args.push(value);
    };
    if (change.status !== undefined) assign('status', change.status);
    if (change.note !== undefined) assign('note', change.note);
    if (change.settledBy !== undefined) assign('settled_by', json(change.settledBy));
    const applied = await this.db.transaction(async (tx) => {
      const current = await tx.get<Row>(
        'SELECT status, note, settled_by, revision, updated_by FROM unknowns WHERE team = ? AND unknown_id = ?',
        [team, unknownId],
      );
      const holds =
        !!current &&
        (change.status === undefined || change.status === current.status) &&
        (change.note === undefined || change.note === ((current.note as string | null) ?? null)) &&
        (change.settledBy === undefined ||
          json(change.settledBy) === ((current.settled_by as string | null) ?? null));
      // A change that changes nothing is no new revision; the same change again by the author of
      // the revision it made (a retried call whose reply was lost) is answered as it was.
      const revision = Number(current?.revision);
      if (
        holds &&
        (revision === expectedRevision || (revision === expectedRevision + 1 && current!.updated_by === by))
      )
        return true;
      const info = await tx.run(
        `UPDATE unknowns SET ${sets.join(', ')} WHERE team = ? AND unknown_id = ? AND revision = ?`,
        [...args, team, unknownId, expectedRevision],
      );
      if (info.changes === 1) await keepRevision(tx, team, unknownId, by);
      return info.changes === 1;
    });
    return { applied, unknown: await this.get(team, unknownId) };
  }

  /** An unknown's revisions, newest first, those before `beforeRevision` when given. */
  async history(
    team: string,
    unknownId: string,
    f: { beforeRevision?: number; limit: number },
  ): Promise<UnknownRevision[]> {
    const rows = await this.db.all<Row>(
      `SELECT * FROM unknown_revisions WHERE team = ? AND unknown_id = ? AND revision < ? ORDER BY revision DESC LIMIT ?`,
      [team, unknownId, f.beforeRevision ?? 2_000_000_000, f.limit],
    );
    return rows.map((r) => ({
      revision: Number(r.revision),
      status: r.status as UnknownStatus,
      note: (r.note as string | null) ?? null,
      settled_by: parse<string[]>(r.settled_by),
      evidence_ids: JSON.parse(r.evidence_ids as string) as string[],
      changed_by: r.changed_by as string,
      changed_at: r.changed_at as string,
    }));
  }

  /** What a bundle carries: the unknowns naming `evidenceIds` or of `investigation`, with their revisions. */
  forBundle(
    team: string,
    evidenceIds: ReadonlySet<string>,
    investigation: string | null,
    max: number,
    tooMany: () => Error,
  ): Promise<BundledUnknown[]> {
    return unknownsForBundle(this.db, team, evidenceIds, investigation, max, toUnknown, tooMany);
  }

  /** Merges a bundle's unknowns within the import's transaction `tx` (see unknownBundles.ts). */
  importIn(tx: SqlExecutor, team: string, unknowns: BundledUnknown[]): Promise<UnknownMerge> {
    return importUnknowns(tx, team, unknowns, toUnknown);
  }

  async list(team: string, f: UnknownFilter): Promise<Page<UnknownRecord>> {
    const { where, args } = teamFilter(team, [
      ['status', f.status],
      ['investigation', f.investigation],
    ]);
    return pageBy(this.db, 'unknowns', where, args, f, 'unknown_id', toUnknown, (u) => [
      u.created_at,
      u.unknown_id,
    ]);
  }
}
