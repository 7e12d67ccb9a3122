// Storing an artifact from a descriptor its caller opened: the caller's descriptor is the
// caller's to close, whatever happens to the bytes on the way.
import { createHash } from 'node:crypto';
import { fstatSync, mkdtempSync, readFileSync, readSync, rmSync, writeFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { storeArtifactFile } from './artifacts.ts';

const dir = mkdtempSync(path.join(os.tmpdir(), 'dossier-artifacts-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('an artifact stored from an open descriptor', () => {
  it('over the limit: refused as resource_constraint, and the descriptor is still open for its owner to close', async () => {
    const file = path.join(dir, 'big.bin');
    writeFileSync(file, Buffer.alloc(3 * 1024 * 1024 + 5, 7));
    const handle = await open(file, 'r');
    try {
      await expect(storeArtifactFile(path.join(dir, 'home'), handle.fd, 1024 * 1024)).rejects.toMatchObject({
        code: 'resource_constraint',
      });
      // A file stream's destroy closed it some moments after the refusal: the owner's close would
      // then hit another file. Nothing reads it either once the refusal is out (its offset stays).
      const offset = () =>
        Number(/pos:\s+(\d+)/.exec(readFileSync(`/proc/self/fdinfo/${handle.fd}`, 'utf8'))![1]);
      const at = offset();
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(() => fstatSync(handle.fd)).not.toThrow();
      expect(offset()).toBe(at);
    } finally {
      await handle.close();
    }
  });

  it('within the limit: stored with its digest and size, read from where the descriptor stands, left open', async () => {
    const file = path.join(dir, 'small.bin');
    writeFileSync(file, 'skip: hello artifact');
    const handle = await open(file, 'r');
    try {
      readSync(handle.fd, Buffer.alloc(6), 0, 6, null);
      const stored = await storeArtifactFile(path.join(dir, 'home'), handle.fd, 1024);
      expect(stored.size).toBe(14);
      expect(stored.digest).toBe(`sha256:${createHash('sha256').update('hello artifact').digest('hex')}`);
      expect(() => fstatSync(handle.fd)).not.toThrow();
    } finally {
      await handle.close();
    }
  });
});
