// Candidates for prompt-argument completion: every value a team (or, for launch
// keys, a principal) may complete, written when its record is, and found by the
// prefix typed through an index (completion_candidates), so any candidate is
// reachable however old; open unknowns and active devices are checked live.
import { foldKey, prefixRange } from '../domain/fold.ts';
import { insertMany, now, type Row } from './rows.ts';
import type { SqlExecutor } from './sql.ts';

export type CandidateKind =
  'artifact' | 'evidence' | 'launch_key' | 'open_unknown' | 'investigation' | 'device';

/** What writes a candidate: its kind, the principal it belongs to ('' for the team), the value. */
export type Candidate = [kind: CandidateKind, scope: string, value: string];

/** Records candidates of `team` (a value recorded twice is one candidate). */
export async function addCandidates(tx: SqlExecutor, team: string, candidates: Candidate[]) {
  const at = now();
  const rows = candidates
    .filter(([, , value]) => value && value.length <= 4_096)
    .map(([kind, scope, value]) => [team, kind, scope, value, foldKey(value), at]);
  if (rows.length === 0) return;
  await insertMany(
    tx,
    'INSERT INTO completion_candidates (team, kind, scope, value, fkey, created_at)',
    6,
    rows,
    2_000,
    'ON CONFLICT DO NOTHING',
  );
}

const LIVE: Partial<Record<CandidateKind, string>> = {
  open_unknown:
    "AND EXISTS (SELECT 1 FROM unknowns u WHERE u.team = c.team AND u.unknown_id = c.value AND u.status = 'open')",
  device:
    "AND EXISTS (SELECT 1 FROM devices d WHERE d.team = c.team AND d.device_id = c.value AND d.status = 'active')",
};

export class CandidateStore {
  constructor(private readonly db: SqlExecutor) {}

  /**
   * Candidates that start with `typed` (folded), in folded order, at most
   * `limit`: artifact digests, evidence ids, the principal's launch keys, open
   * unknown ids, investigations, active device ids.
   */
  async candidates(
    team: string,
    principal: string,
    kind: CandidateKind,
    typed: string,
    limit: number,
  ): Promise<string[]> {
    const [low, high] = prefixRange(typed);
    const rows = await this.db.all<Row>(
      `SELECT c.value AS v FROM completion_candidates c
       WHERE c.team = ? AND c.kind = ? AND c.scope = ? AND c.fkey >= ? AND c.fkey < ? ${LIVE[kind] ?? ''}
       ORDER BY c.fkey LIMIT ?`,
      [team, kind, kind === 'launch_key' ? principal : '', low, high, limit],
    );
    return rows.map((r) => r.v as string);
  }
}
