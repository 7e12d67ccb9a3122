// The data converter every Temporal client and worker of dossier uses: the
// team payload codec, and failures encoded so the codec seals them too.
import type { DataConverter } from '@temporalio/common';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { TeamPayloadCodec, type PayloadKey } from './codec.ts';

export const FAILURE_CONVERTER_PATH = path.join(
  path.dirname(fileURLToPath(import.meta.url)),
  'failureConverter.cjs',
);

export function dataConverter(keys: PayloadKey[]): DataConverter {
  return { payloadCodecs: [new TeamPayloadCodec(keys)], failureConverterPath: FAILURE_CONVERTER_PATH };
}
