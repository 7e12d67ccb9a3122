// The extract_artifact effect. Every entry is checked before anything is
// written: absolute and `..` paths, paths through a recorded link, paths too
// deep and duplicates are refused and recorded; links are recorded, never
// created. Content is written into a staging tree with O_EXCL|O_NOFOLLOW and
// counted as it streams; a bound exceeded or a corrupt archive fails the
// extraction and removes the staging tree, so no partial tree is left.
import { createHash } from 'node:crypto';
import { constants, createReadStream, existsSync } from 'node:fs';
import { mkdir, open, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { DossierError, toToolError } from '../domain/errors.ts';
import type { ExtractInput } from '../tools/extract.ts';
import {
  decompressed,
  read7z,
  readGzip,
  readTar,
  readZip,
  sniff,
  tooBig,
  tooDense,
  tooMany,
  type ArchiveEntry,
} from './archives.ts';
import type { Effect, EffectContext } from './effect.ts';
import { verifiedArtifact } from './policy.ts';

const NESTED = new Set(['zip', 'gzip', 'bzip2', 'xz', '7z', 'tar', 'squashfs']);

export interface ManifestRow {
  occurrence: number;
  path: string;
  type: ArchiveEntry['type'];
  size: number | null;
  sha256: string | null;
  detected_type: string | null;
  nested_archive: boolean;
  link_target: string | null;
  /** Written with the execute bits (the archive marked it executable); no other mode bit is ever kept. */
  executable: boolean;
  status: 'written' | 'recorded' | 'refused';
  reason: string | null;
}

async function detectFormat(file: string): Promise<ExtractInput['format']> {
  const fd = await open(file, 'r');
  const head = Buffer.alloc(512);
  const { bytesRead } = await fd.read(head, 0, 512, 0);
  await fd.close();
  const kind = sniff(head.subarray(0, bytesRead));
  if (kind === 'zip' || kind === 'tar' || kind === '7z') return kind;
  if (kind === 'bzip2') return 'tar.bz2';
  if (kind === 'xz') return 'tar.xz';
  if (kind === 'gzip') {
    // A gzip'd tar has "ustar" at offset 257 of the decompressed stream.
    const { createGunzip } = await import('node:zlib');
    const inner = await new Promise<Buffer>((resolve) => {
      const chunks: Buffer[] = [];
      let size = 0;
      const gunzip = createReadStream(file).pipe(createGunzip());
      gunzip.on('data', (c: Buffer) => {
        chunks.push(c);
        size += c.length;
        if (size >= 512) gunzip.destroy();
      });
      gunzip.on('close', () => resolve(Buffer.concat(chunks)));
      gunzip.on('error', () => resolve(Buffer.concat(chunks)));
    });
    return sniff(inner) === 'tar' ? 'tar.gz' : 'gzip';
  }
  throw new DossierError(
    'unsupported_target',
    `The artifact is not an archive this tool reads (it looks like ${kind}).`,
    'extract_artifact reads zip, tar, tar.gz, tar.bz2, tar.xz, gzip and 7z; for firmware images use extract_firmware.',
    { detected: kind },
  );
}

/** Why a name may not be written, or null when it is safe. */
export function unsafeName(name: string, maxDepth: number): string | null {
  if (name.length === 0) return 'empty name';
  if (name.includes('\0')) return 'NUL in name';
  if (name.startsWith('/') || /^[A-Za-z]:/.test(name)) return 'absolute path';
  const parts = name.split('/').filter((p) => p !== '' && p !== '.');
  if (parts.includes('..')) return 'path escapes the output directory (..)';
  if (parts.length === 0) return 'empty name';
  if (parts.length > maxDepth) return `deeper than max_depth=${maxDepth}`;
  // What Linux can create: a component of at most 255 bytes, a path of at most 4,095 (with the output folder's own).
  if (parts.some((p) => Buffer.byteLength(p) > 255)) return 'a name component longer than 255 bytes';
  if (Buffer.byteLength(parts.join('/')) > 3_000) return 'a path longer than 3,000 bytes';
  return null;
}

/** The bounded, checked writer every extraction feeds entries to; see the file comment. */
export async function startExtraction(
  ctx: EffectContext,
  limits: ExtractInput['limits'],
  archiveBytes: number,
  timeoutMs: number,
) {
  const staging = path.join(ctx.workspace, 'out');
  const output = path.join(
    ctx.config.home,
    'extractions',
    ctx.caller.team,
    path.basename(path.dirname(ctx.workspace)),
    path.basename(ctx.workspace),
  );
  await mkdir(staging);
  const deadline = Date.now() + timeoutMs;
  const input = { timeout_ms: timeoutMs };
  const rows: ManifestRow[] = [];
  const taken = new Map<string, ArchiveEntry['type']>(); // normalized path → what occupies it
  let total = 0;
  let written = 0;

  const onEntry = async (entry: ArchiveEntry) => {
    if (rows.length >= limits.max_entries) throw tooMany(rows.length + 1, limits.max_entries);
    if (ctx.signal.aborted)
      throw new DossierError(
        'cancelled',
        'The extraction was cancelled.',
        'Launch again with a new idempotency_key.',
      );
    if (Date.now() > deadline) {
      throw new DossierError(
        'provider_timeout',
        `The extraction ran past timeout_ms=${input.timeout_ms}.`,
        'Raise timeout_ms or split the archive.',
      );
    }
    const row: ManifestRow = {
      occurrence: rows.length,
      path: entry.name,
      type: entry.type,
      size: null,
      sha256: null,
      detected_type: null,
      nested_archive: false,
      link_target: entry.linkTarget,
      executable: entry.type === 'file' && Boolean(entry.executable),
      status: 'refused',
      reason: null,
    };
    rows.push(row);
    const refuse = (reason: string) => {
      row.reason = reason;
      entry.content?.resume();
    };
    if (entry.type === 'dir' && /^(\.\/?)*$/.test(entry.name)) {
      row.status = 'written'; // the archive's own root, "./": it is the output directory
      return;
    }
    const bad = unsafeName(entry.name, limits.max_depth);
    if (bad) return refuse(bad);
    const parts = entry.name.split('/').filter((p) => p !== '' && p !== '.');
    const rel = parts.join('/');
    for (let i = 1; i < parts.length; i++) {
      const occupant = taken.get(parts.slice(0, i).join('/'));
      if (occupant && occupant !== 'dir')
        return refuse(`path goes through a ${occupant} entry (${parts.slice(0, i).join('/')})`);
    }
    if (entry.type === 'symlink' || entry.type === 'hardlink') {
      if (taken.has(rel)) return refuse('duplicate path');
      taken.set(rel, entry.type);
      row.status = 'recorded';
      row.reason = 'links are recorded, never created';
      return;
    }
    if (entry.type === 'other')
      return refuse(entry.kind ? `not extracted: ${entry.kind}` : 'device, fifo or other special entry');
    const target = path.join(staging, rel);
    if (!target.startsWith(`${staging}/`)) return refuse('path escapes the output directory');
    if (entry.type === 'dir') {
      if (taken.has(rel) && taken.get(rel) !== 'dir') return refuse('duplicate path');
      taken.set(rel, 'dir');
      await mkdir(target, { recursive: true });
      row.status = 'written';
      return;
    }
    if (taken.has(rel)) return refuse('duplicate path');
    taken.set(rel, 'file');
    await mkdir(path.dirname(target), { recursive: true });
    const fd = await open(
      target,
      constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
      entry.executable ? 0o755 : 0o644,
    );
    const hash = createHash('sha256');
    let size = 0;
    let head: Buffer | null = null;
    try {
      for await (const chunk of entry.content!) {
        const buf = chunk as Buffer;
        size += buf.length;
        total += buf.length;
        if (size > limits.max_entry_bytes) {
          throw new DossierError(
            'resource_constraint',
            `Entry ${rel} unpacks to more than max_entry_bytes=${limits.max_entry_bytes}; the extraction was rolled back.`,
            'Raise limits.max_entry_bytes (up to its ceiling) with a new idempotency_key if this is expected.',
            { path: rel, max_entry_bytes: limits.max_entry_bytes },
          );
        }
        if (total > limits.max_total_bytes) throw tooBig(total, limits.max_total_bytes);
        if (total > limits.max_ratio * Math.max(archiveBytes, 1))
          throw tooDense(total, archiveBytes, limits.max_ratio);
        head ??= Buffer.from(buf.subarray(0, 512));
        hash.update(buf);
        await fd.write(buf);
      }
    } finally {
      await fd.close();
    }
    const kind = sniff(head ?? Buffer.alloc(0));
    Object.assign(row, {
      size,
      sha256: hash.digest('hex'),
      detected_type: kind,
      nested_archive: NESTED.has(kind),
      status: 'written',
      reason: null,
    });
    written++;
    ctx.progress({ phase: 'extracting', entries: rows.length, written, bytes: total });
  };

  /** On failure remove everything staged; on success move it into place, whole. */
  async function settle(failure: unknown): Promise<{ staging_removed: boolean; output: string | null }> {
    if (failure) {
      await rm(staging, { recursive: true, force: true });
      return { staging_removed: !existsSync(staging), output: null };
    }
    await mkdir(path.dirname(output), { recursive: true });
    await rename(staging, output); // the output directory is created exactly once, whole
    return { staging_removed: true, output };
  }

  return { onEntry, rows, settle, stats: () => ({ total, written }) };
}

const TAR_COMPRESSION = { tar: 'none', 'tar.gz': 'gzip', 'tar.bz2': 'bzip2', 'tar.xz': 'xz' } as const;

/** Milliseconds left until a deadline set now, at least one second (helpers need some time to fail cleanly). */
export function deadline(timeoutMs: number): () => number {
  const end = Date.now() + timeoutMs;
  return () => Math.max(1_000, end - Date.now());
}

export const extractArchive: Effect<ExtractInput> = async (input, ctx) => {
  const { artifact: archive, file } = await verifiedArtifact(ctx, input.artifact);
  const archiveBytes = (await stat(file)).size;
  const left = deadline(input.timeout_ms);
  const format = input.format === 'auto' ? await detectFormat(file) : input.format;
  const limits = input.limits;

  await ctx.begin();
  const run = await startExtraction(ctx, limits, archiveBytes, input.timeout_ms);
  const { onEntry, rows } = run;

  let failure: unknown;
  try {
    if (format === 'zip') await readZip(file, onEntry);
    else if (format.startsWith('tar')) {
      const compression = TAR_COMPRESSION[format as keyof typeof TAR_COMPRESSION];
      await readTar(decompressed(ctx.sandbox, file, compression, left()), format, onEntry);
    } else if (format === 'gzip')
      await readGzip(file, (archive.name ?? 'data').replace(/\.gz$/, '') || 'data', onEntry);
    else
      await read7z(
        ctx.sandbox,
        file,
        {
          maxEntries: limits.max_entries,
          maxTotalBytes: limits.max_total_bytes,
          maxRatio: limits.max_ratio,
          archiveBytes,
        },
        left(),
        onEntry,
      );
  } catch (err) {
    failure = err;
  }

  const cleanup = await run.settle(failure);
  const { total, written } = run.stats();
  const refused = rows.filter((r) => r.status === 'refused').length;
  const recorded = rows.filter((r) => r.status === 'recorded').length;
  const summary = {
    format,
    output: cleanup.output,
    entries: rows.length,
    written,
    refused,
    links_recorded: recorded,
    nested_archives: rows.filter((r) => r.nested_archive).length,
    bytes_written: failure ? 0 : total,
    archive_bytes: archiveBytes,
    cleanup,
  };
  const limitations: string[] = [];
  if (refused) limitations.push(`${refused} entries were refused (see status "refused" in entries)`);
  if (failure)
    limitations.push(
      'the extraction failed and was rolled back; entries lists what was read before the failure',
    );
  return {
    status: failure ? 'failed' : 'succeeded',
    document: { artifact: input.artifact, limits, ...summary },
    collections: { entries: rows },
    summary,
    truncated: Boolean(failure),
    limitations,
    target: { digest: input.artifact, path: archive.name ?? undefined },
    error: failure ? toToolError(failure) : undefined,
    unknowns: rows
      .filter((r) => r.nested_archive)
      .map((r) => ({
        question: `What does the nested ${r.detected_type} archive ${r.path} contain?`,
        scope: `${input.artifact} ${r.path}`,
      })),
  };
};
