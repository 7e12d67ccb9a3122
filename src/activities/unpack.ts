// Reading an extraction into the checked writer (writer.ts): the format of
// an archive by its content, one reader per format, and with recursive: true
// every nested archive the writer wrote, level by level, under the same global
// bounds. This runs in the extraction thread (unpackThread.ts), away from the
// gateway's and worker's event loop and heap.
import { constants } from 'node:fs';
import { open } from 'node:fs/promises';
import path from 'node:path';
import { DossierError, toToolError, type ToolError } from '../domain/errors.ts';
import type { Sandbox } from '../sandbox/sandbox.ts';
import type { ExtractInput } from '../tools/extract.ts';
import {
  decompressed,
  read7z,
  readSingle,
  readTar,
  sniff,
  type Compression,
  type OnEntry,
} from './archives.ts';
import type { ExtractionContext } from './effect.ts';
import { readFlash } from './flash.ts';
import {
  apkSigningBlock,
  readAndroidSparse,
  readSquashfs,
  readThroughBsdtar,
  readUImage,
} from './formats.ts';
import { readZip } from './zip.ts';
import {
  HEAD_BYTES,
  NESTED_SUFFIX,
  normalized,
  OPENABLE,
  startExtraction,
  type ManifestRow,
} from './writer.ts';

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
  return { format: null, kind };
}

const TAR_COMPRESSION = { tar: 'none', 'tar.gz': 'gzip', 'tar.bz2': 'bzip2', 'tar.xz': 'xz' } as const;
const SINGLE_SUFFIX = { gzip: /\.gz$|\.tgz$/, bzip2: /\.bz2$/, xz: /\.xz$/ } as const;

/** What a format states about itself beyond its entries (uImage header, APK signing block, sparse counts). */
type FormatFacts = Record<string, unknown> | null;

interface ReadPlan {
  format: Exclude<ArchiveFormat, 'auto'>;
  file: string;
  /** The archive's own name (artifact name or entry name), for single-stream and image entries. */
  name: string;
  /** Bounds left for this archive, for readers that check a listing before streaming (7z). */
  entriesLeft: number;
  bytesLeft: number;
  /** Bytes left before the ratio bound (max_ratio × the artifact's size). */
  ratioBytesLeft: number;
  archiveBytes: number;
  maxRatio: number;
  timeoutMs: number;
}

/** Reads one archive of a known format into the writer. */
async function readArchive(ctx: ExtractionContext, plan: ReadPlan, onEntry: OnEntry): Promise<FormatFacts> {
  const { format, file, timeoutMs } = plan;
  switch (format) {
    case 'zip':
    case 'apk': {
      let manifest: string | null = null;
      await readZip(file, (entry) => {
        if (entry.name === 'AndroidManifest.xml') manifest = entry.name;
        return onEntry(entry);
      });
      if (format === 'zip' && !manifest) return null;
      return {
        apk: {
          manifest: manifest ?? null,
          manifest_encoding: manifest ? 'Android binary XML (listed as an entry, not decoded)' : null,
          signing_block: await apkSigningBlock(file),
        },
      };
    }
    case 'tar':
    case 'tar.gz':
    case 'tar.bz2':
    case 'tar.xz':
      await readTar(decompressed(ctx.sandbox, file, TAR_COMPRESSION[format], timeoutMs), format, onEntry);
      return null;
    case 'gzip':
    case 'bzip2':
    case 'xz': {
      const inner = plan.name.replace(SINGLE_SUFFIX[format], '') || 'data';
      const name = inner === plan.name ? `${plan.name}.out` : inner;
      await readSingle(decompressed(ctx.sandbox, file, format, timeoutMs), format, name, onEntry);
      return null;
    }
    case '7z':
    case 'cramfs':
    case 'ext':
      await read7z(
        ctx.sandbox,
        file,
        {
          maxEntries: plan.entriesLeft,
          maxTotalBytes: plan.bytesLeft,
          maxRatio: plan.maxRatio,
          archiveBytes: plan.archiveBytes,
        },
        timeoutMs,
        onEntry,
      );
      return null;
    case 'ar':
    case 'deb':
    case 'cpio':
    case 'rpm':
    case 'iso9660':
      await readThroughBsdtar(ctx.sandbox, file, format, timeoutMs, onEntry);
      return null;
    case 'squashfs':
      await readSquashfs(ctx.sandbox, file, timeoutMs, onEntry);
      return null;
    case 'jffs2':
    case 'ubi':
    case 'ubifs':
      return {
        flash: await readFlash(
          {
            sandbox: ctx.sandbox,
            python: ctx.config.analysis.python,
            file,
            format,
            scratchBytes: Math.min(plan.bytesLeft, plan.ratioBytesLeft),
            timeoutMs,
            progress: (facts) => ctx.progress(facts),
          },
          onEntry,
        ),
      };
    case 'android-sparse':
      return {
        sparse: await readAndroidSparse(file, `${plan.name.replace(/\.s?img$/, '')}.raw.img`, onEntry),
      };
    case 'uimage':
      return { uimage: await readUImage(file, onEntry) };
  }
}

/** Errors that end the whole extraction (a bound, a cancel, the clock); others only end one nested archive. */
function endsExtraction(err: unknown): boolean {
  return (
    !(err instanceof DossierError) ||
    ['resource_constraint', 'cancelled', 'provider_timeout', 'integrity_error', 'internal'].includes(err.code)
  );
}

export interface ArchiveRow {
  /** The archive's output path ("" for the artifact itself). */
  path: string;
  depth: number;
  format: string | null;
  status: 'opened' | 'failed' | 'not_opened';
  entries: number;
  reason: string | null;
  facts: FormatFacts;
}

/** One extraction's reading and writing, as the worker thread receives it. */
export interface UnpackJob {
  input: Pick<ExtractInput, 'limits' | 'recursive' | 'max_depth' | 'timeout_ms'>;
  file: string;
  format: Exclude<ArchiveFormat, 'auto'>;
  /** The artifact's name, for single-stream and image entries. */
  name: string;
  archiveBytes: number;
  /** When the extraction's timeout_ms runs out (epoch ms). */
  deadlineAt: number;
}

export interface UnpackOutcome {
  rows: ManifestRow[];
  archives: ArchiveRow[];
  error: ToolError | null;
  cleanup: { staging_removed: boolean; output: string | null };
  total: number;
  written: number;
}

/**
 * Reads the artifact (and with recursive: true every nested archive) into the
 * checked writer, then publishes the output or rolls it back. Runs in the
 * extraction thread (unpackThread.ts).
 */
export async function unpack(job: UnpackJob, ctx: ExtractionContext): Promise<UnpackOutcome> {
  const { input, file, format, archiveBytes } = job;
  const limits = input.limits;
  const left = () => Math.max(1_000, job.deadlineAt - Date.now());
  const run = await startExtraction(ctx, limits, archiveBytes, left());
  const { onEntry, rows } = run;
  const plan = (f: ReadPlan['format'], at: string, name: string): ReadPlan => {
    const { total } = run.stats();
    return {
      format: f,
      file: at,
      name,
      entriesLeft: limits.max_entries - rows.length,
      bytesLeft: limits.max_total_bytes - total,
      ratioBytesLeft: limits.max_ratio * Math.max(archiveBytes, 1) - total,
      archiveBytes,
      maxRatio: limits.max_ratio,
      timeoutMs: left(),
    };
  };
  const archives: ArchiveRow[] = [];

  let failure: unknown;
  try {
    const facts = await readArchive(ctx, plan(format, file, job.name), onEntry);
    archives.push({
      path: '',
      depth: 0,
      format,
      status: 'opened',
      entries: rows.length,
      reason: null,
      facts,
    });
    // Recursive: every nested archive written so far is opened in turn, and those it holds after it,
    // under the same global bounds; rows grows while this loop runs.
    for (let i = 0; input.recursive && i < rows.length; i++) {
      const row = rows[i]!;
      if (!row.nested_archive || row.status !== 'written' || row.type !== 'file') continue;
      const where = { path: normalized(row.path), depth: row.depth + 1 };
      if (row.depth + 1 > input.max_depth) {
        row.reason = `nested archive not opened: max_depth=${input.max_depth} reached`;
        archives.push({
          ...where,
          format: null,
          status: 'not_opened',
          entries: 0,
          reason: row.reason,
          facts: null,
        });
        continue;
      }
      run.checkClock();
      const staged = run.staged(row);
      const inner = await formatOf(ctx.sandbox, staged, Math.min(60_000, left()), row.detected_type!);
      if (!inner.format) {
        row.reason = `nested archive not opened: dossier has no reader for ${inner.kind} here`;
        archives.push({
          ...where,
          format: inner.kind,
          status: 'not_opened',
          entries: 0,
          reason: row.reason,
          facts: null,
        });
        continue;
      }
      const before = rows.length;
      try {
        const facts = await readArchive(
          ctx,
          plan(inner.format, staged, path.basename(where.path)),
          run.nestedIn(row),
        );
        row.extracted_to = `${where.path}${NESTED_SUFFIX}`;
        archives.push({
          ...where,
          format: inner.format,
          status: 'opened',
          entries: rows.length - before,
          reason: null,
          facts,
        });
      } catch (err) {
        if (endsExtraction(err)) throw err;
        row.extracted_to = rows.length > before ? `${where.path}${NESTED_SUFFIX}` : null;
        row.reason = `nested archive could not be read completely (${(err as Error).message}); the ${rows.length - before} entries read before that are kept`;
        archives.push({
          ...where,
          format: inner.format,
          status: 'failed',
          entries: rows.length - before,
          reason: row.reason,
          facts: null,
        });
      }
    }
  } catch (err) {
    failure = err;
  }

  const cleanup = await run.settle(failure);
  return { rows, archives, error: failure ? toToolError(failure) : null, cleanup, ...run.stats() };
}
