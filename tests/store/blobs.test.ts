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

    // The damaged blob is forgotten; storing the bytes again from a trusted copy heals every host.
    expect(await store.blobs!.has(stored.digest)).toBe(false);
    await storeArtifactFile(path.join(dir, 'healer'), source, 1 << 20, store.blobs);
    const healed = await verifyArtifact(path.join(dir, 'fourth'), stored.digest, undefined, store.blobs);
    expect(readFileSync(healed).equals(bytes)).toBe(true);
  });

  it('refuses to publish a file that no longer hashes to its digest', async () => {
    const file = path.join(dir, 'changed.bin');
    writeFileSync(file, 'after');
    const claimed = `sha256:${createHash('sha256').update('before').digest('hex')}`;
    await expect(store.blobs!.put(claimed, file, 'owners')).rejects.toThrow(/no longer hashes/);
    expect(await store.blobs!.has(claimed)).toBe(false);
    expect(await store.blobs!.ownedBy(claimed, 'owners')).toBe(false);
  });

  it('holds each team to its quota of shared bytes; what it owns already costs nothing again', async () => {
    const blobs = store.blobs!;
    const before = blobs.quotaBytesPerTeam;
    blobs.quotaBytesPerTeam = 1_000;
    try {
      const put = (name: string, bytes: number, team: string) => {
        const file = path.join(dir, name);
        writeFileSync(file, Buffer.alloc(bytes, name));
        const digest = `sha256:${createHash('sha256').update(Buffer.alloc(bytes, name)).digest('hex')}`;
        return blobs.put(digest, file, team).then(() => digest);
      };
      const first = await put('q1', 600, 'quota-team');
      await blobs.put(first, path.join(dir, 'q1'), 'quota-team'); // owned already
      await expect(put('q2', 600, 'quota-team')).rejects.toMatchObject({ code: 'resource_constraint' });
      // Another team's quota is its own, even for the same bytes.
      await put('q1', 600, 'other-quota-team');
      expect(await blobs.ownedBy(first, 'other-quota-team')).toBe(true);
    } finally {
      blobs.quotaBytesPerTeam = before;
    }
  });

  it('an extraction cancelled while it publishes says so, never succeeded', async () => {
    const output = path.join(dir, 'out-cancel');
    mkdirSync(output, { recursive: true });
    writeFileSync(path.join(output, 'a'), 'a');
    const aborted = AbortSignal.abort();
    await expect(
      publishOutputs(
        store.blobs,
        'owners',
        output,
        [
          {
            path: 'a',
            type: 'file',
            status: 'written',
            sha256: createHash('sha256').update('a').digest('hex'),
          },
        ],
        aborted,
      ),
    ).rejects.toMatchObject({ code: 'cancelled' });
    // Nothing is left behind that no record names.
    expect(existsSync(output)).toBe(false);
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
      await fetchOwned(path.join(dir, 'thief'), `sha256:${sha}`, 'thieves', store.blobs, 1 << 20),
    ).toBeUndefined();
    expect(existsSync(artifactPath(path.join(dir, 'thief'), `sha256:${sha}`))).toBe(false);
    const mine = await fetchOwned(
      path.join(dir, 'owner-host'),
      `sha256:${sha}`,
      'owners',
      store.blobs,
      1 << 20,
    );
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
