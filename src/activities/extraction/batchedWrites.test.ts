// Batched writes keep what a reader hands over even when the reader reuses one
// buffer for every piece (as zip's stored entries do), whatever the piece sizes.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { open } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { batchedWrites } from './batchedWrites.ts';

const dir = mkdtempSync(path.join(os.tmpdir(), 'dossier-batched-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Writes `source` through batchedWrites in pieces of `sizes` (cycled), all read into one reused buffer. */
async function writeThrough(name: string, source: Buffer, sizes: number[]): Promise<Buffer> {
  const file = path.join(dir, name);
  const fd = await open(file, 'wx');
  const reused = Buffer.alloc(Math.max(...sizes));
  const out = batchedWrites(fd);
  for (let at = 0, i = 0; at < source.length; i++) {
    const n = Math.min(sizes[i % sizes.length]!, source.length - at);
    source.copy(reused, 0, at, at + n);
    await out.write(reused.subarray(0, n));
    reused.fill(0xee); // the reader moves on: what it handed over is gone
    at += n;
  }
  await out.end();
  await fd.close();
  return readFileSync(file);
}

describe('batchedWrites', () => {
  it('writes the exact bytes for pieces smaller than, equal to and larger than a batch', async () => {
    const source = randomBytes(5 * 1024 * 1024 + 123);
    const cases: [string, number[]][] = [
      ['small', [65_536]],
      ['odd', [1, 7, 4_093, 65_535, 300_000]],
      ['batch', [1024 * 1024]],
      ['large', [3 * 1024 * 1024 + 5, 17]],
    ];
    for (const [name, sizes] of cases)
      expect((await writeThrough(name, source, sizes)).equals(source)).toBe(true);
  });

  it('an empty file writes nothing; an abandoned one keeps only what was written in full batches', async () => {
    expect((await writeThrough('empty', Buffer.alloc(0), [10])).length).toBe(0);
    const fd = await open(path.join(dir, 'abandoned'), 'wx');
    const out = batchedWrites(fd);
    await out.write(Buffer.alloc(100, 1));
    out.abandon();
    await fd.close();
    expect(readFileSync(path.join(dir, 'abandoned')).length).toBe(0);
  });
});
