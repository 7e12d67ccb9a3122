// Content-addressed bytes in the store, so that gateways and workers on
// different hosts share artifacts without a shared folder. A blob is its
// SHA-256 and its bytes in 1 MiB chunks; the `blobs` row is written last, in
// the same transaction, so a blob is either whole or absent. Readers verify
// the digest of what they read (src/evidence/artifacts.ts); the store is
// trusted no more than a folder is. Knowing a digest is no key to its bytes:
// a team reaches a blob only through its own artifact records, or as one of
// the blob's owners (the teams that published it).
import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream, statSync } from 'node:fs';
import { pipeline } from 'node:stream/promises';
import { DossierError } from '../domain/errors.ts';
import type { Row } from './rows.ts';
import type { SqlDriver } from './sql.ts';

export const BLOB_CHUNK_BYTES = 1024 * 1024;
const PUBLISHES_AT_ONCE = 2;

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

  /** Bytes one team may publish (the sum over the blobs it owns); the embedded default is 100 GiB. */
  quotaBytesPerTeam = 100 * 1024 ** 3;

  // Each publish holds a pooled connection for its whole file: a few at once, so the pool stays
  // free for everything else (tokens, launches, every team's calls).
  private publishing = 0;
  private readonly queue: (() => void)[] = [];

  private async slot<T>(fn: () => Promise<T>): Promise<T> {
    while (this.publishing >= PUBLISHES_AT_ONCE) await new Promise<void>((r) => this.queue.push(r));
    this.publishing++;
    try {
      return await fn();
    } finally {
      this.publishing--;
      this.queue.shift()?.();
    }
  }

  /** The size of a whole blob, or undefined. */
  async sizeOf(digest: string): Promise<number | undefined> {
    const row = await this.db.get<Row>('SELECT size FROM blobs WHERE digest = ?', [digest]);
    return row ? Number(row.size) : undefined;
  }

  /**
   * Publishes the bytes of `file` as the blob `digest` unless they are there,
   * proving them against the digest as they are written (a file that changed
   * since it was hashed is refused), and records `team` among its owners, in
   * one transaction: a blob is whole or absent, and owned only if present.
   * Refused with resource_constraint past the team's quota.
   */
  async put(digest: string, file: string, team?: string): Promise<void> {
    const owned = async () => (team ? this.ownedBy(digest, team) : this.has(digest));
    if (await owned()) return;
    await this.slot(() =>
      this.db.transaction(async (tx) => {
        // Two hosts publishing the same digest take turns; the second finds the first's blob.
        if (this.db.dialect === 'postgres')
          await tx.run('SELECT pg_advisory_xact_lock(hashtext(?))', [digest]);
        const present = await tx.get<Row>('SELECT size FROM blobs WHERE digest = ?', [digest]);
        const size = present ? Number(present.size) : statSync(file).size;
        if (team) {
          const mine = await tx.get<Row>('SELECT 1 AS one FROM blob_owners WHERE digest = ? AND team = ?', [
            digest,
            team,
          ]);
          if (mine) return;
          const used = await tx.get<Row>(
            'SELECT COALESCE(SUM(bytes), 0) AS used FROM blob_owners WHERE team = ?',
            [team],
          );
          if (Number(used?.used ?? 0) + size > this.quotaBytesPerTeam) {
            throw new DossierError(
              'resource_constraint',
              `Your team's shared storage is full: ${Number(used?.used ?? 0)} of ${this.quotaBytesPerTeam} bytes are used, and this needs ${size} more.`,
              'Ask an admin to raise DOSSIER_SHARED_BYTES_PER_TEAM.',
              { used: Number(used?.used ?? 0), quota: this.quotaBytesPerTeam, needed: size },
            );
          }
        }
        if (!present) {
          await tx.run('DELETE FROM blob_chunks WHERE digest = ?', [digest]);
          const hash = createHash('sha256');
          let seq = 0;
          let written = 0;
          for await (const chunk of createReadStream(file, { highWaterMark: BLOB_CHUNK_BYTES })) {
            const bytes = chunk as Buffer;
            hash.update(bytes);
            await tx.run('INSERT INTO blob_chunks (digest, seq, data) VALUES (?, ?, ?)', [
              digest,
              seq++,
              bytes,
            ]);
            written += bytes.length;
          }
          if (`sha256:${hash.digest('hex')}` !== digest)
            throw new Error(`${file} no longer hashes to ${digest}; it was not published`);
          await tx.run('INSERT INTO blobs (digest, size, chunks, created_at) VALUES (?, ?, ?, ?)', [
            digest,
            written,
            seq,
            new Date().toISOString(),
          ]);
        }
        if (team)
          await tx.run(
            'INSERT INTO blob_owners (digest, team, bytes) VALUES (?, ?, ?) ON CONFLICT DO NOTHING',
            [digest, team, size],
          );
      }),
    );
  }

  /** Forgets a blob whose bytes did not prove out when read, so the next publish stores it again. */
  async discard(digest: string): Promise<void> {
    await this.db.transaction(async (tx) => {
      await tx.run('DELETE FROM blobs WHERE digest = ?', [digest]);
      await tx.run('DELETE FROM blob_chunks WHERE digest = ?', [digest]);
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

  /**
   * Writes the whole blob `digest` into the new file `file` (0600), chunk by
   * chunk; the sha256 of what was written (hex), for the caller to prove, or
   * undefined when the store has no such blob.
   */
  async copyTo(digest: string, file: string): Promise<string | undefined> {
    const chunks = await this.read(digest);
    if (!chunks) return undefined;
    const hash = createHash('sha256');
    await pipeline(
      chunks,
      async function* (source: AsyncIterable<Buffer>) {
        for await (const chunk of source) {
          hash.update(chunk);
          yield chunk;
        }
      },
      createWriteStream(file, { flags: 'wx', mode: 0o600 }),
    );
    return hash.digest('hex');
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
