// API tokens and opaque cursors. Tokens carry 256 random bits and are kept
// only as SHA-256 hashes; a leaked database does not leak a usable token.
import { randomBytes } from 'node:crypto';
import { sha256Hex } from '../domain/canonical.ts';
import { DossierError } from '../domain/errors.ts';

export const TOKEN_PREFIX = 'dsr_';

export function newToken(): string {
  return TOKEN_PREFIX + randomBytes(32).toString('base64url');
}

export function hashToken(token: string): string {
  return sha256Hex(token);
}

export function encodeCursor(parts: (string | number)[]): string {
  return Buffer.from(JSON.stringify(parts)).toString('base64url');
}

/** Returns undefined for no cursor; throws for a cursor that is not one of ours. */
export function decodeCursor(cursor: string | undefined): (string | number)[] | undefined {
  if (!cursor) return undefined;
  try {
    const parts = JSON.parse(Buffer.from(cursor, 'base64url').toString()) as unknown;
    if (Array.isArray(parts) && parts.every((p) => typeof p === 'string' || typeof p === 'number'))
      return parts;
  } catch {
    // fall through to the error below
  }
  throw new DossierError(
    'invalid_params',
    'The cursor is not one this server issued.',
    'Pass the next_cursor value from the previous page unchanged, or omit cursor to start from the first page.',
  );
}
