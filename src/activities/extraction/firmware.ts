// The extract_firmware effect: the image verified and the launch begun here;
// its carving (unblob, binwalk, the checked writer: carveFirmware.ts) in the
// extraction thread; then its files published and its Evidence made here.
import { outputName, publishOutputs } from '../../evidence/artifacts.ts';
import { stat } from 'node:fs/promises';
import type { FirmwareInput } from '../../tools/firmware.ts';
import type { Effect } from '../effect.ts';
import { foldersOf, typeCounts } from './writer.ts';
import { verifiedArtifact } from '../policy.ts';
import { unblobLimitations, unknownChunkQuestions } from './unblob.ts';
import { MAX_SIGNATURE_REGIONS, type FirmwareOutcome } from './carveFirmware.ts';
import { carveInThread } from './unpackThread.ts';

type Ctx = Parameters<Effect<FirmwareInput>>[1];

/** The carving's outcome and what publishing its files left on this host only. */
type Carving = FirmwareOutcome & { published: { unpublished: number; reason?: string } };

/** The launch's summary: counts of what was carved, unpacked, written and refused. */
function summarize(ctx: Ctx, imageBytes: number, carving: Carving) {
  const { unblob, signatures, error: failure, filesystems, cleanup, total, written, rows } = carving;
  const shownOutput = cleanup.output && outputName(ctx.config.home, cleanup.output);
  const chunks = unblob?.chunks ?? [];
  const unknownChunks = chunks.filter((c) => c.unknown);
  return {
    output: shownOutput,
    signatures: signatures.length,
    chunks: chunks.length,
    carved: rows.filter((r) => r.path.startsWith('carved/') && r.status === 'written').length,
    unknown_chunks: unknownChunks.length,
    unknown_bytes: unknownChunks.filter((c) => c.depth === 0).reduce((n, c) => n + c.size, 0),
    handlers: unblob?.handlers ?? {},
    deepest: unblob ? Math.max(0, ...unblob.tree.map((t) => t.depth)) : 0,
    filesystems,
    entries: rows.length,
    written,
    folders: foldersOf(rows),
    refused: rows.filter((r) => r.status === 'refused').length,
    links_recorded: rows.filter((r) => r.status === 'recorded').length,
    ...typeCounts(rows),
    bytes_written: failure ? 0 : total,
    image_bytes: imageBytes,
    cleanup: { ...cleanup, output: shownOutput },
  };
}

/** One sentence for each thing the Evidence does not cover. */
function limitationsOf(input: FirmwareInput, carving: Carving, refused: number): string[] {
  const { published, signatures, unblob, binwalkFailed, error: failure } = carving;
  const limitations: string[] = [];
  if (published.unpublished)
    limitations.push(
      `${published.unpublished} written files stay on the extracting host only (register them from there): ${published.reason}`,
    );
  if (signatures.length >= input.max_signatures)
    limitations.push(`signatures were capped at max_signatures=${input.max_signatures}`);
  if (refused) limitations.push(`${refused} entries were refused (see status "refused" in entries)`);
  if (unblob) limitations.push(...unblobLimitations(unblob, 'the image'));
  if (binwalkFailed) limitations.push(`binwalk could not list signatures: ${binwalkFailed}`);
  if (carving.unlistedRegions)
    limitations.push(
      `binwalk listed the first ${MAX_SIGNATURE_REGIONS} unknown chunks; ${carving.unlistedRegions} more were not listed (signature_scan "image" lists the whole image)`,
    );
  if (input.signature_scan === 'none')
    limitations.push('binwalk listed no signatures (signature_scan "none")');
  if (failure)
    limitations.push(
      'the extraction failed and was rolled back; entries lists what was read before the failure',
    );
  return limitations;
}

/** The residual unknowns: high-entropy unknown chunks, and chunks carved but not unpacked. */
function unknownsOf(input: FirmwareInput, carving: Carving) {
  const { unblob, filesystems } = carving;
  return [
    ...(unblob ? unknownChunkQuestions(unblob, input.artifact) : []),
    ...(unblob?.chunks ?? [])
      .filter(
        (c) =>
          !c.unknown &&
          !c.extracted &&
          c.kind !== 'padding' &&
          !(c.depth === 0 && filesystems.includes(`${c.kind}-0x${c.start.toString(16)}`)),
      )
      .slice(0, 1_000)
      .map((c) => ({
        question: `What does the ${c.handler} chunk at 0x${c.start.toString(16)} of ${c.path || 'the image'} contain? (it was carved, not unpacked)`,
        scope: `${input.artifact} ${c.path || '.'}@0x${c.start.toString(16)}`,
      })),
  ];
}

export const extractFirmware: Effect<FirmwareInput> = async (input, ctx) => {
  const { artifact, file } = await verifiedArtifact(ctx, input.artifact);
  const deadlineAt = Date.now() + input.timeout_ms;
  const bytes = (await stat(file)).size;
  await ctx.begin();
  const carved = await carveInThread({ input, file, bytes, deadlineAt }, ctx);
  const { unblob, signatures, error, rows } = carved;
  const published =
    !error && carved.cleanup.output
      ? await publishOutputs(ctx.store.blobs, ctx.caller.team, carved.cleanup.output, rows, ctx.signal)
      : { unpublished: 0 };
  const carving: Carving = { ...carved, published };
  const summary = summarize(ctx, bytes, carving);
  return {
    status: !error ? 'succeeded' : error.code === 'cancelled' ? 'cancelled' : 'failed',
    document: {
      artifact: input.artifact,
      limits: input.limits,
      ...summary,
      ...(unblob ? { unblob: { ...unblob, chunks: undefined, carved_by_reader: undefined } } : {}),
    },
    collections: {
      entries: rows,
      chunks: unblob?.chunks ?? [],
      archives: (unblob?.tree ?? []).map((t) => ({
        path: t.path,
        depth: t.depth,
        format: t.handlers.join('+') || 'unknown',
        status: 'opened',
        entries: 0,
        reason: null,
        facts: null,
        reader: 'unblob',
      })),
      signatures: signatures.map((s, i) => ({ index: i, ...s, offset_hex: `0x${s.offset.toString(16)}` })),
    },
    summary,
    truncated: Boolean(error) || signatures.length >= input.max_signatures,
    limitations: limitationsOf(input, carving, summary.refused),
    target: { digest: input.artifact, path: artifact.name ?? undefined },
    error: error ?? undefined,
    unknowns: unknownsOf(input, carving),
  };
};
