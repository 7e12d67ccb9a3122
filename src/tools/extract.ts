// extract_artifact: unpack an archive into a new output directory, safely.
// The archive is assumed hostile: every path is checked, links are recorded
// and never created, and every bound has a default and a ceiling.
import { z } from 'zod';
import { ARTIFACT_DIGEST } from '../domain/types.ts';
import { bounded, defineTool, investigationSchema } from './contract.ts';

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
};

export const ARCHIVE_FORMATS = ['zip', 'tar', 'tar.gz', 'tar.bz2', 'tar.xz', 'gzip', '7z'] as const;

export const extractInput = z.object({
  artifact: z
    .string()
    .regex(ARTIFACT_DIGEST, {
      error: 'artifact is "sha256:" followed by 64 hex digits (register_artifact returns it)',
    })
    .describe('Digest of a registered artifact (register_artifact or POST /artifacts).'),
  format: z
    .enum(['auto', ...ARCHIVE_FORMATS])
    .default('auto')
    .describe('Archive format; auto detects it from the content.'),
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
  timeout_ms: bounded(EXTRACT_LIMITS.timeout_ms, 'Wall-clock limit of the extraction'),
  detail: z.enum(['complete', 'summary']).default('complete'),
  investigation: investigationSchema.optional(),
});

export type ExtractInput = z.infer<typeof extractInput>;

export const extractArtifact = defineTool({
  name: 'extract_artifact',
  title: 'Extract an archive',
  description:
    'Unpack a registered archive (zip, tar, tar.gz, tar.bz2, tar.xz, gzip, 7z) into a new output directory. Unsafe paths are refused and recorded, links are recorded and never created, nested archives are listed and not opened; a bound exceeded fails the extraction and leaves no partial tree.',
  input: extractInput,
  effect: {
    idempotent: false,
    readOnly: false,
    destructive: false,
    openWorld: true,
    effects: ['writes an extracted tree under DOSSIER_HOME/extractions'],
  },
  runsOn: 'extract',
  limits: EXTRACT_LIMITS,
  collections: {
    entries: {
      description:
        'One row per archive entry: {occurrence, path, type, size, sha256, detected_type, nested_archive, link_target, executable, status, reason}',
      filterable: ['type', 'status', 'detected_type', 'path'],
    },
  },
  maxRunMs: (input) => input.timeout_ms + 30_000,
});
