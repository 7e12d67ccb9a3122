// Annotations: each item's current state and every revision of it, written
// with compare-and-swap on the revision. The revisions are also the team's
// log of changes (who, when, what changed, why: a write, a revert, an import).
import {
  ANNOTATION_FIELDS_BYTES,
  annotationId,
  applyPatch,
  changedFields,
  EMPTY_FIELDS,
  fieldsBytes,
  fieldsOf,
  type Annotation,
  type AnnotationField,
  type AnnotationKey,
  type AnnotationKind,
  type AnnotationOrigin,
  type AnnotationPatch,
  type AnnotationRevision,
  type AnnotationSource,
} from '../domain/annotations.ts';
import { canonicalJson } from '../domain/canonical.ts';
import { DossierError } from '../domain/errors.ts';
import type { Page } from '../domain/types.ts';
import { json, now, pageBy, parse, type Row } from './rows.ts';
import type { SqlDriver, SqlExecutor } from './sql.ts';

export interface WriteOptions {
  origin: AnnotationOrigin;
  revertedTo?: number;
  source?: AnnotationSource;
}

export type WriteResult =
  | { outcome: 'applied' | 'unchanged'; annotation: Annotation }
  | { outcome: 'conflict'; annotation: Annotation | undefined; since: AnnotationRevision[] };

/** An item and its whole history, as bundles carry it. */
export interface CarriedAnnotation extends AnnotationKey {
  annotation_id: string;
  revisions: AnnotationRevision[];
}

const FIELD_COLUMNS = 'name, comment, type, tags, note, variables';

function fieldsFrom(r: Row) {
  return {
    name: (r.name as string | null) ?? null,
    comment: (r.comment as string | null) ?? null,
    type: (r.type as string | null) ?? null,
    tags: JSON.parse(r.tags as string) as string[],
    note: (r.note as string | null) ?? null,
    variables: parse<Record<string, string>>(r.variables),
  };
}

const keyFrom = (r: Row): AnnotationKey => ({
  artifact: r.artifact as string,
  kind: r.kind as AnnotationKind,
  item: r.item as string,
});

function toAnnotation(r: Row): Annotation {
  return {
    annotation_id: r.annotation_id as string,
    ...keyFrom(r),
    revision: Number(r.revision),
    ...fieldsFrom(r),
    created_by: r.created_by as string,
    created_at: r.created_at as string,
    updated_by: r.updated_by as string,
    updated_at: r.updated_at as string,
  };
}

export function toRevision(r: Row): AnnotationRevision {
  return {
    annotation_id: r.annotation_id as string,
    ...keyFrom(r),
    revision: Number(r.revision),
    event_id: r.event_id as string,
    ...fieldsFrom(r),
    changed: JSON.parse(r.changed as string) as AnnotationField[],
    origin: r.origin as AnnotationOrigin,
    reverted_to: r.reverted_to === null || r.reverted_to === undefined ? null : Number(r.reverted_to),
    source: parse<AnnotationSource>(r.source),
    changed_by: r.created_by as string,
    changed_at: r.created_at as string,
    imported: r.imported_by ? { by: r.imported_by as string, at: r.imported_at as string } : null,
  };
}

const fieldValues = (f: ReturnType<typeof fieldsFrom>) => [
  f.name,
  f.comment,
  f.type,
  JSON.stringify(f.tags),
  f.note,
  json(f.variables),
];

async function insertRevision(tx: SqlExecutor, team: string, r: AnnotationRevision) {
  await tx.run(
    `INSERT INTO annotation_revisions (team, annotation_id, revision, event_id, artifact, kind, item, ${FIELD_COLUMNS},
       changed, origin, reverted_to, source, created_by, created_at, imported_by, imported_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [
      team,
      r.annotation_id,
      r.revision,
      r.event_id,
      r.artifact,
      r.kind,
      r.item,
      ...fieldValues(r),
      JSON.stringify(r.changed),
      r.origin,
      r.reverted_to,
      json(r.source),
      r.changed_by,
      r.changed_at,
      r.imported?.by ?? null,
      r.imported?.at ?? null,
    ],
  );
}

/** Makes the annotation row say what revision `r` says (its first revision made it, `first`). */
async function putHead(tx: SqlExecutor, team: string, r: AnnotationRevision, first: AnnotationRevision) {
  const updated = await tx.run(
    `UPDATE annotations SET revision = ?, name = ?, comment = ?, type = ?, tags = ?, note = ?, variables = ?,
       updated_by = ?, updated_at = ? WHERE team = ? AND annotation_id = ? AND revision = ?`,
    [r.revision, ...fieldValues(r), r.changed_by, r.changed_at, team, r.annotation_id, r.revision - 1],
  );
  if (updated.changes === 1 || r.revision !== 1) return updated.changes === 1;
  const inserted = await tx.run(
    `INSERT INTO annotations (team, annotation_id, artifact, kind, item, revision, ${FIELD_COLUMNS},
       created_by, created_at, updated_by, updated_at) VALUES (?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
     ON CONFLICT DO NOTHING`,
    [
      team,
      r.annotation_id,
      r.artifact,
      r.kind,
      r.item,
      ...fieldValues(r),
      first.changed_by,
      first.changed_at,
      r.changed_by,
      r.changed_at,
    ],
  );
  return inserted.changes === 1;
}

/** The same revision, wherever it was made or imported. */
const sameEvent = (a: AnnotationRevision, b: AnnotationRevision) =>
  canonicalJson({ ...a, imported: null }) === canonicalJson({ ...b, imported: null });

export class AnnotationStore {
  constructor(private readonly db: SqlDriver) {}

  async get(team: string, key: AnnotationKey): Promise<Annotation | undefined> {
    const row = await this.db.get<Row>('SELECT * FROM annotations WHERE team = ? AND annotation_id = ?', [
      team,
      annotationId(key),
    ]);
    return row ? toAnnotation(row) : undefined;
  }

  /** The annotations on these items of one artifact, by item (a page's worth at a time). */
  async getMany(team: string, artifact: string, kind: AnnotationKind, items: string[]) {
    const found = new Map<string, Annotation>();
    const unique = [...new Set(items)];
    for (let i = 0; i < unique.length; i += 500) {
      const slice = unique.slice(i, i + 500);
      const rows = await this.db.all<Row>(
        `SELECT * FROM annotations WHERE team = ? AND artifact = ? AND kind = ? AND item IN (${slice.map(() => '?').join(', ')})`,
        [team, artifact, kind, ...slice],
      );
      for (const r of rows) found.set(r.item as string, toAnnotation(r));
    }
    return found;
  }

  /** The items of an artifact the team named `name`. */
  async named(team: string, artifact: string, name: string): Promise<Annotation[]> {
    const rows = await this.db.all<Row>(
      'SELECT * FROM annotations WHERE team = ? AND artifact = ? AND name = ? ORDER BY kind, item LIMIT 16',
      [team, artifact, name],
    );
    return rows.map(toAnnotation);
  }

  /**
   * Compare-and-swap: applies `patch` only when the item is at `expected`
   * (0: no annotation yet). The same change again by the same author is
   * answered as it was (a retry); anything else stale is a conflict, with the
   * current state and the revisions made since `expected`.
   */
  async write(
    team: string,
    by: string,
    key: AnnotationKey,
    expected: number,
    patch: AnnotationPatch,
    opts: WriteOptions,
  ): Promise<WriteResult> {
    const id = annotationId(key);
    return this.db.transaction(async (tx) => {
      const read = async () => {
        const row = await tx.get<Row>('SELECT * FROM annotations WHERE team = ? AND annotation_id = ?', [
          team,
          id,
        ]);
        return row ? toAnnotation(row) : undefined;
      };
      const conflict = async (): Promise<WriteResult> => ({
        outcome: 'conflict',
        annotation: await read(),
        since: (
          await tx.all<Row>(
            'SELECT * FROM annotation_revisions WHERE team = ? AND annotation_id = ? AND revision > ? ORDER BY revision LIMIT 20',
            [team, id, expected],
          )
        ).map(toRevision),
      });
      const current = await read();
      const before = current ? fieldsOf(current) : EMPTY_FIELDS;
      const next = applyPatch(before, patch);
      const changed = changedFields(before, next);
      if ((current?.revision ?? 0) !== expected) {
        const retry =
          current && current.updated_by === by && current.revision === expected + 1 && !changed.length;
        return retry ? { outcome: 'unchanged', annotation: current } : conflict();
      }
      if (current && !changed.length) return { outcome: 'unchanged', annotation: current };
      const bytes = fieldsBytes(next);
      if (bytes > ANNOTATION_FIELDS_BYTES)
        throw new DossierError(
          'invalid_params',
          `With this ${opts.origin === 'revert' ? 'revert' : 'write'} the annotation's fields would take ${bytes} bytes, more than an annotation may hold together (${ANNOTATION_FIELDS_BYTES}).`,
          'Write less: a shorter note or comment, fewer or shorter variable names. Nothing was changed.',
          { bytes, max_bytes: ANNOTATION_FIELDS_BYTES },
        );
      const revision: AnnotationRevision = {
        annotation_id: id,
        ...key,
        revision: expected + 1,
        event_id: `${id}@${expected + 1}`,
        ...next,
        changed,
        origin: opts.origin,
        reverted_to: opts.revertedTo ?? null,
        source: opts.source ?? null,
        changed_by: by,
        changed_at: now(),
        imported: null,
      };
      // A concurrent writer that got there first (PostgreSQL re-checks the revision) wins.
      if (!(await putHead(tx, team, revision, revision))) return conflict();
      await insertRevision(tx, team, revision);
      return { outcome: 'applied', annotation: (await read())! };
    });
  }

  async revision(team: string, annotationIdValue: string, revision: number) {
    const row = await this.db.get<Row>(
      'SELECT * FROM annotation_revisions WHERE team = ? AND annotation_id = ? AND revision = ?',
      [team, annotationIdValue, revision],
    );
    return row ? toRevision(row) : undefined;
  }

  /** An item's revisions, newest first, those below `beforeRevision` when given. */
  async history(team: string, id: string, f: { beforeRevision?: number; limit: number }) {
    const rows = await this.db.all<Row>(
      `SELECT * FROM annotation_revisions WHERE team = ? AND annotation_id = ? AND revision < ?
        ORDER BY revision DESC LIMIT ?`,
      [team, id, f.beforeRevision ?? 2_000_000_000, f.limit],
    );
    return rows.map(toRevision);
  }

  /** The team's annotations on an artifact, newest first. */
  async list(
    team: string,
    f: { artifact: string; kind?: AnnotationKind; tag?: string; cursor?: string; limit: number },
  ): Promise<Page<Annotation>> {
    const where = ['team = ?', 'artifact = ?'];
    const args: unknown[] = [team, f.artifact];
    const filter = (clause: string, value: unknown) => {
      where.push(clause);
      args.push(value);
    };
    if (f.kind) filter('kind = ?', f.kind);
    // Tags are JSON lists of [A-Za-z0-9._:/-]: `_` is LIKE's one wildcard, so it is escaped.
    if (f.tag) filter("tags LIKE ? ESCAPE '!'", `%${JSON.stringify(f.tag).replace(/_/g, '!_')}%`);
    return pageBy(this.db, 'annotations', where, args, f, 'annotation_id', toAnnotation, (a) => [
      a.created_at,
      a.annotation_id,
    ]);
  }

  /** The team's log of annotation changes, newest first (one artifact's, or every one's). */
  async events(
    team: string,
    f: { artifact?: string; cursor?: string; limit: number },
  ): Promise<Page<AnnotationRevision>> {
    const where = ['team = ?'];
    const args: unknown[] = [team];
    if (f.artifact) {
      where.push('artifact = ?');
      args.push(f.artifact);
    }
    return pageBy(this.db, 'annotation_revisions', where, args, f, 'event_id', toRevision, (r) => [
      r.changed_at,
      r.event_id,
    ]);
  }

  /** Every annotation of these artifacts with its whole history, for a bundle. */
  async carried(team: string, artifacts: string[]): Promise<CarriedAnnotation[]> {
    const out: CarriedAnnotation[] = [];
    for (const artifact of [...new Set(artifacts)].sort()) {
      const rows = await this.db.all<Row>(
        'SELECT * FROM annotation_revisions WHERE team = ? AND artifact = ? ORDER BY annotation_id, revision',
        [team, artifact],
      );
      // Carried as made: who imported it here is this store's business.
      for (const r of rows.map((row) => ({ ...toRevision(row), imported: null }))) {
        const last = out[out.length - 1];
        if (last?.annotation_id === r.annotation_id) last.revisions.push(r);
        else
          out.push({ annotation_id: r.annotation_id, artifact, kind: r.kind, item: r.item, revisions: [r] });
      }
    }
    return out;
  }

  /**
   * Brings carried histories into the team's store: an item the store lacks
   * arrives whole; one whose history the bundle continues gains the rest; one
   * whose history went another way here is left as it is (diverged).
   */
  importCarried(team: string, by: string, items: CarriedAnnotation[]) {
    return this.db.transaction((tx) => this.importCarriedIn(tx, team, by, items));
  }

  /** importCarried within the caller's transaction (a bundle's import, beside its Evidence). */
  async importCarriedIn(tx: SqlExecutor, team: string, by: string, items: CarriedAnnotation[]) {
    const counts = { created: 0, extended: 0, unchanged: 0, diverged: [] as string[] };
    const imported = { by, at: now() };
    for (const item of items) {
      const local = (
        await tx.all<Row>(
          'SELECT * FROM annotation_revisions WHERE team = ? AND annotation_id = ? ORDER BY revision',
          [team, item.annotation_id],
        )
      ).map(toRevision);
      const shared = Math.min(local.length, item.revisions.length);
      if (!local.slice(0, shared).every((r, i) => sameEvent(r, item.revisions[i]!))) {
        counts.diverged.push(item.annotation_id);
        continue;
      }
      // Here already, or here with more: nothing to bring.
      const rest = item.revisions.slice(local.length);
      if (!rest.length) {
        counts.unchanged++;
        continue;
      }
      // A writer here that got there first (PostgreSQL re-checks the revision) made the history go
      // another way: what is brought up to there stays, the rest is not brought.
      let moved = true;
      for (const r of rest) {
        if (!(await putHead(tx, team, r, item.revisions[0]!))) {
          moved = false;
          break;
        }
        await insertRevision(tx, team, { ...r, imported });
      }
      if (!moved) counts.diverged.push(item.annotation_id);
      else if (local.length) counts.extended++;
      else counts.created++;
    }
    return counts;
  }
}
