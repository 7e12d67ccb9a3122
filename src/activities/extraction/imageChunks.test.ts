// The image's own chunks, carved by dossier from the image: the same chunks the wrapper leaves out of
// unblob's tar, each once, with its exact bytes; anything the two disagree on fails the carving.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import type { ArchiveEntry } from './archives.ts';
import { ImageCarver, inTurn } from './imageChunks.ts';
import type { TopChunks, UnblobFacts } from './unblob.ts';

const dir = mkdtempSync(path.join(os.tmpdir(), 'dossier-image-chunks-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const bytes = randomBytes(10_000);
const file = path.join(dir, 'image.bin');
writeFileSync(file, bytes);

/** A carver writing into a list: each entry's name and bytes, in the order written. */
function carver() {
  const written: { name: string; data: Buffer }[] = [];
  const write = inTurn(async (entry: ArchiveEntry) => {
    const parts: Buffer[] = [];
    for await (const c of entry.content as Readable) parts.push(c as Buffer);
    written.push({ name: entry.name, data: Buffer.concat(parts) });
  });
  return { c: new ImageCarver({ file, bytes: bytes.length }, write, () => undefined), written };
}

const row = (start: number, end: number, kind: string, more: Partial<TopChunks['chunks'][number]> = {}) => ({
  path: '',
  depth: 0,
  start,
  end,
  size: end - start,
  unknown: kind === 'unknown',
  kind,
  ...more,
});
const top = (...chunks: TopChunks['chunks']): TopChunks => ({ chunks, whole_file: null });
const facts = (carved: UnblobFacts['carved_by_reader']) => ({ carved_by_reader: carved }) as UnblobFacts;

describe("the image's own chunks carved from the image", () => {
  it('carves what the top line tells at once, each once with its bytes, and settles against the facts', async () => {
    const { c, written } = carver();
    c.told(top(row(0, 4_000, 'trx'), row(4_000, 10_000, 'unknown')));
    // At once: before the facts are known.
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(written.map((w) => w.name)).toEqual(['carved/0x0.trx', 'carved/0xfa0.unknown']);
    await c.settle(
      facts([
        { name: 'carved/0x0.trx', start: 0, end: 4_000 },
        { name: 'carved/0xfa0.unknown', start: 4_000, end: 10_000 },
      ]),
    );
    expect(written.map((w) => w.name)).toEqual(['carved/0x0.trx', 'carved/0xfa0.unknown']);
    expect(written[0]!.data.equals(bytes.subarray(0, 4_000))).toBe(true);
    expect(written[1]!.data.equals(bytes.subarray(4_000))).toBe(true);
  });

  it('carves once the facts name them what was never told, and nothing for rows that name no file inside the image', async () => {
    const { c, written } = carver();
    c.told(
      top(
        row(0, 100, 'Bad Kind'),
        row(100, 20_000, 'zstd'),
        row(200, 100, 'zstd'),
        row(300, 400, 'fat', { depth: 1 }),
        row(500, 600, 'fat', { path: 'x' }),
      ),
    );
    await c.settle(facts([{ name: 'carved/0x64.zstd', start: 100, end: 9_000 }]));
    expect(written.map((w) => w.name)).toEqual(['carved/0x64.zstd']);
    expect(written[0]!.data.equals(bytes.subarray(100, 9_000))).toBe(true);
  });

  it('refuses facts that name a chunk outside the image, under another offset, or with another range than told', async () => {
    for (const [told, left] of [
      [[], [{ name: 'carved/0x0.trx', start: 0, end: 20_000 }]],
      [[], [{ name: 'carved/0x10.trx', start: 0, end: 100 }]],
      [[], [{ name: '../0x0.trx', start: 0, end: 100 }]],
      [[row(0, 100, 'trx')], [{ name: 'carved/0x0.trx', start: 0, end: 200 }]],
      // Carved early, and not left out of the tar: it would be written twice.
      [[row(0, 100, 'trx')], []],
    ] as const) {
      const { c } = carver();
      c.told(top(...told));
      await expect(c.settle(facts([...left]))).rejects.toMatchObject({ code: 'unsupported_target' });
    }
  });

  it('after close, a top line is not acted on; a chunk refused unread leaves no descriptor open', async () => {
    const { c, written } = carver();
    await c.close();
    c.told(top(row(0, 100, 'trx')));
    await c.close();
    expect(written).toEqual([]);

    const openOnImage = () =>
      readdirSync('/proc/self/fd').filter((fd) => {
        try {
          return readlinkSync(`/proc/self/fd/${fd}`) === file;
        } catch {
          return false;
        }
      }).length;
    const refusing = new ImageCarver(
      { file, bytes: bytes.length },
      async () => {
        await new Promise((resolve) => setTimeout(resolve, 20)); // the stream has opened its file
        throw new Error('too many entries');
      },
      () => undefined,
    );
    refusing.told(top(row(0, 100, 'trx')));
    await refusing.close();
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(openOnImage()).toBe(0);
  });

  it("refuses a name from unblob's tar that was carved here, and one left out of the tar that was in it", async () => {
    const { c } = carver();
    const toWriter: string[] = [];
    const fromTar = c.fromTar(async (entry) => void toWriter.push(entry.name));
    c.told(top(row(0, 100, 'trx')));
    await new Promise((resolve) => setTimeout(resolve, 50));
    await expect(
      fromTar({ name: './carved/0x0.trx', type: 'file', linkTarget: null, content: null }),
    ).rejects.toMatchObject({
      code: 'unsupported_target',
    });
    await fromTar({ name: 'trx-0x0/etc/motd', type: 'file', linkTarget: null, content: null });
    expect(toWriter).toEqual(['trx-0x0/etc/motd']);

    const late = carver();
    await late.c.fromTar(async () => undefined)({
      name: 'carved/0x64.zstd',
      type: 'file',
      linkTarget: null,
      content: null,
    });
    await expect(
      late.c.settle(facts([{ name: 'carved/0x64.zstd', start: 100, end: 200 }])),
    ).rejects.toMatchObject({
      code: 'unsupported_target',
    });
    expect(late.written).toEqual([]);
  });

  it('refuses facts whose list of chunks is not a list', async () => {
    const { c } = carver();
    await expect(
      c.settle({ carved_by_reader: { name: 'carved/0x0.trx' } } as unknown as UnblobFacts),
    ).rejects.toMatchObject({
      code: 'unsupported_target',
    });
  });

  it('an early carving that fails stops the carving and is the failure the settling gives', async () => {
    const written: string[] = [];
    let stopped = false;
    const failing = new ImageCarver(
      { file, bytes: bytes.length },
      async (entry) => {
        written.push(entry.name);
        for await (const _ of entry.content as Readable);
        throw new Error('over the bound');
      },
      () => (stopped = true),
    );
    failing.told(top(row(0, 100, 'trx'), row(100, 200, 'zstd')));
    // Its failure stops the carving (the carver's stop is called), with no close from outside.
    await expect.poll(() => stopped).toBe(true);
    expect(written).toEqual(['carved/0x0.trx']);
    expect(String(failing.failed)).toMatch(/over the bound/);
    await expect(failing.settle(facts([]))).rejects.toThrow(/over the bound/);
  });
});
