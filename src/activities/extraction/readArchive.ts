// One archive of a known format read into the checked writer (writer.ts): the
// reader of each format, and what the format states about itself beyond its
// entries. unpack.ts calls it for the artifact and for every nested archive.
import { DossierError } from '../../domain/errors.ts';
import { decompressed, read7z, readSingle, type OnEntry } from './archives.ts';
import { readTar } from './tar.ts';
import type { ExtractionContext } from '../effect.ts';
import type { ArchiveFormat } from './detect.ts';
import { readFlash } from './flash.ts';
import {
  apkSigningBlock,
  readAndroidSparse,
  readSquashfs,
  readThroughBsdtar,
  readUImage,
} from './formats.ts';
import { readUnblob, type UnblobFacts } from './unblob.ts';
import { readZip } from './zip.ts';

const TAR_COMPRESSION = { tar: 'none', 'tar.gz': 'gzip', 'tar.bz2': 'bzip2', 'tar.xz': 'xz' } as const;
const SINGLE_SUFFIX = { gzip: /\.gz$|\.tgz$/, bzip2: /\.bz2$/, xz: /\.xz$/ } as const;

/** What a format states about itself beyond its entries (uImage header, APK signing block, sparse counts). */
export type FormatFacts = Record<string, unknown> | null;

export interface ReadPlan {
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
export async function readArchive(
  ctx: ExtractionContext,
  plan: ReadPlan,
  onEntry: OnEntry,
): Promise<FormatFacts> {
  const { format, file, timeoutMs } = plan;
  switch (format) {
    case 'zip':
    case 'apk':
      return readZipOrApk(file, format, onEntry);
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
        format,
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
    case 'unblob':
      return { unblob: await readWithUnblob(ctx, plan, onEntry) };
  }
}

/** A zip, or an APK (a zip with AndroidManifest.xml) with its signing block. */
async function readZipOrApk(file: string, format: 'zip' | 'apk', onEntry: OnEntry): Promise<FormatFacts> {
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

/** A format only unblob reads: refused when unblob found nothing it knows in it. */
async function readWithUnblob(
  ctx: ExtractionContext,
  plan: ReadPlan,
  onEntry: OnEntry,
): Promise<UnblobFacts> {
  const { file, timeoutMs } = plan;
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
      signal: ctx.signal,
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
  return unblob;
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
