// Builds a retained Evidence record from a tool's complete result. Pure: the
// id is the SHA-256 of the canonical record, so equal content means equal id.
// Collections become individual rows with their source_index, and every
// filterable field becomes index keys, so a page never needs the whole result.
import { canonicalJson, digestOf, sha256Hex } from './canonical.ts';
import type { CollectionInfo, EvidenceRecord, NewEvidence, NewUnknown } from './types.ts';

export const RESIDUAL_UNKNOWNS = 'residual_unknowns';

export interface BuiltRow {
  collection: string;
  sourceIndex: number;
  json: string;
}
export interface BuiltKey {
  collection: string;
  field: string;
  value: string;
  ordinal: number;
  sourceIndex: number;
}
export interface BuiltUnknown extends NewUnknown {
  unknown_id: string;
}

export interface BuiltEvidence {
  record: EvidenceRecord;
  documentJson: string;
  rows: BuiltRow[];
  keys: BuiltKey[];
  counts: { collection: string; field: string; value: string; rows: number }[];
  unknowns: BuiltUnknown[];
}

/** A stable identity from the question and its scope: recording it twice is one unknown. */
export function unknownId(u: NewUnknown): string {
  return `unk_${digestOf({ question: u.question, scope: u.scope }).slice(0, 32)}`;
}

/** The index key of a filter value: canonical JSON, so type and spelling must match exactly. */
export function keyOf(value: unknown): string | undefined {
  if (value === null || ['string', 'number', 'boolean'].includes(typeof value)) return canonicalJson(value);
  return undefined;
}

/** A row's value at a filterable field: a name, or a dotted path into nested objects ("owner.outcome"). */
export function fieldValue(row: unknown, field: string): unknown {
  let value: unknown = row;
  for (const part of field.split('.')) {
    if (value === null || typeof value !== 'object' || Array.isArray(value)) return undefined;
    value = (value as Record<string, unknown>)[part];
  }
  return value;
}

/** Rows built between two chances for the caller to let other work run (see buildEvidenceInSteps). */
const STEP_ROWS = 2_000;

export function buildEvidence(input: NewEvidence): BuiltEvidence {
  const steps = buildEvidenceInSteps(input);
  for (;;) {
    const next = steps.next();
    if (next.done) return next.value;
  }
}

/**
 * The same build, pausing every STEP_ROWS rows: a caller on a shared event loop
 * (the embedded stack's worker beside its gateway) yields between steps, so a
 * result of hundreds of thousands of rows never stalls other calls.
 */
export function* buildEvidenceInSteps(input: NewEvidence): Generator<void, BuiltEvidence> {
  const collectionsIn: Record<string, unknown[]> = { ...input.collections };
  const filterableIn: Record<string, string[]> = { ...input.filterable };
  const unknowns: BuiltUnknown[] = [];
  const seen = new Set<string>();
  for (const u of input.unknowns ?? []) {
    const id = unknownId(u);
    if (seen.has(id)) continue;
    seen.add(id);
    unknowns.push({ unknown_id: id, question: u.question, scope: u.scope });
  }
  if (unknowns.length > 0) {
    collectionsIn[RESIDUAL_UNKNOWNS] = unknowns;
    filterableIn[RESIDUAL_UNKNOWNS] = ['unknown_id', 'scope'];
  }

  const documentJson = canonicalJson(input.document);
  const collections: Record<string, CollectionInfo> = {};
  const rows: BuiltRow[] = [];
  const keys: BuiltKey[] = [];
  const counts: BuiltEvidence['counts'] = [];
  for (const name of Object.keys(collectionsIn).sort()) {
    const items = collectionsIn[name]!;
    const filterable = [...new Set(filterableIn[name] ?? [])].sort();
    const hash = sha256Hex.stream();
    let bytes = 0;
    const ordinals = new Map<string, number>();
    for (let sourceIndex = 0; sourceIndex < items.length; sourceIndex++) {
      if (sourceIndex % STEP_ROWS === STEP_ROWS - 1) yield;
      const item = items[sourceIndex];
      const json = canonicalJson(item);
      rows.push({ collection: name, sourceIndex, json });
      hash.update(sourceIndex === 0 ? json : `\n${json}`);
      bytes += Buffer.byteLength(json) + 1;
      for (const field of filterable) {
        const raw = fieldValue(item, field);
        const values = new Set((Array.isArray(raw) ? raw : [raw]).map(keyOf).filter((k) => k !== undefined));
        for (const value of values) {
          const counter = `${field}\u0000${value}`;
          const ordinal = ordinals.get(counter) ?? 0;
          ordinals.set(counter, ordinal + 1);
          keys.push({ collection: name, field, value, ordinal, sourceIndex });
        }
      }
    }
    for (const [counter, n] of ordinals) {
      const [field, value] = counter.split('\u0000') as [string, string];
      counts.push({ collection: name, field, value, rows: n });
    }
    collections[name] = { rows: items.length, bytes, digest: hash.digest(), filterable };
  }
  const withoutId = {
    ...input.record,
    collections,
    document: { bytes: Buffer.byteLength(documentJson), digest: sha256Hex(documentJson) },
  };
  const evidenceId = `ev_${digestOf(withoutId)}`;
  return { record: { evidence_id: evidenceId, ...withoutId }, documentJson, rows, keys, counts, unknowns };
}

/** Recomputes an Evidence id from its record, for bundle verification. */
export function evidenceIdOf(record: EvidenceRecord): string {
  const { evidence_id: _id, ...withoutId } = record;
  return `ev_${digestOf(withoutId)}`;
}

/** The digest a collection's rows must have, for bundle verification. */
export function collectionDigest(rows: unknown[]): string {
  const hash = sha256Hex.stream();
  rows.forEach((row, i) => hash.update(i === 0 ? canonicalJson(row) : `\n${canonicalJson(row)}`));
  return hash.digest();
}
