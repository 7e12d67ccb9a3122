// Rule scans: YARA rule bundles registered once per team (compiled and checked
// at registration, stored content-addressed like any artifact), and a scan of
// an artifact or of every file of an extraction with them, run once per
// (rules, target) for the whole team, retained and paged.
import { z } from 'zod';
import { ARTIFACT_DIGEST } from '../domain/types.ts';
import { bounded, defineTool, detailSchema } from './contract.ts';

export const RULES_LIMITS = {
  sources: { default: 1, min: 1, max: 64, unit: 'rule files in one bundle' },
  source_bytes: { default: 1024 * 1024, max: 1024 * 1024, unit: 'bytes of one rule file given inline' },
  artifact_bytes: {
    default: 16 * 1024 * 1024,
    max: 16 * 1024 * 1024,
    unit: 'bytes of a rule file given as an artifact',
  },
  timeout_s: { default: 60, min: 1, max: 1_800, unit: 's for the whole scan' },
  max_matches: { default: 10_000, max: 1_000_000, unit: 'matches kept' },
  max_match_bytes: { default: 64, max: 1_024, unit: 'bytes kept of each match' },
};

const digest = z.string().regex(ARTIFACT_DIGEST, {
  error: 'a digest is "sha256:" followed by 64 hex digits',
});

export const registerRules = defineTool({
  name: 'register_rules',
  title: 'Register a YARA rule bundle',
  description:
    "Compile YARA rule files (YARA-X, one namespace per file) and store them as your team's bundle; returns the digest scan_with_rules takes. Give sources inline, or artifact: one registered rule file (up to 16 MiB). A rule that does not compile is refused with file, line and column; nothing is stored.",
  input: z
    .strictObject({
      name: z.string().min(1).max(256).describe('A human name for the bundle (e.g. "crypto-constants").'),
      sources: z
        .array(
          z.strictObject({
            name: z
              .string()
              .regex(/^[A-Za-z_][A-Za-z0-9_.-]{0,63}$/, {
                error: 'a source name is 1-64 of A-Z a-z 0-9 _ . -',
              })
              .describe("The rule file's name, also its namespace."),
            text: z.string().min(1).max(RULES_LIMITS.source_bytes.max).describe('The YARA source.'),
          }),
        )
        .min(1)
        .max(RULES_LIMITS.sources.max)
        .optional()
        .describe('The rule files of the bundle, in order.'),
      artifact: digest
        .optional()
        .describe('Instead of sources: a registered artifact holding one YARA rule file (UTF-8).'),
    })
    .refine((i) => (i.sources === undefined) !== (i.artifact === undefined), {
      error: 'pass either sources or artifact',
    }),
  effect: {
    idempotent: true,
    readOnly: false,
    destructive: false,
    openWorld: false,
    effects: ['stores the bundle as an artifact of your team (content-addressed)'],
  },
  runsOn: 'gateway',
  toolset: 'extraction',
  limits: {
    sources: RULES_LIMITS.sources,
    source_bytes: RULES_LIMITS.source_bytes,
    artifact_bytes: RULES_LIMITS.artifact_bytes,
  },
  collections: {},
});

export const scanWithRules = defineTool({
  name: 'scan_with_rules',
  title: 'Scan with YARA rules',
  description:
    'Scan a registered artifact, or every file an extraction wrote (evidence_id), with a register_rules bundle (YARA-X, in the sandbox). One scan per (rules, target) for your team: asking again attaches. One row per match (rule, tags, metadata, file, offset, length, bytes); timeout_s bounds the whole scan.',
  input: z
    .strictObject({
      rules: digest.describe('Digest of a bundle register_rules returned.'),
      artifact: digest.optional().describe('Digest of a registered artifact to scan.'),
      evidence_id: z
        .string()
        .regex(/^ev_[0-9a-f]{64}$/, { error: 'evidence_id is "ev_" followed by 64 hex digits' })
        .optional()
        .describe('An extraction to scan: every file it wrote, each checked against its manifest digest.'),
      timeout_s: bounded(RULES_LIMITS.timeout_s, 'Time the whole scan gets'),
      max_matches: bounded(
        RULES_LIMITS.max_matches,
        'Matches kept; beyond it the scan stops and says truncated',
      ),
      max_match_bytes: bounded(RULES_LIMITS.max_match_bytes, 'Bytes kept of each match'),
      detail: detailSchema,
    })
    .refine((i) => (i.artifact === undefined) !== (i.evidence_id === undefined), {
      error: 'pass either artifact or evidence_id',
    }),
  effect: { idempotent: true, readOnly: true, destructive: false, openWorld: false, effects: [] },
  runsOn: 'analysis',
  toolset: 'extraction',
  needsDatabase: false,
  limits: {
    timeout_s: RULES_LIMITS.timeout_s,
    max_matches: RULES_LIMITS.max_matches,
    max_match_bytes: RULES_LIMITS.max_match_bytes,
  },
  collections: {
    matches: {
      description:
        'One row per pattern match (a rule whose condition holds without a pattern match: one row, pattern null): {path, rule, namespace, tags, metadata, pattern, offset, length, data_hex, data_truncated}',
      filterable: ['rule', 'namespace', 'path', 'pattern'],
    },
    files: {
      description:
        'One row per file: {path, sha256, size, status (scanned, timeout, error, not_scanned), matches, seconds, reason}',
      filterable: ['status', 'path'],
    },
  },
  primaryCollection: 'matches',
  maxRunMs: (input) => input.timeout_s * 1000 + 120_000,
});
