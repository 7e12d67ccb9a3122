// extract_artifact: unpack an archive into a new output directory, safely.
// The archive is assumed hostile: every path is checked, links are recorded
// and never created, and every bound has a default and a ceiling.
import { z } from 'zod';
import { ARTIFACT_DIGEST } from '../domain/types.ts';
import { bounded, defineTool, investigationSchema, detailSchema } from './contract.ts';
import { ARCHIVE_FORMATS, formatsSentence } from './formats.ts';

export const EXTRACT_LIMITS = {
  max_entries: { default: 10_000, max: 100_000, unit: 'entries' },
  max_total_bytes: {
    default: 1024 * 1024 * 1024,
    max: 16 * 1024 * 1024 * 1024,
    unit: 'bytes written in all',
  },
  max_entry_bytes: { default: 256 * 1024 * 1024, max: 4 * 1024 * 1024 * 1024, unit: 'bytes per entry' },
  max_ratio: { default: 1_000, max: 100_000, unit: 'bytes written per archive byte' },
  max_depth: { default: 32, max: 256, unit: 'path components' },
  timeout_ms: { default: 300_000, max: 3_600_000, unit: 'ms' },
  nesting: { default: 10, max: 16, unit: 'archive levels below the artifact (recursive)' },
};

export { ARCHIVE_FORMATS };

/**
 * The values of an entry's detected_type (sniffed from its first bytes), as the summary counts
 * them; the collection descriptions name them so a filter is never guessed.
 */
export const DETECTED_TYPES_NOTE =
  'detected_type is one of elf, pe, text, data, empty, png, jpeg, pdf, or an archive format (zip, tar, gzip, xz, squashfs, …); the summary counts written files by it (detected_types) and view_by_type pages one type: where {detected_type: ["elf"]}.';

export const extractInput = z.object({
  artifact: z
    .string()
    .regex(ARTIFACT_DIGEST, {
      error: 'artifact is "sha256:" followed by 64 hex digits (register_artifact returns it)',
    })
    .describe(
      "Digest of a registered artifact (register_artifact, POST /artifacts), or an entry's artifact value from your team's extraction.",
    ),
  format: z
    .enum(['auto', ...ARCHIVE_FORMATS])
    .default('auto')
    .describe(
      "Archive format; auto detects it from the content (dossier's readers first, then unblob); unblob lets unblob identify and read it.",
    ),
  limits: z
    .strictObject({
      max_entries: bounded(EXTRACT_LIMITS.max_entries, 'Entries in the archive'),
      max_total_bytes: bounded(EXTRACT_LIMITS.max_total_bytes, 'Bytes written in all'),
      max_entry_bytes: bounded(EXTRACT_LIMITS.max_entry_bytes, 'Bytes of one entry'),
      max_ratio: bounded(EXTRACT_LIMITS.max_ratio, 'Bytes written per byte of archive'),
      max_depth: bounded(EXTRACT_LIMITS.max_depth, 'Path depth'),
    })
    .prefault({})
    .describe('Bounds; exceeding one fails the extraction and rolls it back.'),
  recursive: z
    .boolean()
    .default(false)
    .describe(
      'Also open every nested archive found (and those inside them), in the same launch and under the same bounds; a nested archive at P is unpacked into P.extracted/.',
    ),
  max_depth: bounded(
    EXTRACT_LIMITS.nesting,
    'With recursive: how many archive levels below the artifact are opened (limits.max_depth bounds path components)',
  ),
  timeout_ms: bounded(EXTRACT_LIMITS.timeout_ms, 'Wall-clock limit of the extraction'),
  detail: detailSchema,
  investigation: investigationSchema.optional(),
});

export type ExtractInput = z.infer<typeof extractInput>;

export const extractArtifact = defineTool({
  name: 'extract_artifact',
  title: 'Extract an archive',
  description: `Unpack a registered archive, compressed stream, file system or firmware container into a new output directory; the format is detected from the content. Formats, by reader: ${formatsSentence()}. unblob's chunks (exact offsets and sizes; unknown ones with their entropy, a high-entropy one recorded as a residual unknown) and its recursion tree are kept. Unsafe paths are refused and recorded, links are recorded and never created. Nested archives are listed, or with recursive: true opened in the same launch (up to max_depth levels) under the same global bounds, each entry keeping its depth, parent and inner path. Any written entry can be registered as an artifact with register_artifact {evidence_id, entry}. A bound exceeded fails the extraction and leaves no partial tree.`,
  input: extractInput,
  effect: {
    idempotent: false,
    readOnly: false,
    destructive: false,
    openWorld: true,
    effects: ['writes an extracted tree under DOSSIER_HOME/extractions'],
  },
  runsOn: 'extract',
  toolset: 'extraction',
  limits: EXTRACT_LIMITS,
  collections: {
    entries: {
      description: `One row per archive entry: {occurrence, path, type, size, sha256, artifact, detected_type, nested_archive, link_target, executable, status, reason, depth, parent, inner_path, extracted_to}. path is where it was written in the output; for an entry of a nested archive, parent is that archive's path and inner_path its name inside it. artifact ("sha256:…") is what analysis tools take for a written file. ${DETECTED_TYPES_NOTE}`,
      filterable: ['type', 'status', 'detected_type', 'path', 'depth', 'parent', 'artifact'],
    },
    archives: {
      description:
        'One row per archive read, the recursion tree: the artifact ("" path, depth 0) and every nested archive opened (by dossier with recursive, or by unblob inside what it read): {path, depth, format, status (opened, failed, not_opened), entries, reason, facts, reader}.',
      filterable: ['status', 'format', 'depth', 'reader'],
    },
    chunks: {
      description:
        'unblob\'s chunks, one row per chunk of every file it read: {path (the file, "" for the artifact), depth, start, end, size, handler, kind, unknown, carved_to, entropy (bits per byte, unknown chunks), entropy_sampled, encrypted, extracted}.',
      filterable: ['handler', 'kind', 'unknown', 'path', 'depth'],
    },
  },
  maxRunMs: (input) => input.timeout_ms + 30_000,
});
