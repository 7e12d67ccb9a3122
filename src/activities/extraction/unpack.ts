// Reading an extraction into the checked writer (writer.ts): the format of
// an archive by its content, one reader per format, and with recursive: true
// every nested archive the writer wrote, level by level, under the same global
// bounds. This runs in the extraction thread (unpackThread.ts), away from the
// gateway's and worker's event loop and heap.
import path from 'node:path';
import { DossierError, toToolError, type ToolError } from '../../domain/errors.ts';
import type { ExtractInput } from '../../tools/extract.ts';
import { decompressed, read7z, readSingle, readTar, type OnEntry } from './archives.ts';
import type { ExtractionContext } from '../effect.ts';
import { readFlash } from './flash.ts';
import {
  apkSigningBlock,
  readAndroidSparse,
  readSquashfs,
  readThroughBsdtar,
  readUImage,
} from './formats.ts';
import { readUnblob, type UnblobFacts } from './unblob.ts';
import { settleUnblobRows } from './unblobRows.ts';
import { readZip } from './zip.ts';
import { NESTED_SUFFIX, normalized, startExtraction, type ManifestRow } from './writer.ts';

import { formatOf, type ArchiveFormat } from './detect.ts';

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
  /** Archive levels unblob may open below this one, this one included. */
  levels: number;
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
    case 'unblob': {
      const unblob = await readUnblob(
        {
          sandbox: ctx.sandbox,
          python: ctx.config.analysis.python,
          file,
          mode: 'artifact',
          depth: plan.levels,
          maxEntries: plan.entriesLeft,
          scratchBytes: Math.min(plan.bytesLeft, plan.ratioBytesLeft),
          timeoutMs,
          progress: (facts) => ctx.progress(facts),
        },
        onEntry,
      );
      if (!unblob.chunks.some((c) => !c.unknown && c.handler !== 'padding'))
        throw new DossierError(
          'unsupported_target',
          `Neither dossier nor unblob ${unblob.version.replace('unblob ', '')} found a format they read in it.`,
          'Check the artifact (list_artifacts shows its type); for a firmware image with several regions use extract_firmware.',
          { chunks: unblob.chunks.slice(0, 16) },
        );
      return { unblob };
    }
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
  /** Who opened it: dossier's own reader, or unblob (its recursion inside one of dossier's levels). */
  reader?: 'dossier' | 'unblob';
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
  /** What unblob reported for each file it read (its output path, "" for the artifact). */
  unblob: { at: string; facts: UnblobFacts }[];
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
  const plan = (f: ReadPlan['format'], at: string, name: string, depth = 0): ReadPlan => {
    const { total } = run.stats();
    return {
      levels: input.recursive ? input.max_depth - depth + 1 : 1,
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

  // Rows unblob already opened or tried (its recursion is its own): never opened again here.
  const settled = new Set<ManifestRow>();
  const afterUnblob = (facts: FormatFacts, from: number, depth: number, parent: string) => {
    const unblob = facts?.unblob as UnblobFacts | undefined;
    if (!unblob) return;
    archives.push(...settleUnblobRows(rows, from, unblob, depth, parent, settled));
    unblobFacts.push({ at: parent, facts: unblob });
  };
  const unblobFacts: { at: string; facts: UnblobFacts }[] = [];

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
    afterUnblob(facts, 0, 0, '');
    // Recursive: every nested archive written so far is opened in turn, and those it holds after it,
    // under the same global bounds; rows grows while this loop runs.
    for (let i = 0; input.recursive && i < rows.length; i++) {
      const row = rows[i]!;
      if (!row.nested_archive || row.status !== 'written' || row.type !== 'file' || settled.has(row))
        continue;
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
          plan(inner.format, staged, path.basename(where.path), where.depth),
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
        afterUnblob(facts, before, where.depth, where.path);
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
  return {
    rows,
    archives,
    unblob: unblobFacts,
    error: failure ? toToolError(failure) : null,
    cleanup,
    ...run.stats(),
  };
}
