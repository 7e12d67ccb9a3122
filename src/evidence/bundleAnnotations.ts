// What a bundle carries of the team's shared knowledge beside its Evidence:
// the annotations (every revision) on the artifacts that Evidence is about,
// each sealed by its digest, and the links a carried diff made between two
// builds. Checked on import before anything is written: each revision is held
// to what set_annotation accepts, and each annotation must be on an artifact
// the bundle's Evidence is about.
import { z } from 'zod';
import { digestOf } from '../domain/canonical.ts';
import type { DossierError } from '../domain/errors.ts';
import {
  ANNOTATION_FIELDS,
  ANNOTATION_FIELDS_BYTES,
  ANNOTATION_KINDS,
  annotationId,
  canonicalAddress,
  fieldsBytes,
} from '../domain/annotations.ts';
import { ARTIFACT_DIGEST, type EvidenceRecord, type FunctionLink } from '../domain/types.ts';
import type { CarriedAnnotation } from '../store/annotations.ts';
import { storedFields } from '../tools/knowledge.ts';

type Refuse = (why: string, code?: 'invalid_params' | 'integrity_error') => DossierError;

/** The artifacts an Evidence record is about: its target, and a diff's base too. */
export function artifactsOf(record: EvidenceRecord): string[] {
  const base = (record.parameters as { base?: unknown } | null)?.base;
  return [record.target?.digest, typeof base === 'string' ? base : undefined].filter(
    (d): d is string => typeof d === 'string' && d.startsWith('sha256:'),
  );
}

/** An annotation's whole history as a bundle carries it, with the digest that proves it unchanged. */
export const sealed = (a: CarriedAnnotation) => ({ ...a, digest: digestOf(a) });

const unit = (v: unknown) => typeof v === 'number' && v >= 0 && v <= 1;
const canonical = (v: unknown) => (typeof v === 'string' && canonicalAddress(v) === v ? v : undefined);

/**
 * A diff's matches (verified with its Evidence) as the links its analysis recorded; throws on a
 * match no analysis makes (an address not in canonical form, a score outside 0–1).
 */
export function diffLinks(record: EvidenceRecord, collections: Record<string, unknown[]>): FunctionLink[] {
  if (record.tool !== 'diff_binaries') return [];
  const [artifact, base] = artifactsOf(record);
  if (!artifact || !base) return [];
  // One link a function and base (a later match of the same function replaces an earlier one).
  const links = new Map<string, FunctionLink>();
  ((collections.matches ?? []) as Record<string, unknown>[]).forEach((m, i) => {
    const address = canonical(m.address);
    const baseAddress = canonical(m.base_address);
    if (!address || !baseAddress || !unit(m.similarity) || !unit(m.confidence))
      throw new Error(`its match ${i} is not a match (addresses "0x…", similarity and confidence 0–1)`);
    links.set(address, {
      artifact,
      address,
      base,
      base_address: baseAddress,
      match_class: m.class === 'identical' ? 'identical' : 'changed',
      similarity: m.similarity as number,
      confidence: m.confidence as number,
    });
  });
  return [...links.values()];
}

/** How many annotations, and revisions of one, a bundle may carry. */
export const CARRIED_LIMITS = { annotations: 100_000, revisions: 10_000 };

const digest = z.string().regex(ARTIFACT_DIGEST);
const short = z.string().max(256);
const stamp = z.iso.datetime();
const kind = z.enum(ANNOTATION_KINDS);
const revisionNumber = z.number().int().min(1).max(1_000_000_000);
const revisionSchema = z.strictObject({
  annotation_id: short,
  artifact: digest,
  kind,
  item: short,
  revision: revisionNumber,
  event_id: short,
  ...storedFields,
  changed: z.array(z.enum(ANNOTATION_FIELDS)).max(ANNOTATION_FIELDS.length),
  origin: z.enum(['write', 'revert', 'import']),
  reverted_to: revisionNumber.nullable(),
  source: z.strictObject({ artifact: digest, kind, item: short, revision: revisionNumber }).nullable(),
  changed_by: short,
  changed_at: stamp,
  imported: z.strictObject({ by: short, at: stamp }).nullable(),
});
const annotationSchema = z.strictObject({
  annotation_id: short,
  artifact: digest,
  kind,
  item: short,
  revisions: z.array(revisionSchema).min(1).max(CARRIED_LIMITS.revisions),
});

/**
 * Carried annotations, each proven by its digest, held to what set_annotation accepts, and on one
 * of `artifacts` (what the bundle's Evidence is about).
 */
export function readAnnotations(
  raw: unknown,
  artifacts: ReadonlySet<string>,
  refused: Refuse,
): CarriedAnnotation[] {
  if (raw === undefined) return [];
  if (!Array.isArray(raw)) throw refused('its annotations are not a list');
  if (raw.length > CARRIED_LIMITS.annotations)
    throw refused(`it carries ${raw.length} annotations (at most ${CARRIED_LIMITS.annotations})`);
  return raw.map((item, i) => {
    const { digest: stated, ...rest } = (item ?? {}) as Record<string, unknown>;
    if (stated !== digestOf(rest))
      throw refused(`annotation ${i} does not match its digest`, 'integrity_error');
    const parsed = annotationSchema.safeParse(rest);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw refused(
        `annotation ${i} is not an annotation history: ${issue ? `${issue.path.join('.') || 'it'}: ${issue.message}` : 'malformed'}`,
      );
    }
    const a = parsed.data as CarriedAnnotation;
    const whole =
      a.annotation_id === annotationId(a) &&
      a.revisions.every(
        (r, n) =>
          r.annotation_id === a.annotation_id &&
          r.revision === n + 1 &&
          r.event_id === `${a.annotation_id}@${n + 1}` &&
          r.artifact === a.artifact &&
          r.kind === a.kind &&
          r.item === a.item &&
          (r.variables === null || a.kind === 'function') &&
          fieldsBytes(r) <= ANNOTATION_FIELDS_BYTES,
      );
    if (!whole) throw refused(`annotation ${i} (${a.annotation_id}) is not an annotation history`);
    if (!artifacts.has(a.artifact))
      throw refused(
        `annotation ${i} (${a.annotation_id}) is on ${a.artifact}, which none of its Evidence is about`,
      );
    return a;
  });
}
