// The custom search attributes that make every launch auditable in the Temporal
// UI (who, what tool, which key, which target). All are exact match: Keyword,
// but for the artifacts, a Keyword list, because Temporal's SQL visibility
// (SQLite, PostgreSQL) holds ten Keyword attributes and the ten below fill them.
import { defineSearchAttributeKey, SearchAttributeType, type SearchAttributePair } from '@temporalio/common';

export const SEARCH_ATTRIBUTES = {
  tool: defineSearchAttributeKey('DossierTool', SearchAttributeType.KEYWORD),
  principal: defineSearchAttributeKey('DossierPrincipal', SearchAttributeType.KEYWORD),
  team: defineSearchAttributeKey('DossierTeam', SearchAttributeType.KEYWORD),
  key: defineSearchAttributeKey('DossierKey', SearchAttributeType.KEYWORD),
  bodyDigest: defineSearchAttributeKey('DossierBodyDigest', SearchAttributeType.KEYWORD),
  investigation: defineSearchAttributeKey('DossierInvestigation', SearchAttributeType.KEYWORD),
  device: defineSearchAttributeKey('DossierDevice', SearchAttributeType.KEYWORD),
  deviceKind: defineSearchAttributeKey('DossierDeviceKind', SearchAttributeType.KEYWORD),
  /** Set when a launch ends: succeeded, failed, interrupted or cancelled (so "every failed launch of team X today" is a query). */
  outcome: defineSearchAttributeKey('DossierOutcome', SearchAttributeType.KEYWORD),
  /** The Evidence a launch retained, when it retained one. */
  evidence: defineSearchAttributeKey('DossierEvidence', SearchAttributeType.KEYWORD),
  /** The artifacts (sha256:…) a workflow works on: an analysis and its database build (`DossierArtifact = 'sha256:…'`). */
  artifact: defineSearchAttributeKey('DossierArtifact', SearchAttributeType.KEYWORD_LIST),
  /**
   * What a workflow acts on, as its caller named it, for the audit list: a launch's executable,
   * artifact or device; an analysis's artifact and the artifact's name.
   */
  target: defineSearchAttributeKey('DossierTarget', SearchAttributeType.KEYWORD_LIST),
} as const;

/** What the audit shows of every dossier workflow: who, what tool, which key, and what it works on. */
export interface Audit {
  tool: string;
  principal: string;
  team: string;
  key: string;
  bodyDigest?: string;
  investigation?: string | null;
  /** The artifacts it reads (sha256:…), when it names them. */
  artifacts?: string[];
  /** What it acts on as its caller named it (launchTargets, analysisTargets); left out when empty. */
  targets?: string[];
}

/** The search attributes of an audit, for a workflow's start (launches, analyses, database builds). */
export function auditAttributes(a: Audit): SearchAttributePair[] {
  const S = SEARCH_ATTRIBUTES;
  return [
    { key: S.tool, value: a.tool },
    { key: S.principal, value: a.principal },
    { key: S.team, value: a.team },
    { key: S.key, value: a.key },
    ...(a.bodyDigest ? [{ key: S.bodyDigest, value: a.bodyDigest }] : []),
    ...(a.investigation ? [{ key: S.investigation, value: a.investigation }] : []),
    ...(a.artifacts ? [{ key: S.artifact, value: a.artifacts }] : []),
    ...(a.targets?.length ? [{ key: S.target, value: a.targets }] : []),
  ];
}

/** The longest value kept of a target (an executable path may run to 4 KiB): the audit list shows its head. */
const TARGET_CHARS = 200;

/** The target attribute of a launch's input: its executable, artifact and device, where it names them. */
export function launchTargets(input: Record<string, unknown>): string[] {
  return ['executable', 'artifact', 'device']
    .map((k) => input[k])
    .filter((v): v is string => typeof v === 'string' && v.length > 0)
    .map((v) => v.slice(0, TARGET_CHARS));
}

/**
 * The target attribute of an analysis: the artifact's digest and its name when it has one, or the
 * Evidence it reads (a rule scan of an extraction).
 */
export function analysisTargets(input: Record<string, unknown>, name: string | null | undefined): string[] {
  const artifact = typeof input.artifact === 'string' ? [input.artifact] : [];
  return [
    ...artifact,
    ...(artifact.length && name ? [name.slice(0, TARGET_CHARS)] : []),
    ...(typeof input.evidence_id === 'string' ? [input.evidence_id] : []),
  ];
}
