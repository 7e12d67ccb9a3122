// API tokens: 256 random bits, kept only as SHA-256 hashes, so a leaked
// database does not leak a usable token.
import { randomBytes } from 'node:crypto';
import { sha256Hex } from '../domain/canonical.ts';
import type { Principal, Role } from '../domain/types.ts';
import { now, type Row } from './rows.ts';
import type { SqlExecutor } from './sql.ts';

export const TOKEN_PREFIX = 'dsr_';
export const ROLES: readonly Role[] = ['viewer', 'operator', 'admin'];

export function newToken(): string {
  return TOKEN_PREFIX + randomBytes(32).toString('base64url');
}

export function hashToken(token: string): string {
  return sha256Hex(token);
}

export interface TokenInfo extends Principal {
  id: string;
  label: string | null;
  created_at: string;
  revoked_at: string | null;
}

export class TokenStore {
  constructor(private readonly db: SqlExecutor) {}

  /**
   * Creates a token for a principal (with the toolsets its connections list
   * by default, if given); the plain token is returned once and only its hash is kept.
   */
  async create(p: Principal, label?: string): Promise<string> {
    const token = newToken();
    await this.db.run(
      'INSERT INTO tokens (token_hash, principal, team, role, label, created_at, toolsets) VALUES (?, ?, ?, ?, ?, ?, ?)',
      [hashToken(token), p.principal, p.team, p.role, label ?? null, now(), p.toolsets?.join(',') ?? null],
    );
    return token;
  }

  async resolve(token: string): Promise<Principal | undefined> {
    const r = await this.db.get<Row>(
      'SELECT principal, team, role, toolsets FROM tokens WHERE token_hash = ? AND revoked_at IS NULL',
      [hashToken(token)],
    );
    return r && toPrincipal(r);
  }

  /**
   * The principal of `token`, whether `session.id` is a live session of that
   * principal (not closed, seen since `session.liveSince`), and the toolsets
   * that session lists (another replica may have enabled more): what every
   * request of an MCP session asks, in one statement.
   */
  async resolveInSession(
    token: string,
    session: { id: string; liveSince: number },
  ): Promise<{ principal: Principal; sessionLive: boolean; sessionToolsets?: string[] } | undefined> {
    const r = await this.db.get<Row>(
      `SELECT t.principal, t.team, t.role, t.toolsets, s.id AS session_id, s.toolsets AS session_toolsets
       FROM tokens t LEFT JOIN mcp_sessions s ON s.id = ? AND s.team = t.team
         AND s.principal = t.principal AND s.last_seen_at >= ?
       WHERE t.token_hash = ? AND t.revoked_at IS NULL`,
      [session.id, session.liveSince, hashToken(token)],
    );
    if (!r) return undefined;
    const sessionToolsets = splitList(r.session_toolsets);
    return {
      principal: toPrincipal(r),
      sessionLive: r.session_id !== null && r.session_id !== undefined,
      ...(sessionToolsets ? { sessionToolsets } : {}),
    };
  }

  /** Tokens as their id (the first 12 hex digits of the hash), never the token itself. */
  async list(team?: string): Promise<TokenInfo[]> {
    const rows = await this.db.all<Row>(
      `SELECT * FROM tokens ${team ? 'WHERE team = ?' : ''} ORDER BY created_at, token_hash`,
      team ? [team] : [],
    );
    return rows.map((r) => ({
      id: (r.token_hash as string).slice(0, 12),
      principal: r.principal as string,
      team: r.team as string,
      role: r.role as Role,
      ...(splitList(r.toolsets) ? { toolsets: splitList(r.toolsets) } : {}),
      label: (r.label as string | null) ?? null,
      created_at: r.created_at as string,
      revoked_at: (r.revoked_at as string | null) ?? null,
    }));
  }

  /** Revokes the live tokens whose id starts with `idPrefix` (at least 8 hex digits); returns how many. */
  async revoke(idPrefix: string): Promise<number> {
    if (!/^[0-9a-f]{8,64}$/.test(idPrefix))
      throw new Error('a token id is 8 to 64 hex digits (see `dossier token list`)');
    const info = await this.db.run(
      'UPDATE tokens SET revoked_at = ? WHERE token_hash LIKE ? AND revoked_at IS NULL',
      [now(), `${idPrefix}%`],
    );
    return info.changes;
  }
}

/** A comma-separated list column; undefined when empty or NULL. */
export function splitList(value: unknown): string[] | undefined {
  const items = typeof value === 'string' ? value.split(',').filter(Boolean) : [];
  return items.length ? items : undefined;
}

function toPrincipal(r: Row): Principal {
  const toolsets = splitList(r.toolsets);
  return {
    principal: r.principal as string,
    team: r.team as string,
    role: r.role as Role,
    ...(toolsets ? { toolsets } : {}),
  };
}
