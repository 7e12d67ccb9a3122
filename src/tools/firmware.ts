// extract_firmware: signature scan and carving of a firmware image, with
// squashfs filesystems unpacked, under the bounds of extract_artifact.
import { z } from 'zod';
import { ARTIFACT_DIGEST } from '../domain/types.ts';
import { bounded, defineTool } from './contract.ts';
import { EXTRACT_LIMITS, extractInput } from './extract.ts';

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
  max_signatures: bounded(FIRMWARE_LIMITS.max_signatures, 'Signatures carved'),
  timeout_ms: extractInput.shape.timeout_ms,
  detail: extractInput.shape.detail,
  investigation: extractInput.shape.investigation,
});

export type FirmwareInput = z.infer<typeof firmwareInput>;

export const extractFirmwareTool = defineTool({
  name: 'extract_firmware',
  title: 'Extract a firmware image',
  description:
    'Scan a registered firmware image for signatures with binwalk, carve every region into its own file, and unpack squashfs filesystems with unsquashfs, all into a new output directory under the extract_artifact bounds and manifest rules.',
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
      description:
        'Carved regions and filesystem entries: {occurrence, path, type, size, sha256, detected_type, link_target, status, reason}',
      filterable: ['type', 'status', 'detected_type', 'path'],
    },
    signatures: {
      description: 'binwalk signatures: {index, offset, offset_hex, kind, length, description}',
      filterable: ['kind'],
    },
  },
  maxRunMs: (input) => input.timeout_ms + 30_000,
});
