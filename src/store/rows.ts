// What every aggregate of the store shares: row values to and from SQL, bulk
// inserts within the parameter limits, team-scoped filters and keyset paging
// with opaque cursors.
import { sha256Hex } from '../domain/canonical.ts';
import { DossierError } from '../domain/errors.ts';
import type { Page } from '../domain/types.ts';
import type { SqlExecutor } from './sql.ts';

export type Row = Record<string, unknown>;

export const now = () => new Date().toISOString();
export const json = (v: unknown) => (v === null || v === undefined ? null : JSON.stringify(v));
export const parse = <T>(v: unknown): T | null => (typeof v === 'string' ? (JSON.parse(v) as T) : null);

/** Parameters per multi-row INSERT: SQLite binds at most 32,766, PostgreSQL 65,535. */
export const CHUNK = { sqlite: 2_000, postgres: 30_000 };

export async function insertMany(
  tx: SqlExecutor,
  head: string,
  width: number,
  rows: unknown[][],
  chunk: number,
  tail = '',
) {
  const per = Math.max(1, Math.floor(chunk / width));
  for (let i = 0; i < rows.length; i += per) {
    const slice = rows.slice(i, i + per);
    const tuple = `(${new Array(width).fill('?').join(', ')})`;
    await tx.run(`${head} VALUES ${slice.map(() => tuple).join(', ')} ${tail}`, slice.flat());
  }
}

/** `team = ?` plus `column = ?` for every filter that is set. */
export function teamFilter(team: string, filters: [column: string, value: unknown][]) {
  const where = ['team = ?'];
  const args: unknown[] = [team];
  for (const [column, value] of filters) {
    if (value === undefined || value === null || value === '') continue;
    where.push(`${column} = ?`);
    args.push(value);
  }
  return { where, args };
}

/** Keyset paging, newest first, over (created_at, tiebreak). */
export async function pageBy<T>(
  db: SqlExecutor,
  table: string,
  where: string[],
  args: unknown[],
  f: { cursor?: string; limit: number },
  tiebreak: string,
  map: (r: Row) => T,
  cursorOf: (item: T) => (string | number)[],
): Promise<Page<T>> {
  // A cursor continues the list and filter that issued it, and no other: it carries their digest.
  const scope = sha256Hex(`${table}\n${where.join(' AND ')}\n${JSON.stringify(args)}`).slice(0, 16);
  const cursor = decodeCursor(f.cursor, scope);
  if (cursor) {
    where.push(`(created_at, ${tiebreak}) < (?, ?)`);
    args.push(cursor[0], cursor[1]);
  }
  const rows = await db.all<Row>(
    `SELECT * FROM ${table} WHERE ${where.join(' AND ')} ORDER BY created_at DESC, ${tiebreak} DESC LIMIT ?`,
    [...args, f.limit + 1],
  );
  const items = rows.slice(0, f.limit).map(map);
  const last = items[items.length - 1];
  return {
    items,
    nextCursor: rows.length > f.limit && last ? encodeCursor([...cursorOf(last), scope]) : null,
    cursorAfter: (i) => encodeCursor([...cursorOf(items[i]!), scope]),
  };
}

export function encodeCursor(parts: (string | number)[]): string {
  return Buffer.from(JSON.stringify(parts)).toString('base64url');
}

/**
 * The keyset a cursor of the list `scope` names; undefined for no cursor; throws for a cursor that
 * is not one of ours, or one of another list or filter.
 */
export function decodeCursor(cursor: string | undefined, scope: string): (string | number)[] | undefined {
  if (!cursor) return undefined;
  let parts: unknown;
  try {
    parts = JSON.parse(Buffer.from(cursor, 'base64url').toString()) as unknown;
  } catch {
    parts = undefined;
  }
  if (Array.isArray(parts) && parts.length === 3 && typeof parts[2] === 'string' && parts[2] !== scope) {
    throw new DossierError(
      'invalid_params',
      'The cursor continues another list or another filter than this call asks for.',
      'Pass next_cursor only to the same list with the same filters, or omit cursor to start from the first page.',
    );
  }
  if (
    Array.isArray(parts) &&
    parts.length === 3 &&
    parts[2] === scope &&
    parts.every(
      (p) =>
        (typeof p === 'string' && p.length <= 1_024 && !p.includes('\u0000')) ||
        (typeof p === 'number' && Number.isSafeInteger(p)),
    )
  )
    return parts.slice(0, 2) as (string | number)[];
  throw new DossierError(
    'invalid_params',
    'The cursor is not one this server issued.',
    'Pass the next_cursor value from the previous page unchanged, or omit cursor to start from the first page.',
  );
}
