// Annotations: what a team learned about its binaries (a function's name,
// comment, prototype, tags, note, renamed variables; a data address's name
// and type; a type's definition), attached to an artifact by digest and an
// item on it, each change a revision with its author. Pure.
import { canonicalJson, sha256Hex } from './canonical.ts';

export const ANNOTATION_KINDS = ['function', 'address', 'type'] as const;
export type AnnotationKind = (typeof ANNOTATION_KINDS)[number];

/** The fields a revision holds; a write sets some of them, null clears one. */
export const ANNOTATION_FIELDS = ['name', 'comment', 'type', 'tags', 'note', 'variables'] as const;
export type AnnotationField = (typeof ANNOTATION_FIELDS)[number];

export interface AnnotationFields {
  name: string | null;
  comment: string | null;
  /** A function's prototype, a data address's C type, a type's definition. */
  type: string | null;
  tags: string[];
  note: string | null;
  /** The decompiler's variable names and the team's for them (functions only). */
  variables: Record<string, string> | null;
}

export type AnnotationPatch = Partial<{ [K in AnnotationField]: AnnotationFields[K] | null }>;

/** What an annotation is on: a function or data address ("0x401136") or a type by name. */
export interface AnnotationKey {
  artifact: string;
  kind: AnnotationKind;
  item: string;
}

export interface Annotation extends AnnotationKey, AnnotationFields {
  annotation_id: string;
  revision: number;
  created_by: string;
  created_at: string;
  updated_by: string;
  updated_at: string;
}

/** Where an accepted suggestion came from: another annotation at one of its revisions. */
export interface AnnotationSource {
  artifact: string;
  kind: AnnotationKind;
  item: string;
  revision: number;
}

export type AnnotationOrigin = 'write' | 'revert' | 'import';

/** One revision, as the history and the team's log show it. */
export interface AnnotationRevision extends AnnotationKey, AnnotationFields {
  annotation_id: string;
  revision: number;
  event_id: string;
  /** The fields this revision changed. */
  changed: AnnotationField[];
  origin: AnnotationOrigin;
  reverted_to: number | null;
  source: AnnotationSource | null;
  changed_by: string;
  changed_at: string;
  /** Who brought this revision into this store from a bundle, and when (null: made here). */
  imported: { by: string; at: string } | null;
}

export const EMPTY_FIELDS: AnnotationFields = {
  name: null,
  comment: null,
  type: null,
  tags: [],
  note: null,
  variables: null,
};

/** The same id for the same item in every store: a bundle's annotation meets its own. */
export function annotationId(key: AnnotationKey): string {
  return `ann_${sha256Hex(canonicalJson([key.artifact, key.kind, key.item])).slice(0, 32)}`;
}

export function fieldsOf(a: AnnotationFields): AnnotationFields {
  return {
    name: a.name,
    comment: a.comment,
    type: a.type,
    tags: a.tags,
    note: a.note,
    variables: a.variables,
  };
}

/**
 * How many bytes an annotation's fields may take together (as JSON): each field's own bound allows
 * more (a note, a comment, a type and 64 long variable names, 57 KB). get_annotation's reply of
 * 40,000 bytes shows the annotation and at least one revision of it: twice this, and their ids.
 */
export const ANNOTATION_FIELDS_BYTES = 18_000;

/** The bytes of an annotation's fields as JSON (what ANNOTATION_FIELDS_BYTES bounds). */
export const fieldsBytes = (fields: AnnotationFields) => Buffer.byteLength(JSON.stringify(fieldsOf(fields)));

/** The fields after a write: what it sets replaced, null (and an empty list or map) cleared. */
export function applyPatch(current: AnnotationFields, patch: AnnotationPatch): AnnotationFields {
  const next = fieldsOf(current);
  for (const field of ANNOTATION_FIELDS) {
    if (!(field in patch) || patch[field] === undefined) continue;
    const value = patch[field];
    if (field === 'tags') next.tags = [...new Set((value as string[] | null) ?? [])].sort();
    else if (field === 'variables') {
      const map = value as Record<string, string> | null;
      next.variables = map && Object.keys(map).length ? map : null;
    } else (next as unknown as Record<string, unknown>)[field] = value;
  }
  return next;
}

export function changedFields(before: AnnotationFields, after: AnnotationFields): AnnotationField[] {
  return ANNOTATION_FIELDS.filter((f) => canonicalJson(before[f]) !== canonicalJson(after[f]));
}

export function isEmpty(a: AnnotationFields): boolean {
  return changedFields(EMPTY_FIELDS, a).length === 0;
}

/** "0x401136", "0X401136" and "4198710" all name 0x401136; anything else is no address. */
export function canonicalAddress(text: string): string | undefined {
  const t = text.trim();
  if (/^0[xX][0-9a-fA-F]{1,16}$/.test(t)) return `0x${BigInt(t).toString(16)}`;
  if (/^\d{1,20}$/.test(t) && BigInt(t) < 2n ** 64n) return `0x${BigInt(t).toString(16)}`;
  return undefined;
}
