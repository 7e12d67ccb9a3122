// Archive readers: each turns one archive format into a sequence of entries,
// handed one at a time to `onEntry`, which consumes a file entry's content
// before the next entry is read. No reader writes anything itself.
import { spawn } from 'node:child_process';
import { createReadStream } from 'node:fs';
import { lstat, mkdir, readdir, readlink } from 'node:fs/promises';
import path from 'node:path';
import { PassThrough, type Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { Parser, type ReadEntry } from 'tar';
import yauzl from 'yauzl';
import { DossierError } from '../domain/errors.ts';
import { helper, runHelper } from './observe.ts';

export type EntryType = 'file' | 'dir' | 'symlink' | 'hardlink' | 'other';

export interface ArchiveEntry {
  name: string;
  type: EntryType;
  linkTarget: string | null;
  /** The content of a file entry; must be consumed (or destroyed) before the next entry comes. */
  content: Readable | null;
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
  if (starts('68737173')) return 'squashfs';
  if (head.length === 0) return 'empty';
  const printable = head
    .subarray(0, 512)
    .every((b) => b === 9 || b === 10 || b === 13 || (b >= 32 && b < 127) || b >= 128);
  return printable ? 'text' : 'data';
}

function corrupt(format: string, err: unknown): DossierError {
  return new DossierError(
    'unsupported_target',
    `The ${format} archive could not be read: ${(err as Error).message}. It may be truncated or corrupt.`,
    'Check the artifact (list_artifacts shows its type), or pass the right format explicitly.',
    { format },
  );
}

export async function readZip(file: string, onEntry: OnEntry): Promise<void> {
  const zip = await new Promise<yauzl.ZipFile>((resolve, reject) =>
    // decodeStrings: false hands us raw names, so unsafe ones are refused and recorded, not fatal.
    yauzl.open(file, { lazyEntries: true, decodeStrings: false, validateEntrySizes: true }, (err, z) =>
      err ? reject(corrupt('zip', err)) : resolve(z!),
    ),
  );
  try {
    await new Promise<void>((resolve, reject) => {
      zip.on('error', (err) => reject(corrupt('zip', err)));
      zip.on('end', () => resolve());
      zip.on('entry', (entry: yauzl.Entry) => {
        const raw = entry.fileName as unknown as Buffer;
        const name = (
          entry.generalPurposeBitFlag & 0x800 ? raw.toString('utf8') : raw.toString('latin1')
        ).replace(/\\/g, '/');
        const mode = (entry.externalFileAttributes >>> 16) & 0o170000;
        const isDir = name.endsWith('/');
        const type: EntryType = mode === 0o120000 ? 'symlink' : isDir ? 'dir' : 'file';
        const next = async () => {
          if (type === 'dir') return onEntry({ name, type, linkTarget: null, content: null });
          const stream = await new Promise<Readable>((res, rej) =>
            zip.openReadStream(entry, (err, s) => (err ? rej(corrupt('zip', err)) : res(s!))),
          );
          if (type === 'symlink') {
            const chunks: Buffer[] = [];
            let size = 0;
            for await (const c of stream) {
              size += (c as Buffer).length;
              if (size > 4_096) break;
              chunks.push(c as Buffer);
            }
            stream.destroy();
            return onEntry({ name, type, linkTarget: Buffer.concat(chunks).toString('utf8'), content: null });
          }
          try {
            await onEntry({ name, type, linkTarget: null, content: stream });
          } catch (err) {
            stream.destroy();
            throw err;
          }
        };
        next().then(
          () => zip.readEntry(),
          (err) => reject(err),
        );
      });
      zip.readEntry();
    });
  } finally {
    zip.close();
  }
}

/** tar, optionally through a decompressor: zlib for gzip, the bzip2 and xz programs for the others. */
export async function readTar(
  file: string,
  compression: 'none' | 'gzip' | 'bzip2' | 'xz',
  onEntry: OnEntry,
): Promise<void> {
  const format =
    compression === 'none' ? 'tar' : `tar.${{ gzip: 'gz', bzip2: 'bz2', xz: 'xz' }[compression]}`;
  const input = decompressed(file, compression);
  const parser = new Parser({ strict: true });
  let chain: Promise<void> = Promise.resolve();
  let failed: unknown;
  let settle!: (err?: unknown) => void;
  const done = new Promise<void>((resolve, reject) => {
    let settled = false;
    settle = (err?: unknown) => {
      if (settled) return;
      settled = true;
      if (err) reject(err);
      else resolve();
    };
  });
  // On the first failure stop reading at once: no more decompression, no more entries.
  const stop = (err: unknown) => {
    failed ??= err;
    input.unpipe();
    input.destroy();
    settle(failed);
  };
  parser.on('entry', (entry: ReadEntry) => {
    const type: EntryType =
      entry.type === 'File' || entry.type === 'OldFile' || entry.type === 'ContiguousFile'
        ? 'file'
        : entry.type === 'Directory'
          ? 'dir'
          : entry.type === 'SymbolicLink'
            ? 'symlink'
            : entry.type === 'Link'
              ? 'hardlink'
              : 'other';
    const content = type === 'file' ? (entry as unknown as Readable) : null;
    if (!content) entry.resume();
    const linkTarget = type === 'symlink' || type === 'hardlink' ? (entry.linkpath ?? '') : null;
    chain = chain.then(async () => {
      if (failed) return;
      try {
        await onEntry({ name: entry.path, type, linkTarget, content });
      } catch (err) {
        stop(err);
      }
    });
  });
  parser.on('error', (err: unknown) => stop(corrupt(format, err)));
  parser.on('warn', (code: string, message: string) => {
    if (code === 'TAR_ENTRY_INVALID' || code === 'TAR_BAD_ARCHIVE' || code === 'TAR_ABORT') {
      stop(corrupt(format, new Error(message)));
    }
  });
  input.on('error', (err) => stop(corrupt(format, err)));
  parser.on('end', () => chain.then(() => settle(failed)));
  input.pipe(parser as unknown as NodeJS.WritableStream);
  await done;
}

function decompressed(file: string, compression: 'none' | 'gzip' | 'bzip2' | 'xz'): Readable {
  const source = createReadStream(file);
  if (compression === 'none') return source;
  if (compression === 'gzip') return source.pipe(createGunzip());
  const program = compression === 'bzip2' ? helper('bzip2', 'bzip2') : helper('xz', 'xz-utils');
  const child = spawn(program, ['-dc'], { stdio: ['pipe', 'pipe', 'pipe'] });
  const out = new PassThrough();
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => (stderr = (stderr + c.toString()).slice(-500)));
  source.pipe(child.stdin);
  child.stdin.on('error', () => undefined);
  child.stdout.pipe(out, { end: false });
  child.on('close', (code) => {
    if (code === 0) out.end();
    else out.destroy(new Error(`${path.basename(program)} failed: ${stderr.trim() || `exit ${code}`}`));
  });
  return out;
}

/** A lone gzip stream is one entry, named after the artifact without .gz. */
export async function readGzip(file: string, name: string, onEntry: OnEntry): Promise<void> {
  const stream = createReadStream(file).pipe(createGunzip());
  const errored = new Promise<never>((_, reject) =>
    stream.once('error', (err) => reject(corrupt('gzip', err))),
  );
  errored.catch(() => undefined);
  try {
    await Promise.race([onEntry({ name, type: 'file', linkTarget: null, content: stream }), errored]);
  } finally {
    stream.destroy();
  }
}

/**
 * 7z through Debian's 7-Zip: the listing is checked against the bounds first,
 * then 7-Zip unpacks into a private folder (it refuses absolute and `..`
 * paths itself), and that folder is walked as the entries, links included.
 */
export async function read7z(
  file: string,
  rawDir: string,
  bounds: { maxEntries: number; maxTotalBytes: number },
  onEntry: OnEntry,
): Promise<void> {
  const sevenZip = helper('7zz', '7zip');
  const listing = await runHelper(sevenZip, ['l', '-slt', '-ba', file]).catch((err) => {
    throw corrupt('7z', err);
  });
  const blocks = listing.split(/\n\s*\n/).filter((b) => /^Path = /m.test(b));
  const declared = blocks.reduce((n, b) => n + Number(/^Size = (\d+)/m.exec(b)?.[1] ?? 0), 0);
  if (blocks.length > bounds.maxEntries) throw tooMany(blocks.length, bounds.maxEntries);
  if (declared > bounds.maxTotalBytes) throw tooBig(declared, bounds.maxTotalBytes);
  await mkdir(rawDir);
  await runHelper(sevenZip, ['x', '-y', '-bd', '-snl', `-o${rawDir}`, file]).catch((err) => {
    throw corrupt('7z', err);
  });
  await walkInto(rawDir, '', onEntry);
}

/**
 * Feeds a folder that a trusted unpacker wrote (7-Zip, unsquashfs) to the
 * checked writer as entries, without following links; names get `prefix/`.
 */
export async function walkInto(root: string, prefix: string, onEntry: OnEntry): Promise<void> {
  const walk = async (dir: string): Promise<void> => {
    for (const entry of (await readdir(dir, { withFileTypes: true })).sort((x, y) =>
      x.name < y.name ? -1 : 1,
    )) {
      const full = path.join(dir, entry.name);
      const rel = path.relative(root, full);
      const name = prefix ? `${prefix}/${rel}` : rel;
      const info = await lstat(full);
      if (info.isSymbolicLink())
        await onEntry({ name, type: 'symlink', linkTarget: await readlink(full), content: null });
      else if (info.isDirectory()) {
        await onEntry({ name: `${name}/`, type: 'dir', linkTarget: null, content: null });
        await walk(full);
      } else if (info.isFile())
        await onEntry({ name, type: 'file', linkTarget: null, content: createReadStream(full) });
      else await onEntry({ name, type: 'other', linkTarget: null, content: null });
    }
  };
  await walk(root);
}

export function tooMany(count: number, max: number) {
  return new DossierError(
    'resource_constraint',
    `The archive has more than ${max} entries (${count > max ? count : `at least ${count}`}); the extraction was rolled back.`,
    'Raise limits.max_entries (up to its ceiling) if you expect this many entries, with a new idempotency_key.',
    { entries: count, max_entries: max },
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
