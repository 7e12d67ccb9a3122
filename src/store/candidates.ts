// Candidates for prompt-argument completion, from the team's live records.
import type { Row } from './rows.ts';
import type { SqlExecutor } from './sql.ts';

export type CandidateKind =
  'artifact' | 'evidence' | 'launch_key' | 'open_unknown' | 'investigation' | 'device';

export class CandidateStore {
  constructor(private readonly db: SqlExecutor) {}

  /**
   * Candidate values, newest first, at most `limit`: artifact digests, evidence
   * ids, the principal's launch keys, open unknown ids, or investigations.
   */
  async candidates(team: string, principal: string, kind: CandidateKind, limit: number): Promise<string[]> {
    const queries = {
      device: [
        "SELECT device_id AS v FROM devices WHERE team = ? AND status = 'active' ORDER BY created_at DESC LIMIT ?",
        [team, limit],
      ],
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
}
