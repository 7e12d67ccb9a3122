// The extract_artifact effect: prove the artifact, detect its format by
// content, journal the start, then read it into the checked writer in the
// extraction thread (unpack.ts through unpackThread.ts) and describe what was
// written, refused and left unopened.
import { stat } from 'node:fs/promises';
import { DossierError } from '../../domain/errors.ts';
import type { Sandbox } from '../../sandbox/sandbox.ts';
import { ARCHIVE_FORMATS, type ExtractInput } from '../../tools/extract.ts';
import type { Effect } from '../effect.ts';
import { flashLimitations } from './flash.ts';
import { verifiedArtifact } from '../policy.ts';
import { formatOf, type ArchiveFormat } from './detect.ts';
import { unblobLimitations, unknownChunkQuestions } from './unblob.ts';
import { unpackInThread } from './unpackThread.ts';
import { outputName, publishOutputs } from '../../evidence/artifacts.ts';
import { deadline, foldersOf, normalized, typeCounts } from './writer.ts';

/** What sniff() names that is surely no archive: unblob is not asked about these. */
const NOT_ARCHIVES = new Set(['text', 'elf', 'pe', 'pdf', 'png', 'jpeg', 'empty']);

async function detectFormat(
  sandbox: Sandbox,
  file: string,
  timeoutMs: number,
): Promise<Exclude<ArchiveFormat, 'auto'>> {
  const { format, kind } = await formatOf(sandbox, file, Math.min(60_000, timeoutMs));
  if (format) return format;
  // Bytes dossier does not know: unblob searches them for every format it reads (and says if none).
  if (!NOT_ARCHIVES.has(kind)) return 'unblob';
  throw new DossierError(
    'unsupported_target',
    `The artifact is not an archive this tool reads (it looks like ${kind}).`,
    `extract_artifact reads ${ARCHIVE_FORMATS.join(', ')}; for firmware images with several regions use extract_firmware.`,
    { detected: kind },
  );
}

/** What the extraction could not do, or did only in part. */
function extractLimitations(
  input: ExtractInput,
  { archives, unblob, error: failure }: Awaited<ReturnType<typeof unpackInThread>>,
  refused: number,
  published: { unpublished: number; reason?: string },
): string[] {
  const limitations: string[] = [];
  if (published.unpublished)
    limitations.push(
      `${published.unpublished} written files stay on the extracting host only (register them from there): ${published.reason}`,
    );
  if (refused) limitations.push(`${refused} entries were refused (see status "refused" in entries)`);
  const failedNested = archives.filter((a) => a.status === 'failed').length;
  if (failedNested)
    limitations.push(
      `${failedNested} nested archives could not be read completely (see status "failed" in archives)`,
    );
  if (archives.some((a) => a.status === 'not_opened' && a.reason?.includes('max_depth')))
    limitations.push(`nested archives deeper than max_depth=${input.max_depth} were not opened`);
  for (const a of archives) {
    const flash = a.facts?.flash as Record<string, unknown> | undefined;
    if (flash) limitations.push(...flashLimitations(flash, a.path || 'the artifact'));
  }
  for (const { at, facts } of unblob) limitations.push(...unblobLimitations(facts, at || 'the artifact'));
  if (failure)
    limitations.push(
      'the extraction failed and was rolled back; entries lists what was read before the failure',
    );
  return limitations;
}

export const extractArchive: Effect<ExtractInput> = async (input, ctx) => {
  const { artifact: archive, file } = await verifiedArtifact(ctx, input.artifact);
  const archiveBytes = (await stat(file)).size;
  const left = deadline(input.timeout_ms);
  const format = input.format === 'auto' ? await detectFormat(ctx.sandbox, file, left()) : input.format;
  const limits = input.limits;

  await ctx.begin();
  const unpacked = await unpackInThread(
    {
      input: { limits, recursive: input.recursive, max_depth: input.max_depth, timeout_ms: input.timeout_ms },
      file,
      format,
      name: archive.name ?? 'data',
      archiveBytes,
      deadlineAt: Date.now() + left(),
    },
    ctx,
  );
  const { rows, archives, unblob, error, cleanup, total, written } = unpacked;
  const failure = error;
  // On a store hosts share, what was written is published, so the team registers it from any host.
  const published =
    !failure && cleanup.output
      ? await publishOutputs(ctx.store.blobs, ctx.caller.team, cleanup.output, rows, ctx.signal)
      : { unpublished: 0 };
  const refused = rows.filter((r) => r.status === 'refused').length;
  const recorded = rows.filter((r) => r.status === 'recorded').length;
  const nested = rows.filter((r) => r.nested_archive);
  // Sets and a fold, not a search per row or a spread: a recursive launch may list 100,000 entries.
  const failedArchives = new Set(archives.filter((a) => a.status === 'failed').map((a) => a.path));
  const unopened = nested.filter((r) => !r.extracted_to || failedArchives.has(normalized(r.path)));
  const shownOutput = cleanup.output && outputName(ctx.config.home, cleanup.output);
  const summary = {
    format,
    output: shownOutput,
    entries: rows.length,
    // Files; a folder's row is status "written" too, counted apart: entries is the four added up.
    written,
    folders: foldersOf(rows),
    refused,
    links_recorded: recorded,
    ...typeCounts(rows),
    nested_archives: nested.length,
    ...(input.recursive
      ? {
          recursive: true,
          max_depth: input.max_depth,
          nested_opened: archives.filter((a) => a.depth > 0 && a.status === 'opened').length,
          deepest: rows.reduce((deepest, r) => Math.max(deepest, r.depth), 0),
        }
      : {}),
    bytes_written: failure ? 0 : total,
    archive_bytes: archiveBytes,
    ...(archives[0]?.facts?.unblob ? {} : (archives[0]?.facts ?? {})),
    ...(unblob.length ? { unblob: unblobSummary(unblob.map((u) => u.facts)) } : {}),
    cleanup: { ...cleanup, output: shownOutput },
  };
  // Chunk paths are relative to the file unblob read: made relative to the output here.
  const chunks = unblob.flatMap(({ at, facts }) =>
    facts.chunks.map((c) => ({
      ...c,
      path: at ? `${at}${c.path ? `.extracted/${c.path}` : ''}` : c.path,
      carved_to: c.carved_to && (at ? `${at}.extracted/${c.carved_to}` : c.carved_to),
    })),
  );
  const limitations = extractLimitations(input, unpacked, refused, published);
  return {
    // A cancel is the launch's own end, not a failure of the archive.
    status: !failure ? 'succeeded' : failure.code === 'cancelled' ? 'cancelled' : 'failed',
    document: {
      artifact: input.artifact,
      limits,
      ...summary,
      ...(unblob.length
        ? { unblob: unblob.map(({ at, facts }) => ({ at, ...facts, chunks: undefined })) }
        : {}),
    },
    collections: { entries: rows, archives, chunks },
    summary,
    truncated: Boolean(failure),
    limitations,
    target: { digest: input.artifact, path: archive.name ?? undefined },
    error: failure ?? undefined,
    unknowns: [
      ...(input.recursive ? unopened : nested).slice(0, 1_000).map((r) => ({
        question: `What does the nested ${r.detected_type} archive ${r.path} contain?`,
        scope: `${input.artifact} ${r.path}`,
      })),
      ...unblob.flatMap(({ at, facts }) => unknownChunkQuestions(facts, `${input.artifact} ${at}`.trim())),
    ],
  };
};

/** unblob's runs in one line each: handlers met, chunks, unknown bytes. */
function unblobSummary(runs: import('./unblob.ts').UnblobFacts[]) {
  const handlers: Record<string, number> = {};
  for (const r of runs) for (const [h, n] of Object.entries(r.handlers)) handlers[h] = (handlers[h] ?? 0) + n;
  const chunks = runs.flatMap((r) => r.chunks);
  const unknown = chunks.filter((c) => c.unknown);
  return {
    version: runs[0]!.version,
    runs: runs.length,
    handlers,
    chunks: chunks.length,
    unknown_chunks: unknown.length,
    unknown_bytes: unknown.reduce((n, c) => n + c.size, 0),
    deepest: runs.reduce((d, r) => Math.max(d, ...r.tree.map((t) => t.depth)), 0),
  };
}
