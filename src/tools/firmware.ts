// extract_firmware: carving of a firmware image by unblob (exact chunk ends,
// unknown chunks with their entropy) and every chunk unpacked, recursively,
// under the bounds of extract_artifact; binwalk's signatures listed in what
// unblob could not read (or over the whole image, or not at all).
import { z } from 'zod';
import { ARTIFACT_DIGEST } from '../domain/types.ts';
import { bounded, defineTool } from './contract.ts';
import { DETECTED_TYPES_NOTE, EXTRACT_LIMITS, extractArtifact, extractInput } from './extract.ts';
import { formatsSentence } from './formats.ts';

export const FIRMWARE_LIMITS = {
  ...EXTRACT_LIMITS,
  max_signatures: { default: 256, max: 10_000, unit: 'signatures carved' },
};

const firmwareInput = z.object({
  artifact: z
    .string()
    .regex(ARTIFACT_DIGEST, {
      error: 'artifact is "sha256:" followed by 64 hex digits (register_artifact returns it)',
    })
    .describe('Digest of a registered firmware image.'),
  limits: extractInput.shape.limits,
  max_signatures: bounded(FIRMWARE_LIMITS.max_signatures, 'binwalk signatures listed'),
  signature_scan: z
    .enum(['unknown', 'image', 'none'])
    .default('unknown')
    .describe(
      "Where binwalk lists signatures: 'unknown' (default) in the chunks unblob matched no format to; 'image' over the whole image, beside unblob (binwalk's pass costs about 0.25 s of CPU per MB, several times unblob's); 'none' nowhere",
    ),
  max_depth: extractInput.shape.max_depth.describe(
    'Archive levels unpacked below the image (unblob recursion; limits.max_depth bounds path components)',
  ),
  timeout_ms: extractInput.shape.timeout_ms,
  detail: extractInput.shape.detail,
  investigation: extractInput.shape.investigation,
});

export type FirmwareInput = z.infer<typeof firmwareInput>;

export const extractFirmwareTool = defineTool({
  name: 'extract_firmware',
  title: 'Extract a firmware image',
  description: `Carve a registered firmware image into its chunks with unblob (exact ends; unknown chunks kept with their entropy, a high-entropy one recorded as a residual unknown), each as carved/0x<offset>.<kind>, and unpack every chunk into <kind>-0x<offset>/, recursively up to max_depth levels, all through the extract_artifact bounds and manifest rules. Formats, by reader: ${formatsSentence()}. binwalk's signatures are listed in the chunks unblob could not read (signature_scan), and the regions it finds there of a kind dossier reads (a uImage) are carved by their stated size.`,
  input: firmwareInput,
  effect: {
    idempotent: false,
    readOnly: false,
    destructive: false,
    openWorld: true,
    effects: ['writes carved regions and filesystems under DOSSIER_HOME/extractions'],
  },
  runsOn: 'extract',
  toolset: 'extraction',
  limits: FIRMWARE_LIMITS,
  collections: {
    entries: {
      description: `Carved chunks and everything unpacked from them: {occurrence, path, type, size, sha256, artifact, detected_type, nested_archive, link_target, executable, status, reason, depth, parent, inner_path, extracted_to}. ${DETECTED_TYPES_NOTE}`,
      filterable: ['type', 'status', 'detected_type', 'path', 'depth', 'artifact'],
    },
    signatures: {
      description:
        'binwalk signatures in the regions signature_scan names: {index, offset, offset_hex, kind, length, description}',
      filterable: ['kind'],
    },
    chunks: extractArtifact.collections.chunks!,
    archives: extractArtifact.collections.archives!,
  },
  maxRunMs: (input) => input.timeout_ms + 30_000,
});
