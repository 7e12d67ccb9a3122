// Shared bytes on PostgreSQL, the store every host of a cluster reaches: whole
// or absent, read back chunk by chunk, one copy however many hosts publish it.
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  artifactPath,
  fetchOwned,
  publishOutputs,
  storeArtifactFile,
  verifyArtifact,
} from '../../src/evidence/artifacts.ts';
import { BLOB_CHUNK_BYTES } from '../../src/store/blobs.ts';
import type { Store } from '../../src/store/store.ts';
import { freshStore } from '../helpers/backends.ts';

let store: Store;
let location: string;
let close: () => Promise<void>;
let dir: string;
beforeAll(async () => {
  ({ store, location, close } = await freshStore('postgres'));
  dir = mkdtempSync(path.join(os.tmpdir(), 'dossier-blobs-'));
});
afterAll(async () => {
  await close();
  rmSync(dir, { recursive: true, force: true });
});

describe('blobs on PostgreSQL', () => {
  it('stores a file in chunks and reads back exactly its bytes; publishing it again changes nothing', async () => {
    const bytes = randomBytes(2 * BLOB_CHUNK_BYTES + 12_345);
    const file = path.join(dir, 'a.bin');
    writeFileSync(file, bytes);
    const digest = `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
    const blobs = store.blobs!;
    expect(await blobs.has(digest)).toBe(false);
    expect(await blobs.read(digest)).toBeUndefined();
    await Promise.all([blobs.put(digest, file), blobs.put(digest, file), blobs.put(digest, file)]);
    expect(await blobs.has(digest)).toBe(true);
    const parts: Buffer[] = [];
    for await (const chunk of (await blobs.read(digest))!) parts.push(chunk);
    expect(parts).toHaveLength(3);
    expect(Buffer.concat(parts).equals(bytes)).toBe(true);
  });

  it('an empty file is a blob too', async () => {
    const file = path.join(dir, 'empty');
    writeFileSync(file, '');
    const digest = `sha256:${createHash('sha256').digest('hex')}`;
    await store.blobs!.put(digest, file);
    const parts: Buffer[] = [];
    for await (const chunk of (await store.blobs!.read(digest))!) parts.push(chunk);
    expect(Buffer.concat(parts).length).toBe(0);
  });

  it('a host without the artifact fetches it, proving its digest; bytes changed in the store are refused', async () => {
    const bytes = randomBytes(300_000);
    const source = path.join(dir, 'target.bin');
    writeFileSync(source, bytes);
    const gatewayHome = path.join(dir, 'gateway');
    const stored = await storeArtifactFile(gatewayHome, source, 1 << 20, store.blobs);
    // Another host: its folder is empty, the store has the bytes.
    const workerHome = path.join(dir, 'worker');
    const file = await verifyArtifact(workerHome, stored.digest, undefined, store.blobs);
    expect(file).toBe(artifactPath(workerHome, stored.digest));
    expect(readFileSync(file).equals(bytes)).toBe(true);

    // Someone changes a chunk in the database: a third host refuses it and keeps nothing.
    const raw = new pg.Client({ connectionString: location });
    await raw.connect();
    await raw.query("UPDATE blob_chunks SET data = decode('00', 'hex') || data WHERE digest = $1", [
      stored.digest,
    ]);
    await raw.end();
    const thirdHome = path.join(dir, 'third');
    await expect(verifyArtifact(thirdHome, stored.digest, undefined, store.blobs)).rejects.toMatchObject({
      code: 'integrity_error',
    });
    expect(existsSync(artifactPath(thirdHome, stored.digest))).toBe(false);
  });

  it('an extraction’s published files reach only the team that wrote them: a digest is no key', async () => {
    const output = path.join(dir, 'out');
    mkdirSync(path.join(output, 'etc'), { recursive: true });
    writeFileSync(path.join(output, 'etc', 'shadow'), 'root:secret\n');
    const sha = createHash('sha256').update('root:secret\n').digest('hex');
    await publishOutputs(store.blobs, 'owners', output, [
      { path: 'etc/shadow', type: 'file', status: 'written', sha256: sha },
      { path: 'etc', type: 'directory', status: 'written', sha256: null },
    ]);
    // Another team that learned the digest (a crafted bundle's Evidence can name any) gets nothing.
    expect(
      await fetchOwned(path.join(dir, 'thief'), `sha256:${sha}`, 'thieves', store.blobs),
    ).toBeUndefined();
    expect(existsSync(artifactPath(path.join(dir, 'thief'), `sha256:${sha}`))).toBe(false);
    const mine = await fetchOwned(path.join(dir, 'owner-host'), `sha256:${sha}`, 'owners', store.blobs);
    expect(readFileSync(mine!, 'utf8')).toBe('root:secret\n');
  });

  it('is not kept by a SQLite store: one host, one folder', async () => {
    const local = await freshStore('sqlite');
    try {
      expect(local.store.blobs).toBeUndefined();
    } finally {
      await local.close();
    }
  });
});
