// The custom search attributes that make every launch auditable in the Temporal
// UI (who, what tool, which key, which target). All are exact match: Keyword,
// but for the artifacts, a Keyword list, because Temporal's SQL visibility
// (SQLite, PostgreSQL) holds ten Keyword attributes and the ten below fill them.
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

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
} as const;
