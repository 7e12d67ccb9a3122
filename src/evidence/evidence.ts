// Builds a retained Evidence record from a tool's complete result. Pure: the
// id is the SHA-256 of the canonical record, so equal content means equal id.
import { canonicalJson, sha256Hex } from '../domain/canonical.ts';
import type { EvidenceRecord, NewEvidence } from './types.ts';

export interface BuiltEvidence {
  record: EvidenceRecord;
  documentJson: string;
  rows: { collection: string; sourceIndex: number; json: string }[];
}

export function buildEvidence(input: NewEvidence): BuiltEvidence {
  const documentJson = canonicalJson({ ...input.document, collections: input.collections });
  const collections: Record<string, { rows: number }> = {};
  const rows: BuiltEvidence['rows'] = [];
  for (const [collection, items] of Object.entries(input.collections)) {
    collections[collection] = { rows: items.length };
    items.forEach((item, sourceIndex) => rows.push({ collection, sourceIndex, json: canonicalJson(item) }));
  }
  const withoutId = {
    ...input.record,
    collections,
    document: { bytes: Buffer.byteLength(documentJson), digest: sha256Hex(documentJson) },
  };
  const evidenceId = `ev_${sha256Hex(canonicalJson(withoutId))}`;
  return { record: { evidence_id: evidenceId, ...withoutId }, documentJson, rows };
}
