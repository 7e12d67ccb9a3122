// What gateway replicas share about their callers: MCP sessions (so a client
// whose replica went away continues on another with the same session, and a
// principal's session cap holds across replicas) and rate buckets (so a
// principal's rate holds across replicas). Times are epoch milliseconds.
import type { Row } from './rows.ts';
import type { SqlDriver, SqlExecutor } from './sql.ts';

export interface SessionRecord {
  id: string;
  team: string;
  principal: string;
  /** The client's initialize request params (protocol version, capabilities, client info), as JSON. */
  init: string;
  /** The toolsets the session lists (comma-separated), as chosen at initialize or enabled since. */
  toolsets: string | null;
  created_at: number;
  last_seen_at: number;
}

export interface Owner {
  team: string;
  principal: string;
}

/** Serializes writers of one principal's rows across processes (SQLite serializes all writers already). */
async function lockOwner(db: SqlDriver, tx: SqlExecutor, key: string) {
  if (db.dialect === 'postgres') await tx.run('SELECT pg_advisory_xact_lock(hashtext(?))', [key]);
}

export class SessionStore {
  constructor(private readonly db: SqlDriver) {}

  /**
   * Records a new session of `owner` and closes its least recently used ones
   * beyond `cap` (live ones: seen since `liveSince`); returns the ids closed,
   * wherever they were opened.
   */
  async open(
    s: Owner & { id: string; init: string; toolsets?: readonly string[] },
    cap: number,
    liveSince: number,
    at = Date.now(),
  ): Promise<string[]> {
    return this.db.transaction(async (tx) => {
      await lockOwner(this.db, tx, `session:${s.team}/${s.principal}`);
      await tx.run(
        `INSERT INTO mcp_sessions (id, team, principal, init, created_at, last_seen_at, toolsets)
         VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
        [s.id, s.team, s.principal, s.init, at, at, s.toolsets?.join(',') ?? null],
      );
      const live = await tx.all<Row>(
        `SELECT id FROM mcp_sessions WHERE team = ? AND principal = ? AND last_seen_at >= ?
         ORDER BY last_seen_at DESC, created_at DESC, id`,
        [s.team, s.principal, liveSince],
      );
      // The new session always stays: replicas' clocks differ, and it must not close itself.
      const over = live
        .filter((r) => r.id !== s.id)
        .slice(Math.max(0, cap - 1))
        .map((r) => r.id as string);
      for (const id of over) await tx.run('DELETE FROM mcp_sessions WHERE id = ?', [id]);
      return over;
    });
  }

  /** Whether `id` is a live session of `owner`: not closed, not expired, not another's. */
  async isLive(id: string, owner: Owner, liveSince: number): Promise<boolean> {
    const row = await this.db.get<Row>(
      'SELECT 1 AS live FROM mcp_sessions WHERE id = ? AND team = ? AND principal = ? AND last_seen_at >= ?',
      [id, owner.team, owner.principal, liveSince],
    );
    return row !== undefined;
  }

  /**
   * Records when each session was last seen, all in one statement (one
   * transaction on SQLite). A session closed meanwhile stays closed, one that
   * was no longer live when it was seen (idle over `idleMs`) stays expired,
   * and no mark moves a time back.
   */
  async markSeen(marks: (Owner & { id: string; at: number })[], idleMs: number): Promise<void> {
    if (marks.length === 0) return;
    // One order for every writer, so two replicas' writes of the same rows never wait in a cycle.
    const sorted = [...marks].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    if (this.db.dialect === 'postgres') {
      await this.db.run(
        `UPDATE mcp_sessions AS s SET last_seen_at = v.at
         FROM (SELECT * FROM unnest(?::text[], ?::text[], ?::text[], ?::bigint[]) AS u(id, team, principal, at)
               ORDER BY id) AS v
         WHERE s.id = v.id AND s.team = v.team AND s.principal = v.principal
           AND s.last_seen_at >= v.at - ? AND s.last_seen_at < v.at`,
        [
          sorted.map((m) => m.id),
          sorted.map((m) => m.team),
          sorted.map((m) => m.principal),
          sorted.map((m) => m.at),
          idleMs,
        ],
      );
      return;
    }
    await this.db.transaction(async (tx) => {
      for (const m of sorted)
        await tx.run(
          `UPDATE mcp_sessions SET last_seen_at = ?
           WHERE id = ? AND team = ? AND principal = ? AND last_seen_at >= ? AND last_seen_at < ?`,
          [m.at, m.id, m.team, m.principal, m.at - idleMs, m.at],
        );
    });
  }

  /** The live session `id` of `owner`, with what its client said at initialize (to resume it). */
  async get(id: string, owner: Owner, liveSince: number): Promise<SessionRecord | undefined> {
    const row = await this.db.get<Row>(
      'SELECT * FROM mcp_sessions WHERE id = ? AND team = ? AND principal = ? AND last_seen_at >= ?',
      [id, owner.team, owner.principal, liveSince],
    );
    return row && toSession(row);
  }

  /** Records the toolsets session `id` of `owner` lists now; false when it is no longer recorded. */
  async setToolsets(id: string, owner: Owner, toolsets: readonly string[]): Promise<boolean> {
    const { changes } = await this.db.run(
      'UPDATE mcp_sessions SET toolsets = ? WHERE id = ? AND team = ? AND principal = ?',
      [toolsets.join(','), id, owner.team, owner.principal],
    );
    return changes > 0;
  }

  async close(id: string): Promise<void> {
    await this.db.run('DELETE FROM mcp_sessions WHERE id = ?', [id]);
  }

  /** Forgets sessions not seen since `liveSince`; how many. */
  async sweep(liveSince: number): Promise<number> {
    return (await this.db.run('DELETE FROM mcp_sessions WHERE last_seen_at < ?', [liveSince])).changes;
  }
}

function toSession(r: Row): SessionRecord {
  return {
    id: r.id as string,
    team: r.team as string,
    principal: r.principal as string,
    init: r.init as string,
    toolsets: (r.toolsets as string | null) ?? null,
    created_at: Number(r.created_at),
    last_seen_at: Number(r.last_seen_at),
  };
}

export class RateBucketStore {
  constructor(private readonly db: SqlDriver) {}

  /**
   * Takes up to `want` calls from the shared bucket `key`, which refills at
   * `perMinute` a minute up to `perMinute`. Returns how many were granted
   * (0 to `want`) and, when none was, how long until one is.
   */
  async take(
    key: string,
    want: number,
    perMinute: number,
    at = Date.now(),
  ): Promise<{ granted: number; waitMs: number }> {
    const rate = perMinute / 60_000;
    return this.db.transaction(async (tx) => {
      await lockOwner(this.db, tx, `rate:${key}`);
      const row = await tx.get<Row>('SELECT tokens, at_ms FROM rate_buckets WHERE key = ?', [key]);
      const before = row ? Number(row.tokens) : perMinute;
      const since = row ? Math.max(0, at - Number(row.at_ms)) : 0;
      const available = Math.min(perMinute, before + since * rate);
      const granted = Math.max(0, Math.min(want, Math.floor(available)));
      await tx.run(
        `INSERT INTO rate_buckets (key, tokens, at_ms) VALUES (?, ?, ?)
         ON CONFLICT (key) DO UPDATE SET tokens = excluded.tokens, at_ms = excluded.at_ms`,
        // Never back in time: replicas' clocks differ a little.
        [key, available - granted, Math.max(at, row ? Number(row.at_ms) : at)],
      );
      return { granted, waitMs: granted > 0 ? 0 : Math.ceil((1 - available) / rate) };
    });
  }
}
