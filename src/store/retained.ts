// What finished launches keep on a host's disk, by team: a launch's workspace
// (kept DOSSIER_WORKSPACE_RETENTION_HOURS) and an extraction's output (kept
// until reclaimed). Each row is one folder on one DOSSIER_HOME (`home`, the id
// of that disk), so a worker sums its team's bytes on its own disk and
// reclaims the oldest first. A reclaim is claimed by one statement, so workers
// sharing a home never remove a folder twice; a reclaimed output keeps its row
// (reclaimed_at set), which is how a later reader learns what happened to it.
import { DossierError, type ErrorCode } from '../domain/errors.ts';
import type { Row } from './rows.ts';
import type { SqlDriver } from './sql.ts';

export type RetainedKind = 'workspace' | 'output';

export interface RetainedFolder {
  path: string;
  kind: RetainedKind;
  bytes: number;
  retained_at: string;
}

const toFolder = (r: Row): RetainedFolder => ({
  path: r.path as string,
  kind: r.kind as RetainedKind,
  bytes: Number(r.bytes),
  retained_at: r.retained_at as string,
});

export class RetainedStore {
  constructor(private readonly db: SqlDriver) {}

  /** Records folders a finished launch of `team` leaves on `home`. */
  async record(home: string, team: string, launch: string, folders: RetainedFolder[]): Promise<void> {
    for (const f of folders) {
      await this.db.run(
        `INSERT INTO retained_disk (home, path, team, kind, launch, bytes, retained_at)
         VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
        [home, f.path, team, f.kind, launch, f.bytes, f.retained_at],
      );
    }
  }

  /** Bytes the team's folders still hold on `home`. */
  async total(home: string, team: string): Promise<number> {
    const row = await this.db.get<Row>(
      'SELECT COALESCE(SUM(bytes), 0) AS bytes FROM retained_disk WHERE home = ? AND team = ? AND reclaimed_at IS NULL',
      [home, team],
    );
    return Number(row?.bytes ?? 0);
  }

  /** The team's folders on `home` still on disk, oldest first. */
  async oldest(home: string, team: string, limit: number): Promise<RetainedFolder[]> {
    const rows = await this.db.all<Row>(
      `SELECT path, kind, bytes, retained_at FROM retained_disk
       WHERE home = ? AND team = ? AND reclaimed_at IS NULL ORDER BY retained_at, path LIMIT ?`,
      [home, team, limit],
    );
    return rows.map(toFolder);
  }

  /** Claims a folder for reclaiming: true for the one caller that may remove it. */
  async claim(home: string, path: string, at: string): Promise<boolean> {
    const { changes } = await this.db.run(
      'UPDATE retained_disk SET reclaimed_at = ? WHERE home = ? AND path = ? AND reclaimed_at IS NULL',
      [at, home, path],
    );
    return changes === 1;
  }

  /** Forgets a folder that is gone (its workspace's retention passed, or it was reclaimed and needs no marker). */
  async forget(home: string, path: string): Promise<void> {
    await this.db.run('DELETE FROM retained_disk WHERE home = ? AND path = ?', [home, path]);
  }

  /** Folders of `kind` on `home` still counted: for the hourly check that they are still there. */
  async held(home: string, kind: RetainedKind): Promise<RetainedFolder[]> {
    const rows = await this.db.all<Row>(
      'SELECT path, kind, bytes, retained_at FROM retained_disk WHERE home = ? AND kind = ? AND reclaimed_at IS NULL',
      [home, kind],
    );
    return rows.map(toFolder);
  }

  /** Folders on `home` claimed for reclaiming since `since` (a worker that died removing one left it). */
  async reclaimedSince(home: string, since: string): Promise<RetainedFolder[]> {
    const rows = await this.db.all<Row>(
      'SELECT path, kind, bytes, retained_at FROM retained_disk WHERE home = ? AND reclaimed_at >= ?',
      [home, since],
    );
    return rows.map(toFolder);
  }

  /**
   * When one of `paths` (an extraction output, or a folder that may be inside
   * one) was reclaimed for the team, on any host; undefined when none was.
   */
  async reclaimed(
    team: string,
    paths: string[],
  ): Promise<{ path: string; reclaimed_at: string } | undefined> {
    if (paths.length === 0) return undefined;
    const row = await this.db.get<Row>(
      `SELECT path, reclaimed_at FROM retained_disk
       WHERE team = ? AND kind = 'output' AND reclaimed_at IS NOT NULL AND path IN (${paths.map(() => '?').join(', ')})`,
      [team, ...paths],
    );
    return row ? { path: row.path as string, reclaimed_at: row.reclaimed_at as string } : undefined;
  }
}

/** What a reader of a reclaimed extraction output answers: what happened, and that the Evidence still holds the listing. */
export function outputReclaimed(
  evidenceId: string,
  reclaimedAt: string,
  opts: { code?: ErrorCode; subject?: string; details?: Record<string, unknown> } = {},
): DossierError {
  return new DossierError(
    opts.code ?? 'not_found',
    `${opts.subject ?? `The output of extraction ${evidenceId}`} was reclaimed at ${reclaimedAt}: your team's finished launches kept more than DOSSIER_TEAM_WORKSPACE_BYTES on the worker that ran it, and the oldest go first. Its Evidence is unchanged: it still lists every entry with its size and SHA-256.`,
    "Page the Evidence's entries with inspect_analysis_view. To have the files again, extract the artifact again with a new idempotency_key and use the new Evidence (or ask an admin to raise DOSSIER_TEAM_WORKSPACE_BYTES).",
    { evidence_id: evidenceId, reason: 'reclaimed', reclaimed_at: reclaimedAt, ...opts.details },
    false,
  );
}
