// Evidence bundles: a canonical JSON file that carries complete Evidence
// (record, document, every row) from one store to another. Every entry's id is
// recomputed on import, which checks its document and collection digests too;
// one mismatch refuses the whole bundle.
import { canonicalJson, sha256Hex } from '../domain/canonical.ts';
import { DossierError } from '../domain/errors.ts';
import { BUNDLE_LIMITS } from '../tools/ledger.ts';
import { buildEvidence, RESIDUAL_UNKNOWNS, type BuiltEvidence } from '../domain/evidence.ts';
import type { EvidenceStore } from '../store/evidence.ts';
import type { EvidenceRecord, NewUnknown } from '../domain/types.ts';
import { JSON_DEPTH, JsonTooDeep, parseBoundedJson } from '../domain/json.ts';

export const BUNDLE_FORMAT = 'dossier.evidence-bundle/1';

interface BundleEntry {
  record: EvidenceRecord;
  document: Record<string, unknown>;
  collections: Record<string, unknown[]>;
}

export async function buildBundle(store: EvidenceStore, team: string, evidenceIds: string[]) {
  const evidence: BundleEntry[] = [];
  let bytes = 0;
  for (const id of [...new Set(evidenceIds)]) {
    const record = await store.get(team, id);
    const document = await store.document(team, id);
    if (!record || !document) {
      throw new DossierError(
        'not_found',
        `No Evidence ${id} is visible to your team.`,
        'Export only your team’s Evidence ids.',
        {
          evidence_id: id,
        },
      );
    }
    const collections: Record<string, unknown[]> = {};
    for (const name of Object.keys(record.collections)) collections[name] = await store.allRows(id, name);
    bytes += record.document.bytes + Object.values(record.collections).reduce((n, c) => n + c.bytes, 0);
    if (bytes > BUNDLE_LIMITS.bytes.max) {
      throw new DossierError(
        'resource_constraint',
        `The bundle would exceed ${BUNDLE_LIMITS.bytes.max} bytes.`,
        'Export fewer Evidence records per bundle.',
      );
    }
    evidence.push({ record, document, collections });
  }
  const text = canonicalJson({ format: BUNDLE_FORMAT, evidence });
  return { text, digest: sha256Hex(text), bytes: Buffer.byteLength(text), count: evidence.length };
}

/** Parses and verifies a bundle; returns the entries ready to retain, or refuses it whole. */
export function verifyBundle(text: string, maxDepth: number = JSON_DEPTH.default): BuiltEvidence[] {
  let bundle: { format?: unknown; evidence?: unknown };
  try {
    bundle = parseBoundedJson(text, maxDepth) as typeof bundle;
  } catch (err) {
    if (err instanceof JsonTooDeep) throw refused(`${err.message} (DOSSIER_MAX_JSON_DEPTH)`);
    throw refused('the file is not JSON');
  }
  if (bundle?.format !== BUNDLE_FORMAT || !Array.isArray(bundle.evidence)) {
    throw refused(`the file is not a ${BUNDLE_FORMAT} bundle`);
  }
  if (bundle.evidence.length > BUNDLE_LIMITS.evidence.max) {
    throw refused(
      `it holds ${bundle.evidence.length} Evidence records (at most ${BUNDLE_LIMITS.evidence.max})`,
    );
  }
  return bundle.evidence.map((raw, i) => {
    const entry = raw as BundleEntry;
    try {
      const { evidence_id: claimed, collections: info, document: _doc, ...record } = entry.record;
      const collections = { ...entry.collections };
      const residual = (collections[RESIDUAL_UNKNOWNS] ?? []) as NewUnknown[];
      delete collections[RESIDUAL_UNKNOWNS];
      const built = buildEvidence({
        record,
        document: entry.document,
        collections,
        filterable: Object.fromEntries(Object.entries(info).map(([name, c]) => [name, c.filterable])),
        unknowns: residual.map((u) => ({ question: u.question, scope: u.scope })),
      });
      if (built.record.evidence_id !== claimed)
        throw refused(
          `entry ${i} (${claimed}) does not match its digests: its content digests to ${built.record.evidence_id}`,
          'integrity_error',
        );
      return built;
    } catch (err) {
      if (err instanceof DossierError) throw err;
      throw refused(
        `entry ${i} (${entry?.record?.evidence_id ?? 'no id'}) is not an Evidence record: ${(err as Error).message}`,
      );
    }
  });
}

/** The bundle refused: `integrity_error` when its content is not what its digests say. */
function refused(why: string, code: 'invalid_params' | 'integrity_error' = 'invalid_params'): DossierError {
  return new DossierError(
    code,
    `The bundle was refused whole, and nothing was imported: ${why}.`,
    'Import the bundle file exactly as export_evidence_bundle wrote it; a changed byte changes its digests.',
  );
}
