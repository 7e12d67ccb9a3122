// The residual unknowns a bundle carries beside its Evidence: checked on
// import before anything is written. An unknown's id is its question and
// scope's digest, the list as a whole is digest-checked, and each unknown must
// belong to the bundle (name one of its Evidence, or its investigation).
import { z } from 'zod';
import { digestOf } from '../domain/canonical.ts';
import { DossierError } from '../domain/errors.ts';
import { unknownId } from '../domain/evidence.ts';
import { UNKNOWN_STATUSES } from '../domain/types.ts';
import type { BundledUnknown } from '../store/unknownBundles.ts';
import { BUNDLE_LIMITS } from '../tools/ledger.ts';

const text = z.string().max(65_536);
const state = {
  status: z.enum(UNKNOWN_STATUSES),
  note: text.nullable(),
  settled_by: z.array(text).max(1_000).nullable(),
  evidence_ids: z.array(text).max(1_000),
};
const revisionSchema = z.strictObject({
  revision: z.number().int().min(1),
  ...state,
  changed_by: text,
  changed_at: text,
});
const unknownSchema = z.strictObject({
  unknown_id: text,
  question: text,
  scope: text,
  revision: z.number().int().min(1),
  investigation: text.nullable(),
  ...state,
  created_by: text,
  created_at: text,
  updated_at: text,
  updated_by: text.nullable(),
  revisions: z.array(revisionSchema).max(10_000),
});

/** The digest a bundle states for its unknowns: of their canonical JSON. */
export const unknownsDigest = (unknowns: unknown[]) => digestOf(unknowns);

/**
 * A bundle's unknowns, checked: the stated digest, each one's shape and id, and that it belongs
 * to the bundle's Evidence (`evidenceIds`) or its `investigation`. `refused` shapes the refusal.
 */
export function checkUnknowns(
  raw: unknown,
  stated: unknown,
  evidenceIds: ReadonlySet<string>,
  investigation: string | null,
  refused: (why: string, code?: 'invalid_params' | 'integrity_error') => DossierError,
): BundledUnknown[] {
  if (!Array.isArray(raw)) throw refused('its unknowns are not a list');
  if (raw.length > BUNDLE_LIMITS.unknowns.max)
    throw refused(`it holds ${raw.length} unknowns (at most ${BUNDLE_LIMITS.unknowns.max})`);
  if (stated !== unknownsDigest(raw))
    throw refused('its unknowns do not match the digest it states for them', 'integrity_error');
  return raw.map((item, i) => {
    const parsed = unknownSchema.safeParse(item);
    if (!parsed.success)
      throw refused(`unknown ${i} is not an unknown: ${parsed.error.issues[0]?.message ?? 'malformed'}`);
    const u = parsed.data;
    if (u.unknown_id !== unknownId(u))
      throw refused(
        `unknown ${i} (${u.unknown_id}) does not match its question and scope`,
        'integrity_error',
      );
    if (
      !(investigation && u.investigation === investigation) &&
      !u.evidence_ids.some((e) => evidenceIds.has(e))
    )
      throw refused(`unknown ${i} (${u.unknown_id}) names none of the bundle's Evidence`);
    if (
      u.revisions.some(
        (r, j) => r.revision > u.revision || (j > 0 && r.revision <= u.revisions[j - 1]!.revision),
      )
    )
      throw refused(`unknown ${i} (${u.unknown_id}) has revisions out of order`);
    return u;
  });
}
