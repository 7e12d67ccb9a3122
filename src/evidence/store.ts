// The one interface the gateway and the workers use to reach retained state.
// Every read that returns launches, Evidence or unknowns takes the caller's team.
import type { BuiltEvidence } from './evidence.ts';
import type {
  ArtifactRecord,
  EvidenceRecord,
  LaunchOutcome,
  LaunchRecord,
  LaunchStatus,
  NewEvidence,
  NewUnknown,
  Page,
  PageRow,
  Principal,
  Role,
  UnknownRecord,
  UnknownStatus,
  Where,
} from './types.ts';

export interface NewLaunch {
  team: string;
  principal: string;
  key: string;
  tool: string;
  bodyDigest: string;
  input: unknown;
  workflowId: string;
  investigation: string | null;
}

export interface LaunchFilter {
  status?: LaunchStatus;
  tool?: string;
  cursor?: string;
  limit: number;
}

export interface EvidenceFilter {
  tool?: string;
  investigation?: string;
  workflowId?: string;
  cursor?: string;
  limit: number;
}

export interface UnknownFilter {
  status?: UnknownStatus;
  investigation?: string;
  cursor?: string;
  limit: number;
}

export interface PageQuery {
  evidenceId: string;
  collection: string;
  /** The collection's row count, from the Evidence record. */
  total: number;
  where?: Where;
  offset: number;
  limit: number;
}

export interface PageResult {
  rows: PageRow[];
  matched: number;
}

export interface EvidenceStore {
  readonly dialect: 'sqlite' | 'postgres';

  /** Creates a token for a principal; the plain token is returned once and only its hash is kept. */
  createToken(principal: Principal, label?: string): Promise<string>;
  resolveToken(token: string): Promise<Principal | undefined>;
  /** Tokens as their id (the first 12 hex digits of the hash), never the token itself. */
  listTokens(team?: string): Promise<TokenInfo[]>;
  /** Revokes the live tokens whose id starts with `idPrefix` (at least 8 hex digits); returns how many. */
  revokeToken(idPrefix: string): Promise<number>;

  /** Inserts the launch unless the principal already used the key; returns the record that holds the key. */
  claimLaunch(launch: NewLaunch): Promise<{ created: boolean; record: LaunchRecord }>;
  getLaunch(team: string, principal: string, key: string): Promise<LaunchRecord | undefined>;
  getLaunchByWorkflowId(workflowId: string): Promise<LaunchRecord | undefined>;
  markLaunchRunning(workflowId: string, runId: string): Promise<void>;
  /**
   * Journals that the effect is about to begin. Returns false when the journal
   * already says `started`: an earlier attempt may have had the effect, so this
   * one must not run it again.
   */
  journalEffectStarted(workflowId: string, progress?: Record<string, unknown>): Promise<boolean>;
  recordProgress(workflowId: string, progress: Record<string, unknown>): Promise<void>;
  /** Records the outcome once; a later call for a finished launch changes nothing. */
  finishLaunch(workflowId: string, outcome: LaunchOutcome): Promise<LaunchRecord | undefined>;
  listLaunches(team: string, filter: LaunchFilter): Promise<Page<LaunchRecord>>;

  /** Retains a complete result (for `team`, by default the record's); idempotent because the id is content-addressed. */
  putEvidence(evidence: NewEvidence, team?: string): Promise<EvidenceRecord>;
  /** Retains several built Evidence records in one transaction (bundle import): all or none. */
  importEvidence(team: string, items: BuiltEvidence[]): Promise<{ imported: number; present: number }>;
  getEvidence(team: string, evidenceId: string): Promise<EvidenceRecord | undefined>;
  getEvidenceDocument(team: string, evidenceId: string): Promise<Record<string, unknown> | undefined>;
  listEvidence(team: string, filter: EvidenceFilter): Promise<Page<EvidenceRecord>>;
  /** One page of a collection; the caller has checked the team can see the Evidence. */
  page(query: PageQuery): Promise<PageResult>;
  /** Every row of a collection in source order (bundles; bounded by the caller). */
  allRows(evidenceId: string, collection: string): Promise<unknown[]>;
  /** Every row of every collection, in one read (complete replies; bounded by the caller). */
  allCollections(evidenceId: string): Promise<Record<string, unknown[]>>;

  recordUnknown(
    team: string,
    principal: string,
    unknown: NewUnknown & { unknown_id: string },
    investigation: string | null,
    evidenceIds: string[],
  ): Promise<{ created: boolean; unknown: UnknownRecord }>;
  getUnknown(team: string, unknownId: string): Promise<UnknownRecord | undefined>;
  updateUnknown(
    team: string,
    unknownId: string,
    expectedRevision: number,
    change: { status?: UnknownStatus; note?: string | null; settledBy?: string[] | null },
  ): Promise<{ applied: boolean; unknown: UnknownRecord | undefined }>;
  listUnknowns(team: string, filter: UnknownFilter): Promise<Page<UnknownRecord>>;

  /** Records an artifact for a team; a second registration of the same digest keeps the first record. */
  putArtifact(
    team: string,
    artifact: ArtifactRecord,
  ): Promise<{ created: boolean; artifact: ArtifactRecord }>;
  getArtifact(team: string, digest: string): Promise<ArtifactRecord | undefined>;
  listArtifacts(team: string, filter: { cursor?: string; limit: number }): Promise<Page<ArtifactRecord>>;

  /**
   * Candidate values for prompt-argument completion, newest first, at most
   * `limit`: artifact digests, evidence ids, the principal's launch keys, open
   * unknown ids, or investigations.
   */
  completionCandidates(
    team: string,
    principal: string,
    kind: 'artifact' | 'evidence' | 'launch_key' | 'open_unknown' | 'investigation',
    limit: number,
  ): Promise<string[]>;

  close(): Promise<void>;
}

export interface TokenInfo extends Principal {
  id: string;
  label: string | null;
  created_at: string;
  revoked_at: string | null;
}

export const ROLES: readonly Role[] = ['viewer', 'operator', 'admin'];
