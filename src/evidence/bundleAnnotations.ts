// What a bundle carries of the team's shared knowledge beside its Evidence:
// the annotations (every revision) on the artifacts that Evidence is about,
// each sealed by its digest, and the links a carried diff made between two
// builds. Checked on import before anything is written.
import { digestOf } from '../domain/canonical.ts';
import type { DossierError } from '../domain/errors.ts';
import { annotationId } from '../domain/annotations.ts';
import type { EvidenceRecord } from '../domain/types.ts';
import type { CarriedAnnotation } from '../store/annotations.ts';
import type { FunctionLink } from '../domain/types.ts';

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

/** A diff's matches (verified with its Evidence) as the links its analysis recorded. */
export function diffLinks(record: EvidenceRecord, collections: Record<string, unknown[]>): FunctionLink[] {
  if (record.tool !== 'diff_binaries') return [];
  const [artifact, base] = artifactsOf(record);
  if (!artifact || !base) return [];
  return ((collections.matches ?? []) as Record<string, unknown>[]).map((m) => ({
    artifact,
    address: String(m.address),
    base,
    base_address: String(m.base_address),
    match_class: m.class === 'identical' ? 'identical' : 'changed',
    similarity: Number(m.similarity),
    confidence: Number(m.confidence),
  }));
}

/** Carried annotations, each proven by its digest and checked for shape. */
export function readAnnotations(raw: unknown, refused: Refuse): CarriedAnnotation[] {
  if (raw === undefined) return [];
  if (!Array.isArray(raw)) throw refused('its annotations are not a list');
  return raw.map((item, i) => {
    const { digest, ...a } = (item ?? {}) as CarriedAnnotation & { digest?: unknown };
    if (digest !== digestOf(a)) throw refused(`annotation ${i} does not match its digest`, 'integrity_error');
    const revisions = Array.isArray(a.revisions) ? a.revisions : [];
    const whole =
      typeof a.annotation_id === 'string' &&
      a.annotation_id === annotationId(a) &&
      revisions.length > 0 &&
      revisions.every(
        (r, n) =>
          r.annotation_id === a.annotation_id &&
          r.revision === n + 1 &&
          r.event_id === `${a.annotation_id}@${n + 1}` &&
          r.artifact === a.artifact &&
          r.kind === a.kind &&
          r.item === a.item &&
          Array.isArray(r.tags) &&
          Array.isArray(r.changed) &&
          typeof r.changed_by === 'string' &&
          typeof r.changed_at === 'string',
      );
    if (!whole) throw refused(`annotation ${i} is not an annotation history`);
    return a;
  });
}
