// Artifact records per team (the bytes live in the content-addressed folder,
// src/evidence/artifacts.ts).
import type { ArtifactRecord, Page } from '../domain/types.ts';
import { pageBy, teamFilter, type Row } from './rows.ts';
import { addCandidates } from './candidates.ts';
import type { SqlExecutor } from './sql.ts';

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
    provenance:
      r.parent_evidence == null
        ? null
        : {
            parent_artifact: (r.parent_artifact as string | null) ?? null,
            evidence_id: r.parent_evidence as string,
            path: r.parent_path as string,
          },
  };
}

export class ArtifactStore {
  constructor(private readonly db: SqlExecutor) {}

  /** Records an artifact for a team; a second registration of the same digest keeps the first record. */
  async put(team: string, a: ArtifactRecord): Promise<{ created: boolean; artifact: ArtifactRecord }> {
    const info = await this.db.run(
      `INSERT INTO artifacts (team, digest, size, mime_type, description, name, origin, registered_by, created_at,
         parent_artifact, parent_evidence, parent_path)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
      [
        team,
        a.digest,
        a.size,
        a.mime_type,
        a.description,
        a.name,
        a.origin,
        a.registered_by,
        a.created_at,
        a.provenance?.parent_artifact ?? null,
        a.provenance?.evidence_id ?? null,
        a.provenance?.path ?? null,
      ],
    );
    if (info.changes === 1) await addCandidates(this.db, team, [['artifact', '', a.digest]]);
    return { created: info.changes === 1, artifact: (await this.get(team, a.digest))! };
  }

  async get(team: string, digest: string): Promise<ArtifactRecord | undefined> {
    const r = await this.db.get<Row>('SELECT * FROM artifacts WHERE team = ? AND digest = ?', [team, digest]);
    return r ? toArtifact(r) : undefined;
  }

  async list(team: string, f: { cursor?: string; limit: number }): Promise<Page<ArtifactRecord>> {
    const { where, args } = teamFilter(team, []);
    return pageBy(this.db, 'artifacts', where, args, f, 'digest', toArtifact, (a) => [
      a.created_at,
      a.digest,
    ]);
  }
}
