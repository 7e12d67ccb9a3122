// The tar reader: a tar stream (from a file through a decompressor, or from a
// helper such as sqfs2tar or unblob's output), entry by entry, each handed to
// onEntry in order; the first failure stops the stream and every entry still
// being read.
import type { Readable } from 'node:stream';
import { Parser, type ReadEntry } from 'tar';
import { corrupt, type ArchiveEntry, type EntryType, type OnEntry } from './archives.ts';

function entryType(entry: ReadEntry): EntryType {
  switch (entry.type) {
    case 'File':
    case 'OldFile':
    case 'ContiguousFile':
      return 'file';
    case 'Directory':
      return 'dir';
    case 'SymbolicLink':
      return 'symlink';
    case 'Link':
      return 'hardlink';
    default:
      return 'other';
  }
}

/** What an entry node-tar's parser does not unpack is, in the manifest's words. */
function ignoredKind(entry: ReadEntry): string {
  const flag = entry.header.typeKey;
  const what =
    flag === 'Unsupported'
      ? 'a tar entry of a type flag tar does not define'
      : `tar type ${flag} (${entry.type})`;
  return `${what}, which dossier does not unpack`;
}

/** A tar stream (from a file through a decompressor, or from a helper such as sqfs2tar), entry by entry. */
export async function readTar(input: Readable, format: string, onEntry: OnEntry): Promise<void> {
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
  // Entries whose content is still being read: a failure ends them too, so no writer waits forever.
  const reading = new Set<ReadEntry>();
  // On the first failure stop reading at once: no more decompression, no more entries; the
  // entry being written fails with the same error, and the result settles once it has.
  const stop = (err: unknown) => {
    const first = failed === undefined;
    failed ??= err;
    input.unpipe();
    input.destroy();
    if (!first) return;
    for (const entry of reading) entry.destroy(failed as Error);
    reading.clear();
    chain.then(
      () => settle(failed),
      () => settle(failed),
    );
  };
  // Entries are handed over one at a time, in order; after a failure, none.
  const next = (entry: ArchiveEntry) => {
    chain = chain.then(async () => {
      if (failed) return;
      try {
        await onEntry(entry);
      } catch (err) {
        stop(err);
      }
    });
  };
  // Entries node-tar's parser does not unpack (sparse files, volume headers,
  // unknown type flags): every one is in the manifest, refused with what it is.
  parser.on('ignoredEntry', (entry: ReadEntry) => {
    next({ name: entry.path, type: 'other', linkTarget: null, content: null, kind: ignoredKind(entry) });
  });
  parser.on('entry', (entry: ReadEntry) => {
    const type = entryType(entry);
    const content = type === 'file' ? (entry as unknown as Readable) : null;
    if (content) {
      reading.add(entry);
      entry.on('end', () => reading.delete(entry));
      // stop() may end an entry no writer reads yet: its error must not go unheard (and throw).
      entry.on('error', () => undefined);
    }
    if (!content) entry.resume();
    const linkTarget = type === 'symlink' || type === 'hardlink' ? (entry.linkpath ?? '') : null;
    next({
      name: entry.path,
      type,
      linkTarget,
      content,
      executable: ((entry.mode ?? 0) & 0o111) !== 0,
      ...(type === 'other' ? { kind: `tar ${entry.type} entry` } : {}),
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
