// Content-addressed bytes in the store, so that gateways and workers on
// different hosts share artifacts without a shared folder. A blob is its
// SHA-256 and its bytes in 1 MiB chunks; the `blobs` row is written last, in
// the same transaction, so a blob is either whole or absent. Readers verify
// the digest of what they read (src/evidence/artifacts.ts); the store is
// trusted no more than a folder is. Knowing a digest is no key to its bytes:
// a team reaches a blob only through its own artifact records, or as one of
// the blob's owners (the teams that published it).
import { createReadStream } from 'node:fs';
import type { Row } from './rows.ts';
import type { SqlDriver } from './sql.ts';

export const BLOB_CHUNK_BYTES = 1024 * 1024;

export interface NamedBlob {
  name: string;
  digest: string;
  bytes: number;
  created_at: string;
}

function toNamed(r: Row): NamedBlob {
  return {
    name: r.name as string,
    digest: r.digest as string,
    bytes: Number(r.bytes),
    created_at: r.created_at as string,
  };
}

export class BlobStore {
  constructor(private readonly db: SqlDriver) {}

  async has(digest: string): Promise<boolean> {
    return (await this.db.get<Row>('SELECT 1 AS one FROM blobs WHERE digest = ?', [digest])) !== undefined;
  }

  /** Whether `team` published the blob `digest` (its extraction wrote those bytes, or it stored them). */
  async ownedBy(digest: string, team: string): Promise<boolean> {
    const row = await this.db.get<Row>('SELECT 1 AS one FROM blob_owners WHERE digest = ? AND team = ?', [
      digest,
      team,
    ]);
    return row !== undefined;
  }

  /**
   * Stores the bytes of `file` (already hashed to `digest` by the caller)
   * unless they are there, and records `team` among the blob's owners.
   */
  async put(digest: string, file: string, team?: string): Promise<void> {
    if (team)
      await this.db.run('INSERT INTO blob_owners (digest, team) VALUES (?, ?) ON CONFLICT DO NOTHING', [
        digest,
        team,
      ]);
    if (await this.has(digest)) return;
    await this.db.transaction(async (tx) => {
      // Two hosts publishing the same digest take turns; the second finds the first's blob and stops.
      if (this.db.dialect === 'postgres') await tx.run('SELECT pg_advisory_xact_lock(hashtext(?))', [digest]);
      if (await tx.get<Row>('SELECT 1 AS one FROM blobs WHERE digest = ?', [digest])) return;
      await tx.run('DELETE FROM blob_chunks WHERE digest = ?', [digest]);
      let seq = 0;
      let size = 0;
      for await (const chunk of createReadStream(file, { highWaterMark: BLOB_CHUNK_BYTES })) {
        const bytes = chunk as Buffer;
        await tx.run('INSERT INTO blob_chunks (digest, seq, data) VALUES (?, ?, ?)', [digest, seq++, bytes]);
        size += bytes.length;
      }
      await tx.run(
        'INSERT INTO blobs (digest, size, chunks, created_at) VALUES (?, ?, ?, ?) ON CONFLICT (digest) DO NOTHING',
        [digest, size, seq, new Date().toISOString()],
      );
    });
  }

  /** Gives the team's blob `digest` a name of a kind (an exported bundle's file name). */
  async name(team: string, kind: string, name: string, digest: string, bytes: number): Promise<void> {
    await this.db.run(
      `INSERT INTO blob_names (team, kind, name, digest, bytes, created_at) VALUES (?, ?, ?, ?, ?, ?)
       ON CONFLICT (team, kind, name) DO NOTHING`,
      [team, kind, name, digest, bytes, new Date().toISOString()],
    );
  }

  /** The team's named blobs of a kind, newest first (at most `limit`). */
  async named(team: string, kind: string, limit: number): Promise<NamedBlob[]> {
    const rows = await this.db.all<Row>(
      'SELECT * FROM blob_names WHERE team = ? AND kind = ? ORDER BY created_at DESC, name LIMIT ?',
      [team, kind, limit],
    );
    return rows.map(toNamed);
  }

  /** One of the team's named blobs; another team's is undefined. */
  async lookup(team: string, kind: string, name: string): Promise<NamedBlob | undefined> {
    const row = await this.db.get<Row>('SELECT * FROM blob_names WHERE team = ? AND kind = ? AND name = ?', [
      team,
      kind,
      name,
    ]);
    return row && toNamed(row);
  }

  /** The chunks of a whole blob in order, one at a time; undefined when the store has none. */
  async read(digest: string): Promise<AsyncIterable<Buffer> | undefined> {
    const blob = await this.db.get<Row>('SELECT chunks FROM blobs WHERE digest = ?', [digest]);
    if (!blob) return undefined;
    const chunks = Number(blob.chunks);
    const db = this.db;
    return (async function* () {
      for (let seq = 0; seq < chunks; seq++) {
        const row = await db.get<Row>('SELECT data FROM blob_chunks WHERE digest = ? AND seq = ?', [
          digest,
          seq,
        ]);
        if (!row) throw new Error(`blob ${digest} lost its chunk ${seq}`);
        yield Buffer.from(row.data as Uint8Array);
      }
    })();
  }
}
