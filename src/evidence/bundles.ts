// Evidence bundles: a canonical JSON file that carries complete Evidence
// (record, document, every row) from one store to another, with the residual
// unknowns recorded against it (each with its revisions) and the team's
// annotations on the artifacts it is about, so a team continues the work
// elsewhere. Every entry's id is recomputed on import, which checks its
// document and collection digests too, the unknowns are checked against their
// ids and the digest the bundle states, each annotation against its own
// digest; one mismatch refuses the whole bundle.
import { canonicalJson, sha256Hex } from '../domain/canonical.ts';
import { DossierError } from '../domain/errors.ts';
import { BUNDLE_LIMITS } from '../tools/ledger.ts';
import { buildEvidence, RESIDUAL_UNKNOWNS, type BuiltEvidence } from '../domain/evidence.ts';
import type { Store } from '../store/store.ts';
import type { BundledUnknown } from '../store/unknownBundles.ts';
import type { EvidenceRecord, NewUnknown } from '../domain/types.ts';
import { JSON_DEPTH, JsonTooDeep, parseBoundedJson } from '../domain/json.ts';
import { checkUnknowns, unknownsDigest } from './bundleUnknowns.ts';
import type { CarriedAnnotation } from '../store/annotations.ts';
import type { FunctionLink } from '../domain/types.ts';
import { artifactsOf, CARRIED_LIMITS, diffLinks, readAnnotations, sealed } from './bundleAnnotations.ts';

/**
 * What export writes: /2 adds the team, the investigation and the unknowns to
 * /1's Evidence; either may carry annotations.
 */
export const BUNDLE_FORMAT = 'dossier.evidence-bundle/2';
/** Every format import reads. */
const READABLE = ['dossier.evidence-bundle/1', BUNDLE_FORMAT];

interface BundleEntry {
  record: EvidenceRecord;
  document: Record<string, unknown>;
  collections: Record<string, unknown[]>;
}

/** What goes into a bundle: these Evidence ids, or every Evidence of the team's investigation. */
export interface BundleSelection {
  evidenceIds?: string[];
  investigation?: string;
}

const tooLarge = (what: string) =>
  new DossierError(
    'resource_constraint',
    `The bundle would exceed ${what}.`,
    'Export fewer Evidence records per bundle (evidence_ids).',
  );

/** The Evidence ids of the team's investigation, oldest first. */
async function investigationIds(store: Pick<Store, 'evidence'>, team: string, investigation: string) {
  const ids: string[] = [];
  for (let cursor: string | undefined; ;) {
    const page = await store.evidence.list(team, { investigation, cursor, limit: 256 });
    ids.push(...page.items.map((e) => e.evidence_id));
    if (ids.length > BUNDLE_LIMITS.records.max)
      throw tooLarge(`${BUNDLE_LIMITS.records.max} Evidence records (investigation ${investigation})`);
    if (!page.nextCursor) break;
    cursor = page.nextCursor;
  }
  return ids.reverse();
}

/**
 * A bundle of complete Evidence, the unknowns recorded against it, and the
 * team's annotations (every revision) on the artifacts that Evidence is about.
 */
export async function buildBundle(
  store: Pick<Store, 'evidence' | 'unknowns' | 'annotations'>,
  team: string,
  sel: BundleSelection,
) {
  const investigation = sel.evidenceIds ? null : (sel.investigation ?? null);
  const unknownsOf = (ids: string[]) =>
    store.unknowns.forBundle(team, new Set(ids), investigation, BUNDLE_LIMITS.unknowns.max, () =>
      tooLarge(`${BUNDLE_LIMITS.unknowns.max} unknowns`),
    );
  let ids = sel.evidenceIds ?? [];
  /** Evidence an investigation's unknowns name (an analysis, which belongs to no investigation): carried when the team has it. */
  const named = new Set<string>();
  if (investigation) {
    ids = await investigationIds(store, team, investigation);
    for (const u of await unknownsOf(ids))
      for (const id of [...u.evidence_ids, ...(u.settled_by ?? [])]) if (!ids.includes(id)) named.add(id);
    ids = [...ids, ...named];
  }
  const evidence: BundleEntry[] = [];
  let bytes = 0;
  for (const id of [...new Set(ids)]) {
    const record = await store.evidence.get(team, id);
    const document = await store.evidence.document(team, id);
    if ((!record || !document) && named.has(id)) continue;
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
    for (const name of Object.keys(record.collections))
      collections[name] = await store.evidence.allRows(id, name);
    bytes += record.document.bytes + Object.values(record.collections).reduce((n, c) => n + c.bytes, 0);
    if (bytes > BUNDLE_LIMITS.bytes.max) throw tooLarge(`${BUNDLE_LIMITS.bytes.max} bytes`);
    evidence.push({ record, document, collections });
  }
  if (evidence.length > BUNDLE_LIMITS.records.max)
    throw tooLarge(`${BUNDLE_LIMITS.records.max} Evidence records`);
  const unknowns: BundledUnknown[] = await unknownsOf(evidence.map((e) => e.record.evidence_id));
  if (evidence.length === 0 && unknowns.length === 0)
    throw new DossierError(
      'not_found',
      `Your team has no Evidence and no unknowns in investigation ${investigation}.`,
      'list_evidence {investigation} shows what an investigation holds; or name the Evidence (evidence_ids).',
      { investigation },
    );
  const annotations = (
    await store.annotations.carried(
      team,
      evidence.flatMap((e) => artifactsOf(e.record)),
    )
  ).map(sealed);
  // What an import takes, an export writes: never a bundle that could not be imported.
  if (annotations.length > CARRIED_LIMITS.annotations)
    throw tooLarge(`${CARRIED_LIMITS.annotations} annotations on the artifacts of its Evidence`);
  const long = annotations.find((a) => a.revisions.length > CARRIED_LIMITS.revisions);
  if (long) throw tooLarge(`${CARRIED_LIMITS.revisions} revisions of one annotation (${long.annotation_id})`);
  const text = canonicalJson({
    format: BUNDLE_FORMAT,
    team,
    investigation,
    evidence,
    unknowns,
    unknowns_digest: unknownsDigest(unknowns),
    ...(annotations.length ? { annotations } : {}),
  });
  if (Buffer.byteLength(text) > BUNDLE_LIMITS.bytes.max) throw tooLarge(`${BUNDLE_LIMITS.bytes.max} bytes`);
  return {
    text,
    digest: sha256Hex(text),
    bytes: Buffer.byteLength(text),
    count: evidence.length,
    unknowns: unknowns.length,
    annotations: annotations.length,
    investigation,
    evidenceIds: evidence.map((e) => e.record.evidence_id),
  };
}

/**
 * A bundle read and checked whole: its Evidence ready to retain, its unknowns,
 * the team it names (/2), its annotations and the links its diffs made between builds.
 */
export interface ReadBundle {
  evidence: BuiltEvidence[];
  unknowns: BundledUnknown[];
  team: string | null;
  annotations: CarriedAnnotation[];
  links: FunctionLink[];
}

/** Parses and verifies a bundle; returns the entries ready to retain, or refuses it whole. */
export function verifyBundle(text: string, maxDepth: number = JSON_DEPTH.default): BuiltEvidence[] {
  return readBundle(text, { maxDepth }).evidence;
}

/** What a bundle's reader holds it to. */
export interface BundleBounds {
  /** How deeply it may nest arrays and objects (DOSSIER_MAX_JSON_DEPTH). */
  maxDepth?: number;
  /** How many rows one collection of an Evidence may hold (BUNDLE_LIMITS.rows by default). */
  maxRows?: number;
}

/** Parses and verifies a bundle, Evidence, unknowns and annotations; refuses it whole at the first mismatch. */
export function readBundle(text: string, bounds: BundleBounds = {}): ReadBundle {
  const maxDepth = bounds.maxDepth ?? JSON_DEPTH.default;
  const maxRows = bounds.maxRows ?? BUNDLE_LIMITS.rows.max;
  let bundle: Record<string, unknown>;
  try {
    bundle = parseBoundedJson(text, maxDepth) as typeof bundle;
    if (bundle === null || typeof bundle !== 'object') throw new Error('not an object');
  } catch (err) {
    if (err instanceof JsonTooDeep) throw refused(`${err.message} (DOSSIER_MAX_JSON_DEPTH)`);
    throw refused('the file is not JSON');
  }
  if (!READABLE.includes(bundle?.format as string) || !Array.isArray(bundle.evidence)) {
    throw refused(`the file is not a ${READABLE.join(' or ')} bundle`);
  }
  if (bundle.evidence.length > BUNDLE_LIMITS.records.max) {
    throw refused(
      `it holds ${bundle.evidence.length} Evidence records (at most ${BUNDLE_LIMITS.records.max})`,
    );
  }
  const links: FunctionLink[] = [];
  const evidence = bundle.evidence.map((raw, i) => {
    const entry = raw as BundleEntry;
    refuseLong(entry, i, maxRows);
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
      const r = built.record;
      const columns = [r.principal, r.tool, r.investigation, r.created_at, r.launch?.workflow_id];
      if (holdsNul([columns, built.unknowns]))
        throw refused(`entry ${i} (${claimed}) holds a NUL character where the store keeps text`);
      links.push(...diffLinks(built.record, collections));
      return built;
    } catch (err) {
      if (err instanceof DossierError) throw err;
      throw refused(
        `entry ${i} (${entry?.record?.evidence_id ?? 'no id'}) is not an Evidence record: ${(err as Error).message}`,
      );
    }
  });
  const about = new Set(evidence.flatMap((b) => artifactsOf(b.record)));
  const annotations = readAnnotations(bundle.annotations, about, refused);
  const nul = annotations.findIndex(holdsNul);
  if (nul >= 0) throw refused(`annotation ${nul} holds a NUL character`);
  // One link a function and base: two diffs of the same builds in one bundle, the later one's.
  const linked = [...new Map(links.map((l) => [`${l.artifact} ${l.address} ${l.base}`, l])).values()];
  if (bundle.format === READABLE[0])
    return { evidence, unknowns: [], team: null, annotations, links: linked };
  const { team, investigation } = bundle;
  if (typeof team !== 'string' || (investigation !== null && typeof investigation !== 'string'))
    throw refused('it names no team or a malformed investigation');
  const foreign = evidence.find((b) => b.record.team !== team);
  if (foreign)
    throw refused(`entry ${foreign.record.evidence_id} is not of the bundle's team`, 'integrity_error');
  const ids = new Set(evidence.map((b) => b.record.evidence_id));
  const unknowns = checkUnknowns(bundle.unknowns, bundle.unknowns_digest, ids, investigation, refused);
  const nulUnknown = unknowns.findIndex(holdsNul);
  if (nulUnknown >= 0) throw refused(`unknown ${nulUnknown} holds a NUL character`);
  return { evidence, unknowns, team, annotations, links: linked };
}

/** Whether a string anywhere in `value` holds a NUL, which PostgreSQL's text columns cannot store. */
function holdsNul(value: unknown): boolean {
  if (typeof value === 'string') return value.includes('\0');
  if (Array.isArray(value)) return value.some(holdsNul);
  if (value && typeof value === 'object') return Object.values(value).some(holdsNul);
  return false;
}

/** Refuses an entry with a collection longer than this gateway retains of one (before it is built). */
function refuseLong(entry: BundleEntry, i: number, maxRows: number) {
  const collections = (entry as Partial<BundleEntry> | null)?.collections;
  if (!collections || typeof collections !== 'object') return;
  for (const [name, rows] of Object.entries(collections)) {
    if (!Array.isArray(rows) || rows.length <= maxRows) continue;
    throw new DossierError(
      'resource_constraint',
      `The bundle was refused whole, and nothing was imported: entry ${i} (${String(entry.record?.evidence_id ?? 'no id').slice(0, 80)}) has ${rows.length} rows in ${name.slice(0, 80)}, more than an imported collection may hold (${maxRows}).`,
      'No export writes a collection that long: import the bundle export_evidence_bundle wrote, unchanged.',
      { entry: i, collection: name.slice(0, 80), rows: rows.length, max_rows: maxRows },
    );
  }
}

/** The bundle refused: `integrity_error` when its content is not what its digests say. */
function refused(why: string, code: 'invalid_params' | 'integrity_error' = 'invalid_params'): DossierError {
  return new DossierError(
    code,
    `The bundle was refused whole, and nothing was imported: ${why}.`,
    'Import the bundle file exactly as export_evidence_bundle wrote it; a changed byte changes its digests.',
  );
}
