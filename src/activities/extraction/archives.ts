// Archive readers (tar in tar.ts, zip in zip.ts, other formats in formats.ts): each turns one archive format into a sequence of entries,
// handed one at a time to `onEntry`, which consumes a file entry's content
// before the next entry is read. No reader writes anything itself.
import { createReadStream } from 'node:fs';
import { pipeline, Readable } from 'node:stream';
import { crc32, createGunzip } from 'node:zlib';
import { DossierError } from '../../domain/errors.ts';
import { checkedOutput, runHelper, streamHelper } from '../../sandbox/helpers.ts';
import type { Sandbox } from '../../sandbox/sandbox.ts';

export type EntryType = 'file' | 'dir' | 'symlink' | 'hardlink' | 'other';

export interface ArchiveEntry {
  name: string;
  type: EntryType;
  linkTarget: string | null;
  /**
   * The content of a file entry; must be consumed before the next entry comes. A chunk is valid
   * only until the next one is asked for: readers may reuse one buffer for every chunk.
   */
  content: AsyncIterable<Buffer> | null;
  /** Whether the archive marks the file executable (only this bit of its mode is kept). */
  executable?: boolean;
  /** For an `other` entry: what it is, as the format names it (e.g. "tar type S (SparseFile)"). */
  kind?: string;
}

export type OnEntry = (entry: ArchiveEntry) => Promise<void>;

/** Reads the first bytes of a file to name its format. */
export function sniff(head: Buffer): string {
  const starts = (hex: string) => head.subarray(0, hex.length / 2).equals(Buffer.from(hex, 'hex'));
  if (starts('504b0304') || starts('504b0506')) return 'zip';
  if (starts('1f8b')) return 'gzip';
  if (starts('425a68')) return 'bzip2';
  if (starts('fd377a585a00')) return 'xz';
  if (starts('377abcaf271c')) return '7z';
  if (head.length >= 262 && head.subarray(257, 262).toString('latin1') === 'ustar') return 'tar';
  if (starts('7f454c46')) return 'elf';
  if (starts('4d5a')) return 'pe';
  if (starts('25504446')) return 'pdf';
  if (starts('89504e47')) return 'png';
  if (starts('ffd8ff')) return 'jpeg';
  if (starts('68737173') || starts('73717368')) return 'squashfs';
  if (starts('213c617263683e0a'))
    return head.subarray(8, 21).toString('latin1') === 'debian-binary' ? 'deb' : 'ar';
  if (['070701', '070702', '070707'].includes(head.subarray(0, 6).toString('latin1'))) return 'cpio';
  if (starts('edabeedb')) return 'rpm';
  if (starts('3aff26ed')) return 'android-sparse';
  if (starts('27051956')) return 'uimage';
  if (starts('453dcd28') || starts('28cd3d45')) return 'cramfs';
  // JFFS2: the node magic then a node type (dirent, inode, cleanmarker, padding, summary).
  const jffs2Nodes = [0xe001, 0xe002, 0x2003, 0x2004, 0x2006];
  if (head.length >= 4 && starts('8519') && jffs2Nodes.includes(head.readUInt16LE(2))) return 'jffs2';
  if (head.length >= 4 && starts('1985') && jffs2Nodes.includes(head.readUInt16BE(2))) return 'jffs2';
  if (starts('55424923')) return 'ubi';
  // UBIFS without its UBI container: the node magic, then a superblock node (type 6 at offset 20).
  if (starts('31181006') && head.length > 20 && head[20] === 6) return 'ubifs';
  if (starts('28b52ffd')) return 'zstd';
  if (starts('04224d18') || starts('02214c18')) return 'lz4';
  // Formats unblob reads (writer.ts: UNBLOB_KINDS), named here so a nested one is opened.
  if (starts('4c5a4950')) return 'lzip';
  if (starts('894c5a4f000d0a1a0a')) return 'lzop';
  if (starts('48445230')) return 'trx';
  if (starts('2a23245e')) return 'chk';
  if (starts('2d726f6d3166732d')) return 'romfs';
  if (starts('4d534346')) return 'cab';
  if (starts('526172211a07')) return 'rar';
  if (starts('1f9d')) return 'compress';
  if (starts('5d000080')) return 'lzma';
  if (head.length >= 11 && head.subarray(3, 11).toString('latin1') === 'NTFS    ') return 'ntfs';
  if (head.length >= 1028 && head.readUInt32LE(1024) === 0xe0f5e1e2) return 'erofs';
  // FAT: a boot sector's signature and its file system type string (FAT12/16 at 54, FAT32 at 82).
  if (
    head.length >= 512 &&
    head[510] === 0x55 &&
    head[511] === 0xaa &&
    (head.subarray(54, 57).toString('latin1') === 'FAT' ||
      head.subarray(82, 87).toString('latin1') === 'FAT32')
  )
    return 'fat';
  // Formats whose magic is not at the start: ISO 9660 at 32769, ext2/3/4 at 1080.
  if (head.length >= 32774 && head.subarray(32769, 32774).toString('latin1') === 'CD001') return 'iso9660';
  if (head.length >= 1082 && head.readUInt16LE(1080) === 0xef53) return 'ext';
  if (head.length === 0) return 'empty';
  const printable = head
    .subarray(0, 512)
    .every((b) => b === 9 || b === 10 || b === 13 || (b >= 32 && b < 127) || b >= 128);
  return printable ? 'text' : 'data';
}

/** An unreadable input, named as "the <format> <noun>" ("the zip archive", "the Android sparse image"). */
export function corrupt(format: string, err: unknown, noun = 'archive'): DossierError {
  // A bound, a timeout or a cancel that surfaced through a stream keeps its own code.
  if (err instanceof DossierError) return err;
  return new DossierError(
    'unsupported_target',
    `The ${[format, noun].filter(Boolean).join(' ')} could not be read: ${(err as Error).message}. It may be truncated or corrupt.`,
    'Check the artifact (list_artifacts shows its type), or pass the right format explicitly.',
    { format },
  );
}

/** Decompressed chunks this large: 16 KiB (zlib's default) makes every later step pay per chunk 16 times over. */
export const CHUNK_BYTES = 256 * 1024;
/** Archive files are read in pieces this large. */
export const READ_BYTES = 1024 * 1024;

export type Compression = 'none' | 'gzip' | 'bzip2' | 'xz';

/**
 * A file's bytes through a decompressor: zlib in-process for gzip, the bzip2
 * and xz programs in the sandbox (reading stdin, writing stdout) for the others.
 */
export function decompressed(sandbox: Sandbox, file: string, compression: Compression, timeoutMs: number) {
  const source = createReadStream(file, { highWaterMark: READ_BYTES });
  if (compression === 'none') return source;
  // pipeline: the file is closed whenever the decompressed side ends, fails or is destroyed.
  if (compression === 'gzip')
    return pipeline(source, createGunzip({ chunkSize: CHUNK_BYTES }), () => undefined);
  return checkedOutput(
    streamHelper(sandbox, {
      program: compression === 'bzip2' ? 'bzip2' : 'xz',
      pkg: compression === 'bzip2' ? 'bzip2' : 'xz-utils',
      args: ['-dc'],
      stdin: source,
      timeoutMs,
    }),
  );
}

/** A lone compressed stream (gzip, bzip2, xz) is one entry, named after the artifact without its suffix. */
export async function readSingle(
  stream: Readable,
  format: string,
  name: string,
  onEntry: OnEntry,
): Promise<void> {
  const errored = new Promise<never>((_, reject) =>
    stream.once('error', (err) => reject(corrupt(format, err))),
  );
  errored.catch(() => undefined);
  const entry = onEntry({ name, type: 'file', linkTarget: null, content: stream });
  try {
    await Promise.race([entry, errored]);
  } catch (err) {
    // A bound the writer hit ends the stream too: its own error says what happened, not "corrupt".
    const own = await entry.then(
      () => null,
      (e: unknown) => e,
    );
    throw own instanceof DossierError ? own : err;
  } finally {
    stream.destroy();
  }
}

interface ListedEntry {
  name: string;
  type: EntryType;
  size: number;
  crc: number | null;
  executable: boolean;
}

/** Parses `7zz l -slt -ba`: one block of `Key = value` lines per entry, in archive order. */
export function parse7zListing(listing: string): ListedEntry[] {
  return listing
    .split(/\n\s*\n/)
    .filter((b) => /^Path = /m.test(b))
    .map((block) => {
      const field = (key: string) => new RegExp(`^${key} = (.*)$`, 'm').exec(block)?.[1] ?? '';
      // Archives list Windows attributes then Unix mode ("A -rwxr-xr-x"); file systems
      // (cramfs, ext) list `Folder = +` and `Mode = lrwxrwxrwx` instead.
      const attributes = field('Attributes') || ` ${field('Mode')}`;
      const type: EntryType =
        attributes.startsWith('D') || field('Folder') === '+' || / d/.test(attributes)
          ? 'dir'
          : / l/.test(attributes)
            ? 'symlink'
            : / [-dlcbps?]/.test(attributes) && !/ -/.test(attributes)
              ? 'other'
              : 'file';
      const crc = field('CRC');
      return {
        name: field('Path'),
        type,
        size: Number(field('Size') || 0),
        crc: crc ? parseInt(crc, 16) : null,
        // "A -rwxr-xr-x": the Unix permissions 7-Zip shows after the Windows attributes.
        executable: /\s[-dl]..x/.test(attributes),
      };
    });
}

/**
 * 7z through Debian's 7-Zip, in the sandbox. The listing is checked against
 * the bounds first; then `7zz x -so` streams every entry's bytes in archive
 * order and they are split by the listed sizes (each checked against its
 * CRC) and fed to the checked writer. 7-Zip itself writes nothing anywhere:
 * every byte on disk went through dossier's bounds as it was written.
 */
export async function read7z(
  sandbox: Sandbox,
  format: '7z' | 'cramfs' | 'ext',
  file: string,
  bounds: { maxEntries: number; maxTotalBytes: number; maxRatio: number; archiveBytes: number },
  timeoutMs: number,
  onEntry: OnEntry,
): Promise<void> {
  const run = (args: string[]) => ({
    program: '7zz',
    pkg: '7zip',
    // -p: an empty password, so an encrypted archive fails instead of prompting.
    args: [...args, '-p', '--', '/input/archive'],
    mounts: [{ host: file, inside: '/input/archive' }],
    timeoutMs,
  });
  const noun = format === '7z' ? 'archive' : 'image';
  const listing = await runHelper(sandbox, run(['l', '-slt', '-ba'])).catch((err) => {
    throw corrupt(format, err, noun);
  });
  const entries = parse7zListing(listing);
  const declared = entries.reduce((n, e) => n + e.size, 0);
  if (entries.length > bounds.maxEntries) throw tooMany(entries.length, bounds.maxEntries);
  if (declared > bounds.maxTotalBytes) throw tooBig(declared, bounds.maxTotalBytes);
  if (declared > bounds.maxRatio * Math.max(bounds.archiveBytes, 1))
    throw tooDense(declared, bounds.archiveBytes, bounds.maxRatio);

  const helper = streamHelper(sandbox, run(['x', '-so', '-ba']));
  // A 7-Zip that failed half-way (or never started) says why, rather than leaving a short stream.
  const data = new ExactReader(checkedOutput(helper), (err) => corrupt(format, err, noun));
  try {
    for (const entry of entries) {
      if (entry.type === 'dir') {
        await onEntry({ name: `${entry.name}/`, type: 'dir', linkTarget: null, content: null });
        continue;
      }
      const checked = data.take(entry.size, entry.crc, entry.name);
      if (entry.type === 'other') {
        for await (const _ of checked); // a device node or fifo: its bytes (if any) are skipped
        await onEntry({
          name: entry.name,
          type: 'other',
          linkTarget: null,
          content: null,
          kind: 'a special file (device, fifo or socket)',
        });
      } else if (entry.type === 'symlink') {
        const parts: Buffer[] = [];
        for await (const part of checked) if (entry.size <= 4_096) parts.push(part);
        const target = Buffer.concat(parts).toString('utf8');
        await onEntry({ name: entry.name, type: 'symlink', linkTarget: target, content: null });
      } else {
        await onEntry({
          name: entry.name,
          type: 'file',
          linkTarget: null,
          content: Readable.from(checked),
          executable: entry.executable,
        });
      }
    }
    // The stream ends only once 7-Zip exited 0 (checkedOutput): its failure was thrown above.
    await data.end();
  } finally {
    helper.stop();
  }
}

/** Reads a stream in exact slices, checking each slice's CRC-32 when one is known. */
class ExactReader {
  private readonly it: AsyncIterator<Buffer>;
  private rest: Buffer = Buffer.alloc(0);

  constructor(
    stream: Readable,
    /** What a failure of the data itself (short, too long, a bad CRC, the reader's error) becomes. */
    private readonly unreadable: (err: Error) => DossierError,
  ) {
    this.it = stream[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  }

  private async next(): Promise<IteratorResult<Buffer>> {
    try {
      return await this.it.next();
    } catch (err) {
      throw this.unreadable(err as Error);
    }
  }

  async *take(size: number, crc: number | null, name: string): AsyncGenerator<Buffer> {
    let left = size;
    let sum = 0;
    while (left > 0) {
      if (this.rest.length === 0) {
        const next = await this.next();
        if (next.done) throw this.unreadable(new Error(`the data of ${name} ended ${left} bytes early`));
        this.rest = next.value;
      }
      const piece = this.rest.subarray(0, Math.min(left, this.rest.length));
      this.rest = this.rest.subarray(piece.length);
      left -= piece.length;
      sum = crc32(piece, sum);
      yield piece;
    }
    if (crc !== null && sum !== crc)
      throw this.unreadable(new Error(`the data of ${name} does not match its CRC`));
  }

  /** Nothing may follow the last entry's data. */
  async end() {
    const next = this.rest.length ? { done: false } : await this.next();
    if (!next.done) throw this.unreadable(new Error('more data than the listing declared'));
  }
}

export function tooMany(count: number, max: number) {
  return new DossierError(
    'resource_constraint',
    `The archive has more than ${max} entries (${count > max ? count : `at least ${count}`}); the extraction was rolled back.`,
    'Raise limits.max_entries (up to its ceiling) if you expect this many entries, with a new idempotency_key.',
    { entries: count, max_entries: max },
  );
}

export function tooDense(bytes: number, archiveBytes: number, maxRatio: number) {
  return new DossierError(
    'resource_constraint',
    `The archive expands more than max_ratio=${maxRatio} times its ${archiveBytes} bytes (a compression bomb?); the extraction was rolled back.`,
    'Raise limits.max_ratio with a new idempotency_key only if you trust this archive.',
    { archive_bytes: archiveBytes, written: bytes, max_ratio: maxRatio },
  );
}

export function tooBig(bytes: number, max: number) {
  return new DossierError(
    'resource_constraint',
    `The archive unpacks to more than ${max} bytes; the extraction was rolled back.`,
    'Raise limits.max_total_bytes (up to its ceiling) with a new idempotency_key, if the content is expected to be this large.',
    { bytes, max_total_bytes: max },
  );
}

/** What an extraction cancelled while it ran throws, wherever it noticed. */
export function cancelledExtraction(): DossierError {
  return new DossierError(
    'cancelled',
    'The extraction was cancelled.',
    'Launch again with a new idempotency_key.',
  );
}
