// Ledger tools, served by the gateway from the evidence store.
import { z } from 'zod';
import { UNKNOWN_STATUSES } from '../domain/types.ts';
import {
  bounded,
  defineTool,
  investigationSchema,
  LIST_LIMIT,
  listCursorSchema,
  listLimitSchema,
  detailSchema,
} from './contract.ts';

export const PAGE_LIMIT = { default: 64, max: 256, unit: 'rows' };
export const WHERE_LIMITS = { fields: 8, values: 64, valueChars: 4_096 };
export const BUNDLE_LIMITS = {
  evidence: { default: 16, max: 64, unit: 'Evidence records' },
  /** A bundle of a whole investigation may hold more than one call names. */
  records: { default: 1_000, max: 1_000, unit: 'Evidence records in one bundle' },
  unknowns: { default: 100_000, max: 100_000, unit: 'residual unknowns in one bundle' },
  /** More than any tool retains in one collection (DOSSIER_MAX_COLLECTION_ROWS' ceiling, find_strings' 1,000,000). */
  rows: { default: 5_000_000, max: 5_000_000, unit: 'rows in one collection of an imported Evidence' },
  bytes: { default: 256 * 1024 * 1024, max: 256 * 1024 * 1024, unit: 'bytes' },
};
export const UPLOAD_LIMIT = { default: 256 * 1024 * 1024, max: 4 * 1024 * 1024 * 1024, unit: 'bytes' };

export const EVIDENCE_ID = /^ev_[0-9a-f]{64}$/;
export const UNKNOWN_ID = /^unk_[0-9a-f]{32}$/;

const READ = { idempotent: true, readOnly: true, destructive: false, openWorld: false, effects: [] };
const LEDGER_WRITE = {
  idempotent: true,
  readOnly: false,
  destructive: false,
  openWorld: false,
  effects: ['writes dossier’s own ledger'],
};

export const evidenceIdSchema = z
  .string()
  .regex(EVIDENCE_ID, { error: 'evidence_id is "ev_" followed by 64 hex digits' })
  .describe('An Evidence id (ev_…) from a launch reply or list_evidence.');
const investigation = investigationSchema;
const cursor = listCursorSchema;
const limit = listLimitSchema;

const filterValue = z.union([z.string().max(WHERE_LIMITS.valueChars), z.number(), z.boolean(), z.null()]);
export const whereSchema = z
  .record(z.string().max(128), z.array(filterValue).max(WHERE_LIMITS.values))
  .refine((w) => Object.keys(w).length <= WHERE_LIMITS.fields, {
    error: `at most ${WHERE_LIMITS.fields} fields`,
  })
  .describe(
    'Exact filters {field: [values]}: every field equals (a list field contains) one of its values; no normalization.',
  );

export const viewSchema = z.discriminatedUnion('kind', [
  z.strictObject({ kind: z.literal('summary') }),
  z.strictObject({
    kind: z.literal('page'),
    collection: z.string().min(1).max(128),
    where: whereSchema.optional(),
    offset: z.number().int().min(0).max(1_000_000_000).default(0),
    limit: z.number().int().min(1).max(PAGE_LIMIT.max).default(PAGE_LIMIT.default),
  }),
]);

export const inspectAnalysisView = defineTool({
  name: 'inspect_analysis_view',
  title: 'Inspect retained Evidence',
  description:
    'Read retained Evidence: {kind:"summary"}, or {kind:"page", collection, where?, offset, limit}, e.g. a reply\'s continuation. Pages carry rows and coverage {matched, total, next_offset, exhausted}, and limited_by: "reply_budget" when fewer rows than asked fit in one reply; an empty page never means a row is absent.',
  input: z.strictObject({ evidence_id: evidenceIdSchema, view: viewSchema }),
  effect: READ,
  runsOn: 'gateway',
  toolset: 'core',
  limits: { limit: PAGE_LIMIT },
  collections: {},
});

export const getEvidence = defineTool({
  name: 'get_evidence',
  title: 'Get an Evidence record',
  description:
    'One Evidence record: provenance, summary, collections (row counts, filterable fields), truncation and limitations.',
  input: z.strictObject({ evidence_id: evidenceIdSchema }),
  effect: READ,
  runsOn: 'gateway',
  toolset: 'core',
  limits: {},
  collections: {},
});

export const listEvidence = defineTool({
  name: 'list_evidence',
  title: 'List Evidence',
  description:
    "Your team's retained Evidence records, newest first, by tool, investigation or launch workflow; each without its parameters and with its limitations counted (get_evidence shows both).",
  input: z.strictObject({
    tool: z.string().max(64).optional(),
    investigation: investigation.optional(),
    workflow_id: z.string().max(512).optional().describe('Only Evidence retained by this launch.'),
    cursor,
    limit,
  }),
  effect: READ,
  runsOn: 'gateway',
  toolset: 'core',
  limits: { limit: LIST_LIMIT },
  collections: {},
});

export const recordUnknown = defineTool({
  name: 'record_unknown',
  title: 'Record a residual unknown',
  description:
    'Record a question the evidence leaves open. Its id derives from question and scope, so recording it again returns the same unknown unchanged.',
  input: z.strictObject({
    question: z.string().min(1).max(4_096),
    scope: z
      .string()
      .min(1)
      .max(1_024)
      .describe('What the question is about: a target, address, component, launch.'),
    evidence_ids: z
      .array(evidenceIdSchema)
      .max(64)
      .default([])
      .describe('Evidence that raised the question.'),
    investigation: investigation.optional(),
  }),
  effect: LEDGER_WRITE,
  runsOn: 'gateway',
  toolset: 'core',
  limits: {},
  collections: {},
});

export const updateUnknown = defineTool({
  name: 'update_unknown',
  title: 'Update a residual unknown',
  description:
    'Change an unknown’s status, note or settling evidence if its revision is still expected_revision (else revision_conflict, nothing changes). A retry of the same change changes nothing.',
  input: z.strictObject({
    unknown_id: z.string().regex(UNKNOWN_ID, { error: 'unknown_id is "unk_" followed by 32 hex digits' }),
    expected_revision: z.number().int().min(1).max(1_000_000_000),
    status: z.enum(UNKNOWN_STATUSES).optional(),
    note: z.string().max(4_096).nullable().optional(),
    settled_by: z
      .array(evidenceIdSchema)
      .max(64)
      .optional()
      .describe('Evidence that resolves, refutes or supersedes it (required for those statuses).'),
  }),
  effect: LEDGER_WRITE,
  runsOn: 'gateway',
  toolset: 'core',
  limits: {},
  collections: {},
});

export const HISTORY_LIMIT = { default: 20, max: 200, unit: 'revisions' };

/** A page of a history, newest first: get_unknown's and get_annotation's. */
export const historyPage = {
  history_limit: bounded(HISTORY_LIMIT, 'Revisions returned'),
  before_revision: z
    .number()
    .int()
    .min(2)
    .max(1_000_000_000)
    .optional()
    .describe('Continue the history below this revision (next_before_revision of the previous reply).'),
};

export const getUnknown = defineTool({
  name: 'get_unknown',
  title: 'Get a residual unknown',
  description:
    'One unknown of your team by id, with its history: every revision (status, note, settling evidence), who made it and when, newest first.',
  input: z.strictObject({
    unknown_id: z.string().regex(UNKNOWN_ID, { error: 'unknown_id is "unk_" followed by 32 hex digits' }),
    ...historyPage,
  }),
  effect: READ,
  runsOn: 'gateway',
  toolset: 'core',
  limits: { history_limit: HISTORY_LIMIT },
  collections: {},
});

export const listUnknowns = defineTool({
  name: 'list_unknowns',
  title: 'List residual unknowns',
  description: "Your team's residual unknowns, newest first, by status and investigation.",
  input: z.strictObject({
    status: z.enum(UNKNOWN_STATUSES).optional(),
    investigation: investigation.optional(),
    cursor,
    limit,
  }),
  effect: READ,
  runsOn: 'gateway',
  toolset: 'core',
  limits: { limit: LIST_LIMIT },
  collections: {},
});

export const exportEvidenceBundle = defineTool({
  name: 'export_evidence_bundle',
  title: 'Export Evidence as a bundle',
  description:
    'Write your team’s Evidence (records, documents, every row), the residual unknowns recorded against it and the team’s annotations on what it is about (each with its revisions) into one canonical JSON bundle file with digests, in the exports folder; the reply names the file. Name the Evidence, or give only investigation to export all of it.',
  input: z
    .strictObject({
      evidence_ids: z
        .array(evidenceIdSchema)
        .min(1)
        .max(BUNDLE_LIMITS.evidence.max)
        .optional()
        .describe('The Evidence to export; without it, every Evidence of investigation.'),
      investigation: investigation
        .optional()
        .describe(
          'The investigation this export belongs to; without evidence_ids, the one exported whole (its Evidence and unknowns).',
        ),
      detail: detailSchema,
    })
    .refine((i) => i.evidence_ids !== undefined || i.investigation !== undefined, {
      error: 'name the Evidence (evidence_ids), or an investigation to export whole',
    }),
  effect: {
    idempotent: false,
    readOnly: false,
    destructive: false,
    openWorld: true,
    effects: ['writes a bundle file under DOSSIER_HOME/exports'],
  },
  runsOn: 'analysis',
  toolset: 'bundles',
  limits: BUNDLE_LIMITS,
  collections: {
    entries: { description: 'The exported Evidence ids in order', filterable: ['evidence_id'] },
  },
  maxRunMs: () => 10 * 60_000,
});

export const importEvidenceBundle = defineTool({
  name: 'import_evidence_bundle',
  title: 'Import an Evidence bundle',
  description:
    'Verify a bundle file and retain its Evidence and unknowns for your team, atomically: if any digest does not match, the whole bundle is refused and nothing changes. An unknown already here moves forward only along its own history; one changed here since is left as it is and listed in conflicts. Importing again changes nothing.',
  input: z.strictObject({
    path: z
      .string()
      .min(1)
      .max(4_096)
      .refine((p) => p.startsWith('/'), { error: 'path must be absolute' })
      .describe(
        "Absolute path of the bundle file, in your team's folder of a bundle root (<root>/<team>/…; DOSSIER_BUNDLE_ROOTS, by default DOSSIER_HOME/exports, where export_evidence_bundle writes).",
      ),
  }),
  effect: LEDGER_WRITE,
  runsOn: 'gateway',
  toolset: 'bundles',
  limits: { bytes: BUNDLE_LIMITS.bytes },
  collections: {},
});

export const registerArtifact = defineTool({
  name: 'register_artifact',
  title: 'Register an artifact',
  description:
    "Store a file for your team and get its digest, size and type: by path (under the allowed roots or your team's inbox), or an extraction's entry by {evidence_id, entry}. The same content gets the same digest. Other files: POST /artifacts, or `npx dossier upload FILE`.",
  input: z
    .strictObject({
      path: z
        .string()
        .min(1)
        .max(4_096)
        .refine((p) => !p.includes('\0'), { error: 'path may not hold a NUL byte' })
        .optional()
        .describe(
          "Path on the dossier host: absolute, under DOSSIER_ALLOWED_ROOTS or your team's inbox (DOSSIER_INBOX/<team>/), or relative to that inbox (a file dropped there: 'fw.bin').",
        ),
      evidence_id: z
        .string()
        .regex(/^ev_[0-9a-f]{64}$/, { error: 'evidence_id is "ev_" followed by 64 hex digits' })
        .optional()
        .describe('The Evidence of a succeeded extract_artifact or extract_firmware launch (with entry).'),
      entry: z
        .string()
        .min(1)
        .max(4_096)
        .optional()
        .describe(
          "The entry's path exactly as that Evidence's entries collection lists it (with evidence_id).",
        ),
      name: z
        .string()
        .min(1)
        .max(256)
        .optional()
        .describe('A human name for the artifact (default: the file name).'),
    })
    .refine((i) => (i.path === undefined) !== (i.evidence_id === undefined && i.entry === undefined), {
      error: 'pass either path, or evidence_id with entry',
    })
    .refine((i) => (i.evidence_id === undefined) === (i.entry === undefined), {
      error: 'evidence_id and entry go together: the extraction and the path of one of its entries',
    }),
  effect: {
    idempotent: true,
    readOnly: false,
    destructive: false,
    openWorld: true,
    effects: ['reads a file on the dossier host', 'writes the artifact store'],
  },
  runsOn: 'gateway',
  toolset: 'core',
  limits: { bytes: UPLOAD_LIMIT },
  collections: {},
});

export const listArtifacts = defineTool({
  name: 'list_artifacts',
  title: 'List artifacts',
  description: "Your team's artifacts (digest, size, type, origin), newest first.",
  input: z.strictObject({ cursor, limit }),
  effect: READ,
  runsOn: 'gateway',
  toolset: 'core',
  limits: { limit: LIST_LIMIT },
  collections: {},
});
