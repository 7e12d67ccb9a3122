// The team's shared knowledge of its binaries: annotations (names, comments,
// prototypes and types, tags, notes, variable names) on an artifact's
// functions, data addresses and types, each change a revision written with
// compare-and-swap; their history, revert and log; what earlier builds offer a
// later one through diffs; identical functions across artifacts. Served by the
// gateway from the store.
import { z } from 'zod';
import { ANNOTATION_KINDS } from '../domain/annotations.ts';
import { ARTIFACT_DIGEST } from '../domain/types.ts';
import { bounded, defineTool, LIST_LIMIT, listCursorSchema, listLimitSchema } from './contract.ts';
import { HISTORY_LIMIT } from './ledger.ts';

export const ANNOTATION_LIMITS = {
  name: { default: 256, max: 256, unit: 'characters' },
  comment: { default: 4_096, max: 4_096, unit: 'characters' },
  type: { default: 4_096, max: 4_096, unit: 'characters' },
  note: { default: 16_384, max: 16_384, unit: 'characters' },
  tags: { default: 32, max: 32, unit: 'tags of 1-64 characters' },
  variables: { default: 64, max: 64, unit: 'renamed variables' },
  identical: { default: 100, max: 500, unit: 'functions' },
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
    .describe('A function by address ("0x401136", as list_functions shows it) or by the team’s name for it.'),
  address: z.string().min(1).max(24).optional().describe('A data address ("0x404010").'),
  type_name: z.string().min(1).max(256).optional().describe('A type by name ("struct licence").'),
};
const oneItem = {
  error: 'name exactly one of function, address or type_name',
} as const;
const exactlyOne = (i: { function?: string; address?: string; type_name?: string }) =>
  [i.function, i.address, i.type_name].filter((v) => v !== undefined).length === 1;

const fields = {
  name: identifier.nullable().optional().describe('The team’s name (null clears it).'),
  comment: z.string().max(ANNOTATION_LIMITS.comment.max).nullable().optional().describe('A comment.'),
  type: z
    .string()
    .max(ANNOTATION_LIMITS.type.max)
    .nullable()
    .optional()
    .describe(
      'A function’s prototype ("int parse_licence(const char *s)"), a data address’s C type, a type’s definition.',
    ),
  tags: z.array(tag).max(ANNOTATION_LIMITS.tags.max).nullable().optional().describe('Tags (the whole set).'),
  note: z.string().max(ANNOTATION_LIMITS.note.max).nullable().optional().describe('A free-form note.'),
  variables: z
    .record(identifier, identifier)
    .refine((v) => Object.keys(v).length <= ANNOTATION_LIMITS.variables.max, {
      error: `at most ${ANNOTATION_LIMITS.variables.max} variables`,
    })
    .nullable()
    .optional()
    .describe(
      'Functions only: the decompiler’s variable names and the team’s ({"v1": "digits"}), applied to decompile_function’s text.',
    ),
};

const expectedRevision = z
  .number()
  .int()
  .min(0)
  .max(1_000_000_000)
  .describe(
    'The revision you read (0 when the item has no annotation yet); a stale one is refused with revision_conflict.',
  );

export const setAnnotation = defineTool({
  name: 'set_annotation',
  title: 'Annotate a function, address or type',
  description:
    'Write the team’s name, comment, prototype/type, tags, note or variable names for a function, data address or type of an artifact, as a new revision, only if the item is still at expected_revision (0 for a first annotation): a stale write is refused with revision_conflict, the current revision and what changed since, and nothing is lost. Fields you omit stay; null clears one. The same write again is answered as it was. Names are applied wherever the team reads this artifact (list_functions, get_call_graph, trace_feature, find_strings, decompile_function, diff_binaries) and offered to later builds through diffs. To accept a suggestion, write it with `accepts` naming where it came from.',
  input: z
    .strictObject({
      ...item,
      expected_revision: expectedRevision,
      ...fields,
      accepts: z
        .strictObject({ artifact, function: z.string().min(1).max(24), revision: z.number().int().min(1) })
        .optional()
        .describe(
          'The suggestion this write accepts: the earlier build’s function and the revision offered.',
        ),
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
  },
  collections: {},
});

export const getAnnotation = defineTool({
  name: 'get_annotation',
  title: 'Get an annotation with its history',
  description:
    'The team’s annotation on a function, data address or type: its current revision, its history (every revision: fields, what changed, who, when, whether a revert or an import), newest first; for a function without one of its own, the annotation propagated from an identical function of an earlier build, and suggestions from changed ones.',
  input: z
    .strictObject({
      ...item,
      history_limit: bounded(HISTORY_LIMIT, 'Revisions returned'),
      before_revision: z
        .number()
        .int()
        .min(2)
        .max(1_000_000_000)
        .optional()
        .describe('Continue the history below this revision (next_before_revision of the previous reply).'),
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
    'Make an annotation what it was at an earlier revision, as a new revision (the history keeps everything), only if it is still at expected_revision; otherwise revision_conflict.',
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
    'The team’s log of annotation changes, newest first: each revision with its item, the fields it changed and their values, who and when, and whether it was a write, a revert (to which revision) or an import; one artifact’s, or all.',
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
    'What the team’s annotations on earlier builds offer this artifact through diff_binaries: propagated (the function is identical and has no annotation of its own here; shown as its name already) and suggested (the function changed; accept with set_annotation and `accepts`), each with its source (artifact, function, revision, author), in address order.',
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
    'Every function of your team’s analysed artifacts with the same identity (the same code with addresses neutralised, list_functions’ identity) as a function of an artifact, or as an identity given, with the team’s name for each.',
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
