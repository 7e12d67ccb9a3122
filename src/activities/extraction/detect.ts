// An archive's format by its content: dossier's own readers first, then
// unblob for the kinds only it reads (kinds.ts: UNBLOB_KINDS).
import { constants } from 'node:fs';
import { open } from 'node:fs/promises';
import type { Sandbox } from '../../sandbox/sandbox.ts';
import type { ExtractInput } from '../../tools/extract.ts';
import { decompressed, sniff, type Compression } from './archives.ts';
import { HEAD_BYTES, OPENABLE, UNBLOB_KINDS } from './kinds.ts';

export type ArchiveFormat = ExtractInput['format'];

async function readHead(file: string, bytes = HEAD_BYTES): Promise<Buffer> {
  const fd = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW);
  try {
    const head = Buffer.alloc(bytes);
    const { bytesRead } = await fd.read(head, 0, bytes, 0);
    return head.subarray(0, bytesRead);
  } finally {
    await fd.close();
  }
}

/** The first bytes of a decompressed stream (gzip in-process; bzip2, xz in the sandbox). */
async function decompressedHead(
  sandbox: Sandbox,
  file: string,
  compression: Compression,
  timeoutMs: number,
): Promise<Buffer> {
  const stream = decompressed(sandbox, file, compression, timeoutMs);
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of stream) {
      chunks.push(chunk as Buffer);
      size += (chunk as Buffer).length;
      if (size >= 512) break;
    }
  } catch {
    // a corrupt stream names no tar; reading it for real reports the corruption
  } finally {
    stream.destroy();
  }
  return Buffer.concat(chunks);
}

/**
 * The format of an archive by its content, or null with what it looks like.
 * `known` is what sniff() already named from the file's first bytes (the
 * writer keeps them for every entry), so the head is not read again.
 */
export async function formatOf(
  sandbox: Sandbox,
  file: string,
  timeoutMs = 60_000,
  known?: string,
): Promise<{ format: Exclude<ArchiveFormat, 'auto'> | null; kind: string }> {
  const kind = known ?? sniff(await readHead(file));
  const single = { gzip: 'gzip', bzip2: 'bzip2', xz: 'xz' } as const;
  if (kind in single) {
    const compression = single[kind as keyof typeof single];
    // A compressed tar has "ustar" at offset 257 of the decompressed stream.
    const inner = sniff(await decompressedHead(sandbox, file, compression, timeoutMs));
    const asTar = { gzip: 'tar.gz', bzip2: 'tar.bz2', xz: 'tar.xz' } as const;
    return { format: inner === 'tar' ? asTar[compression] : compression, kind };
  }
  if (OPENABLE.has(kind)) return { format: kind as Exclude<ArchiveFormat, 'auto'>, kind };
  if (UNBLOB_KINDS.has(kind)) return { format: 'unblob', kind };
  return { format: null, kind };
}
