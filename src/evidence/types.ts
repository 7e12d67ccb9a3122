// What the store holds, as plain data. Both backends speak these types.

export type Role = 'viewer' | 'operator' | 'admin';

export interface Principal {
  principal: string;
  team: string;
  role: Role;
}

export const FINISHED_STATUSES = ['succeeded', 'failed', 'interrupted', 'cancelled'] as const;
export type FinishedStatus = (typeof FINISHED_STATUSES)[number];
export type LaunchStatus = 'running' | FinishedStatus;
/** `pending`: claimed in the store, workflow not yet known to have started. */
export type StoredLaunchStatus = 'pending' | LaunchStatus;
/** The journal that makes "at most once" provable: the effect began, or it never did. */
export type EffectJournal = 'not_started' | 'started';

export function isFinished(status: StoredLaunchStatus): status is FinishedStatus {
  return (FINISHED_STATUSES as readonly string[]).includes(status);
}

export interface LaunchRecord {
  team: string;
  principal: string;
  key: string;
  tool: string;
  bodyDigest: string;
  input: unknown;
  workflowId: string;
  runId: string | null;
  status: StoredLaunchStatus;
  effect: EffectJournal;
  evidenceId: string | null;
  summary: Record<string, unknown> | null;
  error: Record<string, unknown> | null;
  progress: Record<string, unknown> | null;
  investigation: string | null;
  createdAt: string;
  startedAt: string | null;
  finishedAt: string | null;
}

export interface LaunchOutcome {
  status: FinishedStatus;
  evidenceId: string | null;
  summary: Record<string, unknown> | null;
  error: Record<string, unknown> | null;
}

export interface EvidenceRecord {
  evidence_id: string;
  tool: string;
  provider: { name: string; version: string };
  parameters: unknown;
  parameters_digest: string;
  target: { digest?: string; path?: string } | null;
  principal: string;
  team: string;
  investigation: string | null;
  launch: { workflow_id: string; run_id: string } | null;
  created_at: string;
  summary: Record<string, unknown>;
  collections: Record<string, { rows: number }>;
  truncated: boolean;
  limitations: string[];
  document: { bytes: number; digest: string };
}

export interface NewEvidence {
  record: Omit<EvidenceRecord, 'evidence_id' | 'collections' | 'document'>;
  document: Record<string, unknown>;
  collections: Record<string, unknown[]>;
}

export interface Page<T> {
  items: T[];
  nextCursor: string | null;
}
