// Static analysis of a registered binary, on a real provider (angr). These
// tools change nothing: no idempotency key. Each runs as an analysis on the
// `analysis` capability, keyed by what was asked, so the same question from
// anyone in the team is answered once and shared; all of them read one
// analysis database per artifact, profile and provider, built once.
import { z } from 'zod';
import { ARTIFACT_DIGEST } from '../domain/types.ts';
import { bounded, defineTool, type EffectAudit, detailSchema } from './contract.ts';

export const ANALYSIS_LIMITS = {
  min_length: { default: 4, min: 4, max: 1_024, unit: 'characters (the database keeps runs of 4 or more)' },
  max_strings: { default: 100_000, max: 1_000_000, unit: 'strings' },
  depth: { default: 2, min: 1, max: 16, unit: 'call levels' },
  max_edges: { default: 10_000, max: 100_000, unit: 'edges' },
  max_references: { default: 10_000, max: 1_000_000, unit: 'references' },
  decompile_timeout_s: { default: 120, max: 600, unit: 's' },
};

const ANALYSIS: EffectAudit = {
  idempotent: true,
  readOnly: true,
  destructive: false,
  openWorld: false,
  effects: [],
};

export const PROFILES = ['default', 'thorough'] as const;

const target = {
  artifact: z
    .string()
    .regex(ARTIFACT_DIGEST, {
      error: 'artifact is "sha256:" followed by 64 hex digits (register_artifact returns it)',
    })
    .describe(
      "A registered binary (register_artifact), or an entries row's artifact from your team's extraction.",
    ),
  profile: z
    .enum(PROFILES)
    .default('default')
    .describe('thorough adds angr’s cross-reference pass (slower). One database per artifact and profile.'),
  detail: detailSchema,
};

/** A function named by symbol name or by address ("0x401136"). */
const functionRef = z
  .string()
  .min(1)
  .max(1_024)
  .describe(
    'A function by address ("0x401136") or name: angr\'s, or one your team gave it on this artifact (set_annotation; a name carried from another build is not looked up).',
  );

const collectionsOf = (fields: Record<string, [string, string[]]>) =>
  Object.fromEntries(
    Object.entries(fields).map(([name, [description, filterable]]) => [name, { description, filterable }]),
  );

export const inspectBinary = defineTool({
  name: 'inspect_binary',
  title: 'Inspect a binary',
  description:
    'Format, architecture, bits, endianness, entry, build-id, stripped, PIE, interpreter and libraries of a binary, with its sections (entropy), imports, exports and symbols as collections.',
  input: z.object(target),
  effect: ANALYSIS,
  runsOn: 'analysis',
  toolset: 'analysis',
  limits: {},
  collections: collectionsOf({
    sections: ['Sections: {name, address, size, flags, entropy, type}', ['name', 'flags']],
    imports: ['Imported symbols: {name, library, address, plt_address, version}', ['name', 'library']],
    exports: ['Exported symbols: {name, address, type}', ['name', 'type']],
    symbols: [
      'All symbols: {name, address, size, type, binding, section, is_import, is_export, library}',
      ['name', 'type', 'binding', 'section'],
    ],
  }),
});

export const findStrings = defineTool({
  name: 'find_strings',
  title: 'Find strings in a binary',
  description:
    'Printable strings (ASCII, UTF-16LE) in the binary’s non-executable loaded sections, with their addresses and how many code or data references point into each.',
  input: z.object({
    ...target,
    min_length: bounded(ANALYSIS_LIMITS.min_length, 'Shortest string kept'),
    encodings: z
      .array(z.enum(['ascii', 'utf-16le']))
      .min(1)
      .default(['ascii', 'utf-16le'])
      .describe('Encodings to keep.'),
    contains: z.string().min(1).max(1_024).optional().describe('Keep only strings that contain this text.'),
    case_sensitive: z.boolean().default(true).describe('Whether `contains` compares case.'),
    max_strings: bounded(ANALYSIS_LIMITS.max_strings, 'Strings kept; beyond it the result says truncated'),
  }),
  effect: ANALYSIS,
  runsOn: 'analysis',
  toolset: 'analysis',
  limits: { min_length: ANALYSIS_LIMITS.min_length, max_strings: ANALYSIS_LIMITS.max_strings },
  collections: collectionsOf({
    strings: [
      'Strings: {address, section, encoding, text, length, references, referenced_by: [{address, name}] (the first 16 functions that own a reference, by address)}',
      ['section', 'encoding', 'text', 'address'],
    ],
  }),
});

export const listFunctions = defineTool({
  name: 'list_functions',
  title: 'List the functions of a binary',
  description:
    'Every function the provider recovered: address, name (angr’s sub_… when no symbol names it), size, basic blocks, callers and callees, its extent (end_address), and how it was found (found_by: symbol, eh_frame call-frame record, plt, or cfg for angr’s control-flow recovery alone; trust them in that order). A split-off part (gcc’s .cold code) names its function in part_of.',
  input: z.object(target),
  effect: ANALYSIS,
  runsOn: 'analysis',
  toolset: 'analysis',
  limits: {},
  collections: collectionsOf({
    functions: [
      'Functions: {address, name, named, size, blocks, is_plt, callers, callees, end_address, found_by, part_of, identity} (identity: code with addresses neutralised, the same in every build that has it; find_identical_functions)',
      ['name', 'address', 'named', 'is_plt', 'found_by', 'part_of', 'identity'],
    ],
  }),
});

export const getCallGraph = defineTool({
  name: 'get_call_graph',
  title: 'Call graph around a function',
  description: 'The callers and/or callees of a function, level by level up to a depth, as bounded edges.',
  input: z.object({
    ...target,
    function: functionRef,
    direction: z.enum(['callees', 'callers', 'both']).default('callees'),
    depth: bounded(ANALYSIS_LIMITS.depth, 'Levels to follow'),
    max_edges: bounded(ANALYSIS_LIMITS.max_edges, 'Edges kept; beyond it the result says truncated'),
  }),
  effect: ANALYSIS,
  runsOn: 'analysis',
  toolset: 'analysis',
  limits: { depth: ANALYSIS_LIMITS.depth, max_edges: ANALYSIS_LIMITS.max_edges },
  collections: collectionsOf({
    edges: [
      'Call edges: {depth, direction, src, src_name, dst, dst_name, call_site}',
      ['depth', 'direction', 'src', 'dst', 'src_name', 'dst_name'],
    ],
    nodes: ['Functions reached: {address, name, depth}', ['depth', 'name']],
  }),
});

export const decompileFunction = defineTool({
  name: 'decompile_function',
  title: 'Decompile a function',
  description:
    'angr’s pseudo-C for one function, as text lines: an approximation (types, names and control flow may differ from the source).',
  input: z.object({
    ...target,
    function: functionRef,
    timeout_s: bounded(ANALYSIS_LIMITS.decompile_timeout_s, 'Time the decompiler gets').refine(
      (v) => v >= 5,
      {
        error: 'timeout_s is at least 5',
      },
    ),
  }),
  effect: ANALYSIS,
  runsOn: 'analysis',
  toolset: 'analysis',
  limits: { timeout_s: ANALYSIS_LIMITS.decompile_timeout_s },
  collections: collectionsOf({ lines: ['Pseudo-C, one row per line: {line, text}', ['line']] }),
  maxRunMs: (input) => input.timeout_s * 1000 + 60_000,
});

export const traceFeature = defineTool({
  name: 'trace_feature',
  title: 'Trace a feature through a binary',
  description:
    'Where a feature lives: the strings, symbols or addresses matching the query, every code or data reference to them, and the procedure owning each (found, not_found, unavailable; unavailable ones become residual unknowns).',
  input: z.object({
    ...target,
    query: z
      .string()
      .min(1)
      .max(1_024)
      .describe('What to look for: text, a regular expression, a symbol name or an address.'),
    search_mode: z
      .enum(['literal', 'regex', 'symbol', 'address'])
      .default('literal')
      .describe(
        'literal: strings containing the text; regex: strings matching the expression; symbol: functions and symbols with exactly this name; address: what lies at this address ("0x…").',
      ),
    case_sensitive: z.boolean().default(true).describe('For literal and regex searches.'),
    max_references: bounded(
      ANALYSIS_LIMITS.max_references,
      'References kept; beyond it the result says truncated',
    ),
  }),
  effect: ANALYSIS,
  runsOn: 'analysis',
  toolset: 'analysis',
  limits: { max_references: ANALYSIS_LIMITS.max_references },
  collections: collectionsOf({
    references: [
      'References: {source_address, target_address, target_addresses, kind, match_index, match_type, owner: {outcome, procedure_name, procedure_address}}; filter owners by "owner.outcome", "owner.procedure_name" or "owner.procedure_address"',
      [
        'target_address',
        'target_addresses',
        'owner.outcome',
        'owner.procedure_name',
        'owner.procedure_address',
        'kind',
        'match_type',
      ],
    ],
    matches: ['What matched: {match_index, type, name, address, section, encoding, references}', ['type']],
  }),
  primaryCollection: 'references',
});

export type TraceFeatureInput = z.infer<typeof traceFeature.input>;

export const diffBinaries = defineTool({
  name: 'diff_binaries',
  title: 'Diff two builds of a binary',
  description:
    'Match the functions of `artifact` (later build) to `base` (earlier): by symbol, identity (code with addresses neutralised), then structure (call graph, blocks, strings, constants), each with similarity and confidence; identical or changed; the rest added or removed. Computed once per pair for the team. Annotations on base carry over: propagated to identical functions, suggested for changed ones (list_carried_annotations).',
  input: z.object({
    ...target,
    artifact: target.artifact.describe('The later build: its functions are matched to the base’s.'),
    base: target.artifact.describe('The earlier build (a registered binary of your team).'),
  }),
  effect: ANALYSIS,
  runsOn: 'analysis',
  toolset: 'knowledge',
  limits: {},
  collections: collectionsOf({
    matches: [
      'Matched functions: {address, name, base_address, base_name, class: identical|changed, method: symbol|identity|identity+neighbourhood|call_graph|structure, similarity, confidence, identity, base_identity}',
      ['class', 'method', 'address', 'base_address'],
    ],
    added: ['Functions only in the artifact: {address, name, identity, size, blocks}', ['address']],
    removed: [
      'Functions only in the base: {base_address, base_name, identity, size, blocks}',
      ['base_address'],
    ],
  }),
  primaryCollection: 'matches',
});
