// extract_firmware's carving, in the extraction thread (unpackThread.ts):
// unblob carves the image into chunks and unpacks them, recursively, in the
// sandbox (unblob.ts), its tree streamed through the checked writer; squashfs
// chunks (unblob's extractor, sasquatch, is in no registry) become a tar stream
// from sqfs2tar in the sandbox. binwalk lists signatures in the sandbox (it
// never extracts: its own extractors have written outside their folder before):
// by default in the chunks unblob could not read, where they say most (its pass
// over a whole image costs several times unblob's); a region of a kind dossier
// reads that unblob did not find (a uImage) is carved by dossier by its stated
// size. Links are recorded, never created, and every bound holds while writing.
import { fileURLToPath } from 'node:url';
import { toToolError, type ToolError } from '../../domain/errors.ts';
import { runHelper } from '../../sandbox/helpers.ts';
import { helperPath } from '../../sandbox/sandbox.ts';
import type { FirmwareInput } from '../../tools/firmware.ts';
import { UNBLOB_HANDLERS } from '../../tools/unblobHandlers.ts';
import type { ExtractionContext } from '../effect.ts';
import { readSquashfs } from './formats.ts';
import type { OnEntry } from './archives.ts';
import { carvedName, ImageCarver, inTurn, offsetIn, writeRange } from './imageChunks.ts';
import { readUnblob, type TopChunks, type UnblobFacts } from './unblob.ts';
import { deadline, normalized, startExtraction, type ManifestRow } from './writer.ts';

/** binwalk's kinds dossier carves itself when unblob found no chunk there (unblob has no uImage handler). */
const CARVED_BY_DOSSIER = new Set(['uimage', 'squashfs']);
/** Chunk kinds that are file systems, for the summary's `filesystems`. */
const FILESYSTEMS = new Set<string>(
  UNBLOB_HANDLERS.filter((h) => h.type === 'FileSystem').map((h) => h.kind),
);

export interface Signature {
  offset: number;
  description: string;
  kind: string;
  length: number;
}

/** Regions binwalk lists at most in one run (unblob's unknown chunks; the rest are left unlisted, and said so). */
export const MAX_SIGNATURE_REGIONS = 1_024;

/**
 * Parses binwalk_regions.py's listing: `region START END`, then `DECIMAL 0xHEX DESCRIPTION` lines.
 * A signature's length is the size it states, else up to the next signature of its region or the
 * region's end; never past the image's end.
 */
export function parseSignatures(table: string, fileBytes: number, max: number): Signature[] {
  const found: { offset: number; description: string; end: number }[] = [];
  let end = fileBytes;
  for (const line of table.split('\n')) {
    const region = /^region (\d+) (\d+)$/.exec(line.trim());
    if (region) end = Math.min(Number(region[2]), fileBytes);
    const m = /^(\d+)\s+0x[0-9A-Fa-f]+\s+(.+)$/.exec(line.trim());
    if (m && found.length < max) found.push({ offset: Number(m[1]), description: m[2]!.trim(), end });
  }
  return found.map(({ end, ...f }, i) => {
    const following = found[i + 1];
    const next = following && following.end === end ? following.offset : end;
    // A uImage states its payload's size after its header's ("header size: 64 bytes, … image size: N bytes"):
    // the region is the header and that payload. Others state the size of the whole region.
    const image = /^uImage header.*\bimage size: (\d+) bytes/.exec(f.description);
    const stated = image
      ? [image[0], String(64 + Number(image[1]))]
      : /(?<!header )size: (\d+) bytes/.exec(f.description);
    const length = Math.max(0, Math.min(stated ? Number(stated[1]) : next - f.offset, fileBytes - f.offset));
    const kind = (/^[A-Za-z0-9]+/.exec(f.description)?.[0] ?? 'data').toLowerCase();
    return { ...f, kind, length };
  });
}

type Extraction = Awaited<ReturnType<typeof startExtraction>>;
type Ctx = ExtractionContext;

/** One image's carving, as the extraction thread receives it. */
export interface FirmwareJob {
  input: FirmwareInput;
  /** The verified image. */
  file: string;
  bytes: number;
  /** When the launch's timeout_ms runs out (epoch ms). */
  deadlineAt: number;
}

interface Image {
  input: FirmwareInput;
  file: string;
  bytes: number;
  left: () => number;
}

const BINWALK_REGIONS = fileURLToPath(new URL('binwalk_regions.py', import.meta.url));

interface Listing {
  /** The regions asked for, as `start:size` (to tell whether a listing is of the regions wanted). */
  asked: string;
  table: Promise<string>;
  /** Regions asked for beyond MAX_SIGNATURE_REGIONS (left unlisted). */
  unlisted: number;
  failed: () => string | null;
  /** Stops binwalk: its listing is not wanted. */
  stop: () => void;
}

/** Regions as a listing names them (`start:size`, the empty ones left out). */
const regionKey = (regions: { start: number; size: number }[]) =>
  regions
    .filter((r) => r.size > 0)
    .map((r) => `${r.start}:${r.size}`)
    .join(' ');

/** binwalk lists the signatures in `regions` of the image, in the sandbox: it only reads the image. */
function listSignatures(
  ctx: Ctx,
  image: Image,
  regions: { start: number; size: number }[],
  signal: AbortSignal,
): Listing {
  let failed: string | null = null;
  const own = new AbortController();
  const stopped = AbortSignal.any([signal, own.signal]);
  const asked = regions.filter((r) => r.size > 0);
  const listed = asked.slice(0, MAX_SIGNATURE_REGIONS);
  const table = (async () => {
    if (listed.length === 0) return '';
    helperPath('binwalk', 'binwalk'); // a clear error where it is not installed
    return runHelper(ctx.sandbox, {
      program: 'python3',
      pkg: 'python3',
      args: ['/input/binwalk_regions.py', '/input/image', ...listed.map((r) => `${r.start}:${r.size}`)],
      mounts: [
        { host: image.file, inside: '/input/image' },
        { host: BINWALK_REGIONS, inside: '/input/binwalk_regions.py' },
      ],
      timeoutMs: image.left(),
      signal: stopped,
    });
  })().catch((err: Error) => {
    failed = err.message;
    return '';
  });
  return {
    asked: regionKey(asked),
    table,
    unlisted: asked.length - listed.length,
    failed: () => failed,
    stop: () => own.abort(),
  };
}

/**
 * The top-level regions unblob matched no format to (the whole image when it found nothing there),
 * each inside the image: they become binwalk's arguments, whether from the early chunks or the facts.
 */
function unknownRegions(unblob: TopChunks, bytes: number): { start: number; size: number }[] {
  const top = unblob.chunks.filter((c) => c.depth === 0 && c.path === '');
  if (top.length === 0 && !unblob.whole_file) return [{ start: 0, size: bytes }];
  const inside = offsetIn(bytes);
  return top
    .filter((c) => c.unknown === true && inside(c.start) && inside(c.size) && c.start + c.size <= bytes)
    .map((c) => ({ start: c.start, size: c.size }));
}

/**
 * unblob carves and unpacks the image into the writer; each entry's depth is its `…_extract/` folders.
 * `onTop` hears the image's own chunks as soon as unblob has found them, while it extracts them.
 */
async function carveWithUnblob(
  ctx: Ctx,
  image: Image,
  write: OnEntry,
  signal: AbortSignal,
  onTop: (top: TopChunks) => void,
): Promise<UnblobFacts> {
  const { input } = image;
  const unblob = await readUnblob(
    {
      sandbox: ctx.sandbox,
      python: ctx.config.analysis.python,
      file: image.file,
      mode: 'firmware',
      depth: input.max_depth + 1,
      maxEntries: input.limits.max_entries,
      scratchBytes: Math.min(input.limits.max_total_bytes, input.limits.max_ratio * Math.max(image.bytes, 1)),
      timeoutMs: image.left(),
      progress: (facts) => ctx.progress(facts),
      signal,
      onTop,
    },
    write,
  );
  return unblob;
}

/** Each entry's depth: one level per `…_extract/` folder below the chunk's own folder. */
function setDepths(out: Extraction) {
  for (const row of out.rows) {
    const parts = normalized(row.path).split('/');
    row.depth =
      parts.slice(1, -1).filter((p) => p.endsWith('_extract')).length +
      (parts.length > 1 && parts[0] !== 'carved' ? 1 : 0);
  }
}

/** Regions binwalk names of a kind dossier reads that unblob found no chunk at (a uImage), carved by their size. */
async function carveByDossier(image: Image, out: Extraction, unblob: UnblobFacts, signatures: Signature[]) {
  const taken = new Set(out.rows.map((r) => normalized(r.path)));
  const known = new Set(unblob.chunks.filter((c) => c.depth === 0 && !c.unknown).map((c) => c.start));
  for (const sig of signatures) {
    const name = carvedName(sig.offset, sig.kind);
    if (!CARVED_BY_DOSSIER.has(sig.kind) || known.has(sig.offset) || taken.has(name) || sig.length === 0)
      continue;
    await writeRange(out.onEntry, name, {
      file: image.file,
      start: sig.offset,
      end: sig.offset + sig.length,
    });
    taken.add(name);
  }
}

/** Squashfs chunks unblob could not unpack: sqfs2tar turns each into a tar stream in the sandbox. */
async function unpackSquashfs(ctx: Ctx, image: Image, out: Extraction) {
  for (const row of [...out.rows]) {
    const m = /^carved\/0x([0-9a-f]+)\.squashfs$/.exec(normalized(row.path));
    if (!m || row.status !== 'written') continue;
    const prefix = `squashfs-0x${m[1]}`;
    if (out.rows.some((r) => normalized(r.path).startsWith(`${prefix}/`))) continue;
    await readSquashfs(ctx.sandbox, out.staged(row), image.left(), (entry) =>
      out.onEntry(
        { ...entry, name: `${prefix}/${entry.name.replace(/^\.?\/+/, '')}` },
        { depth: 1, parent: null },
      ),
    );
    row.extracted_to = prefix;
  }
}

/** The file systems unpacked at the top: `<kind>-0x<offset>` folders of a file-system kind. */
function filesystemsOf(out: Extraction): string[] {
  return [
    ...new Set(
      out.rows
        .map((r) => /^([a-z0-9_]+)-0x[0-9a-f]+(?=\/)/.exec(normalized(r.path)))
        .filter((m): m is RegExpExecArray => m !== null && (FILESYSTEMS.has(m[1]!) || m[1] === 'squashfs'))
        .map((m) => m[0]),
    ),
  ];
}

/** What the carving did, as it crosses back from the extraction thread. */
export interface FirmwareOutcome {
  rows: ManifestRow[];
  total: number;
  written: number;
  unblob: UnblobFacts | null;
  signatures: Signature[];
  binwalkFailed: string | null;
  unlistedRegions: number;
  /** What ended the carving (it was rolled back), or null. */
  error: ToolError | null;
  filesystems: string[];
  cleanup: Awaited<ReturnType<Extraction['settle']>>;
}

/**
 * Everything the launch does to the disk but publishing: carving, unpacking and settling the
 * output. This runs in the extraction thread (unpackThread.ts), away from the gateway's and the
 * worker's heap: its hundreds of MB of buffers set off full collections there.
 */
export async function carveFirmware(job: FirmwareJob, ctx: Ctx): Promise<FirmwareOutcome> {
  const { input } = job;
  const image: Image = {
    input,
    file: job.file,
    bytes: job.bytes,
    left: deadline(job.deadlineAt - Date.now()),
  };
  // Every helper of the carving stops with the launch, and with the carving when a step fails.
  const failed = new AbortController();
  const stopHelpers = AbortSignal.any([ctx.signal, failed.signal]);
  // The whole image's listing runs beside unblob; the unknown regions' waits for unblob's chunks.
  const whole =
    input.signature_scan === 'image'
      ? listSignatures(ctx, image, [{ start: 0, size: image.bytes }], stopHelpers)
      : null;
  const out = await startExtraction(ctx, input.limits, image.bytes, image.left());
  let unblob: UnblobFacts | null = null;
  let binwalk: Listing | null = whole;
  let signatures: Signature[] = [];
  let failure: unknown;
  const write = inTurn((entry) => out.onEntry(entry));
  const carver = new ImageCarver(image, write, () => failed.abort());
  // As soon as unblob has found the image's chunks, while it still extracts them: dossier carves them
  // from the image, and binwalk's listing of the unknown ones starts (it is started again, of the
  // regions the facts name, in the case they differ).
  const onTop = (chunks: TopChunks) => {
    carver.told(chunks);
    if (input.signature_scan === 'unknown')
      binwalk = listSignatures(ctx, image, unknownRegions(chunks, image.bytes), stopHelpers);
  };
  try {
    unblob = await carveWithUnblob(ctx, image, carver.fromTar(write), stopHelpers, onTop).catch(
      (err: unknown) => {
        // unblob stopped because the early carving failed: that failure is the reason.
        throw carver.failed ?? err;
      },
    );
    await carver.settle(unblob);
    setDepths(out);
    if (input.signature_scan === 'unknown') {
      const regions = unknownRegions(unblob, image.bytes);
      if (binwalk?.asked !== regionKey(regions)) {
        binwalk?.stop();
        binwalk = listSignatures(ctx, image, regions, stopHelpers);
      }
      ctx.progress({ phase: 'binwalk: listing the signatures of the unknown chunks' });
    }
    if (binwalk) signatures = parseSignatures(await binwalk.table, image.bytes, input.max_signatures);
    await carveByDossier(image, out, unblob, signatures);
    await unpackSquashfs(ctx, image, out);
  } catch (err) {
    failure = err;
    failed.abort(); // binwalk's listing, if it still runs, is of no use now
    await carver.close(); // the writer settles only once nothing writes to it
  }
  const filesystems = filesystemsOf(out);
  const cleanup = await out.settle(failure);
  return {
    rows: out.rows,
    ...out.stats(),
    unblob,
    signatures,
    binwalkFailed: binwalk?.failed() ?? null,
    unlistedRegions: binwalk?.unlisted ?? 0,
    error: failure === undefined ? null : toToolError(failure),
    filesystems,
    cleanup,
  };
}
