// The one interface the gateway and the workers use to reach retained state.
// Every read that returns launches or Evidence takes the caller's team.
import type {
  EvidenceRecord,
  LaunchOutcome,
  LaunchRecord,
  LaunchStatus,
  NewEvidence,
  Page,
  Principal,
  Role,
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

export interface EvidenceStore {
  /** Creates a token for a principal; the plain token is returned once and only its hash is kept. */
  createToken(principal: Principal, label?: string): Promise<string>;
  resolveToken(token: string): Promise<Principal | undefined>;

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

  /** Retains a complete result; idempotent because the id is content-addressed. */
  putEvidence(evidence: NewEvidence): Promise<EvidenceRecord>;
  getEvidence(team: string, evidenceId: string): Promise<EvidenceRecord | undefined>;
  getEvidenceDocument(team: string, evidenceId: string): Promise<Record<string, unknown> | undefined>;

  close(): Promise<void>;
}

export const ROLES: readonly Role[] = ['viewer', 'operator', 'admin'];
