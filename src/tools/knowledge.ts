// The team's shared knowledge of its binaries: annotations (names, comments,
// prototypes and types, tags, notes, variable names) on an artifact's
// functions, data addresses and types, each change a revision written with
// compare-and-swap; their history, revert and log; what earlier builds offer a
// later one through diffs; identical functions across artifacts. Served by the
// gateway from the store.
import { z } from 'zod';
import { ANNOTATION_FIELDS_BYTES, ANNOTATION_KINDS } from '../domain/annotations.ts';
import { ARTIFACT_DIGEST } from '../domain/types.ts';
import { bounded, defineTool, LIST_LIMIT, listCursorSchema, listLimitSchema } from './contract.ts';
import { HISTORY_LIMIT, historyPage } from './ledger.ts';

export const ANNOTATION_LIMITS = {
  name: { default: 256, max: 256, unit: 'characters' },
  comment: { default: 4_096, max: 4_096, unit: 'characters' },
  type: { default: 4_096, max: 4_096, unit: 'characters' },
  note: { default: 16_384, max: 16_384, unit: 'characters' },
  tags: { default: 32, max: 32, unit: 'tags of 1-64 characters' },
  variables: { default: 64, max: 64, unit: 'renamed variables' },
  identical: { default: 100, max: 500, unit: 'functions' },
  fields_bytes: {
    default: ANNOTATION_FIELDS_BYTES,
    max: ANNOTATION_FIELDS_BYTES,
    unit: 'bytes of all the fields together, as JSON',
  },
};

const READ = { idempotent: true, readOnly: true, destructive: false, openWorld: false, effects: [] };
const WRITE = {
  idempotent: true,
  readOnly: false,
  destructive: false,
  openWorld: false,
  effects: ['writes an annotation revision in dossier’s own ledger'],
};

const artifact = z
  .string()
  .regex(ARTIFACT_DIGEST, { error: 'artifact is "sha256:" followed by 64 hex digits' })
  .describe('Digest of one of your team’s artifacts.');
const identifier = z.string().regex(/^[A-Za-z_$][A-Za-z0-9_$.:@<>~]{0,255}$/, {
  error: 'a name is 1-256 characters: a letter, _ or $, then letters, digits and _ $ . : @ < > ~',
});
const tag = z.string().regex(/^[A-Za-z0-9._:/-]{1,64}$/, { error: 'a tag is 1-64 of A-Z a-z 0-9 . _ : / -' });

const item = {
  artifact,
  function: z
    .string()
    .min(1)
    .max(256)
    .optional()
    .describe('A function: its address ("0x401136") or the team’s name for it.'),
  address: z.string().min(1).max(24).optional().describe('A data address ("0x404010").'),
  type_name: z.string().min(1).max(256).optional().describe('A type by name ("struct licence").'),
};
const oneItem = {
  error: 'name exactly one of function, address or type_name',
} as const;
const exactlyOne = (i: { function?: string; address?: string; type_name?: string }) =>
  [i.function, i.address, i.type_name].filter((v) => v !== undefined).length === 1;

/**
 * A revision's fields as the store holds them, each present (null: unset): what set_annotation
 * accepts, and what a bundle's carried revisions are held to on import.
 */
export const storedFields = {
  name: identifier.nullable(),
  comment: z.string().max(ANNOTATION_LIMITS.comment.max).nullable(),
  type: z.string().max(ANNOTATION_LIMITS.type.max).nullable(),
  tags: z.array(tag).max(ANNOTATION_LIMITS.tags.max),
  note: z.string().max(ANNOTATION_LIMITS.note.max).nullable(),
  variables: z
    .record(identifier, identifier)
    .refine((v) => Object.keys(v).length <= ANNOTATION_LIMITS.variables.max, {
      error: `at most ${ANNOTATION_LIMITS.variables.max} variables`,
    })
    .nullable(),
};

const fields = {
  name: storedFields.name.optional(),
  comment: storedFields.comment.optional(),
  type: storedFields.type.optional().describe('Prototype, C type or type definition.'),
  tags: storedFields.tags.nullable().optional().describe('The whole set.'),
  note: storedFields.note.optional(),
  variables: storedFields.variables
    .optional()
    .describe('Functions only: decompiler variable → team name ({"v1": "digits"}).'),
};

const expectedRevision = z
  .number()
  .int()
  .min(0)
  .max(1_000_000_000)
  .describe('The revision you read (0: no annotation yet).');

export const setAnnotation = defineTool({
  name: 'set_annotation',
  title: 'Annotate a function, address or type',
  description:
    'Write the team’s name, comment, type/prototype, tags, note or variable names on a function, data address or type, as a new revision if the item is still at expected_revision (0: first); otherwise revision_conflict with the current revision and what changed. Omitted fields stay; null clears. Names show wherever the team reads this artifact and carry to later builds.',
  input: z
    .strictObject({
      ...item,
      expected_revision: expectedRevision,
      ...fields,
      accepts: z
        .strictObject({
          artifact,
          address: z.string().min(1).max(24),
          revision: z.number().int().min(1),
          by: z.string().max(256).optional(),
        })
        .optional()
        .describe('The suggestion accepted (its `from`).'),
    })
    .refine(exactlyOne, oneItem),
  effect: WRITE,
  runsOn: 'gateway',
  toolset: 'knowledge',
  limits: {
    name: ANNOTATION_LIMITS.name,
    comment: ANNOTATION_LIMITS.comment,
    type: ANNOTATION_LIMITS.type,
    note: ANNOTATION_LIMITS.note,
    tags: ANNOTATION_LIMITS.tags,
    variables: ANNOTATION_LIMITS.variables,
    fields_bytes: ANNOTATION_LIMITS.fields_bytes,
  },
  collections: {},
});

export const getAnnotation = defineTool({
  name: 'get_annotation',
  title: 'Get an annotation with its history',
  description:
    'An annotation with its history (newest first: fields, what changed, who, when); for a function, also what earlier builds offer through diffs (propagated, suggestions).',
  input: z
    .strictObject({
      ...item,
      ...historyPage,
    })
    .refine(exactlyOne, oneItem),
  effect: READ,
  runsOn: 'gateway',
  toolset: 'knowledge',
  limits: { history_limit: HISTORY_LIMIT },
  collections: {},
});

export const revertAnnotation = defineTool({
  name: 'revert_annotation',
  title: 'Revert an annotation',
  description:
    'Make an annotation what it was at an earlier revision, as a new revision, if it is still at expected_revision.',
  input: z
    .strictObject({
      ...item,
      to_revision: z.number().int().min(1).max(1_000_000_000),
      expected_revision: expectedRevision,
    })
    .refine(exactlyOne, oneItem),
  effect: WRITE,
  runsOn: 'gateway',
  toolset: 'knowledge',
  limits: {},
  collections: {},
});

export const listAnnotations = defineTool({
  name: 'list_annotations',
  title: 'List annotations',
  description: 'The team’s annotations on an artifact, newest first, by kind or tag.',
  input: z.strictObject({
    artifact,
    kind: z.enum(ANNOTATION_KINDS).optional(),
    tag: tag.optional(),
    cursor: listCursorSchema,
    limit: listLimitSchema,
  }),
  effect: READ,
  runsOn: 'gateway',
  toolset: 'knowledge',
  limits: { limit: LIST_LIMIT },
  collections: {},
});

export const listAnnotationEvents = defineTool({
  name: 'list_annotation_events',
  title: 'List annotation changes',
  description:
    'The team’s log of annotation changes, newest first: item, fields changed, who, when, write/revert/import; one artifact or all.',
  input: z.strictObject({ artifact: artifact.optional(), cursor: listCursorSchema, limit: listLimitSchema }),
  effect: READ,
  runsOn: 'gateway',
  toolset: 'knowledge',
  limits: { limit: LIST_LIMIT },
  collections: {},
});

export const listCarriedAnnotations = defineTool({
  name: 'list_carried_annotations',
  title: 'List annotations carried from earlier builds',
  description:
    'What annotations on earlier builds offer this artifact through diff_binaries, in address order: propagated (identical function, already shown as its name) and suggested (changed function; accept with set_annotation and `accepts`), each with its source.',
  input: z.strictObject({ artifact, cursor: listCursorSchema, limit: listLimitSchema }),
  effect: READ,
  runsOn: 'gateway',
  toolset: 'knowledge',
  limits: { limit: LIST_LIMIT },
  collections: {},
});

export const findIdenticalFunctions = defineTool({
  name: 'find_identical_functions',
  title: 'Find identical functions across artifacts',
  description:
    'The team’s functions, in any analysed artifact, with the same identity (list_functions’ identity: code with addresses neutralised) as a function or a given identity, with the team’s name for each.',
  input: z
    .strictObject({
      artifact: artifact.optional(),
      function: z.string().min(1).max(24).optional().describe('The function’s address (with artifact).'),
      identity: z.uuid().optional().describe('An identity, as list_functions shows it.'),
      limit: bounded(ANNOTATION_LIMITS.identical, 'Functions returned'),
    })
    .refine((i) => (i.identity === undefined) === (i.artifact !== undefined && i.function !== undefined), {
      error: 'pass artifact with function, or identity',
    }),
  effect: READ,
  runsOn: 'gateway',
  toolset: 'knowledge',
  limits: { limit: ANNOTATION_LIMITS.identical },
  collections: {},
});
