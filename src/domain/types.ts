// The records dossier keeps and the names it shares across layers, as plain
// data. Both store backends speak these types.

/** What a worker serves: each is a task queue, and every tool's contract names the one that runs it. */
export const CAPABILITIES = ['capture', 'extract', 'device', 'analysis'] as const;
export type Capability = (typeof CAPABILITIES)[number];

/** A registered artifact is named by the SHA-256 of its bytes. */
export const ARTIFACT_DIGEST = /^sha256:[0-9a-f]{64}$/;

export type Role = 'viewer' | 'operator' | 'admin';

export interface Principal {
  principal: string;
  team: string;
  role: Role;
  /** The toolsets the token lists by default (tools/list), when it names some. */
  toolsets?: string[];
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
  collections: Record<string, CollectionInfo>;
  truncated: boolean;
  limitations: string[];
  document: { bytes: number; digest: string };
}

export interface CollectionInfo {
  rows: number;
  /** Bytes of the rows as canonical JSON, so a reply's size is known before it is built. */
  bytes: number;
  /** SHA-256 of the rows' canonical JSON, one row per line. */
  digest: string;
  /** Fields that exact `where` filters may use. */
  filterable: string[];
}

export interface NewUnknown {
  question: string;
  scope: string;
}

export interface NewEvidence {
  record: Omit<EvidenceRecord, 'evidence_id' | 'collections' | 'document'>;
  /** The result without its collections, which are stored row by row. */
  document: Record<string, unknown>;
  collections: Record<string, unknown[]>;
  filterable?: Record<string, string[]>;
  /** What the tool left unresolved: one residual unknown each, with its own identity. */
  unknowns?: NewUnknown[];
}

export const UNKNOWN_STATUSES = ['open', 'resolved', 'refuted', 'superseded'] as const;
export type UnknownStatus = (typeof UNKNOWN_STATUSES)[number];

export interface UnknownRecord {
  unknown_id: string;
  question: string;
  scope: string;
  status: UnknownStatus;
  revision: number;
  investigation: string | null;
  evidence_ids: string[];
  settled_by: string[] | null;
  note: string | null;
  created_by: string;
  created_at: string;
  updated_at: string;
  /** Who made the current revision (null: before dossier kept it). */
  updated_by: string | null;
}

/** One revision of an unknown, as it was made. */
export interface UnknownRevision {
  revision: number;
  status: UnknownStatus;
  note: string | null;
  settled_by: string[] | null;
  evidence_ids: string[];
  changed_by: string;
  changed_at: string;
}

export interface PageRow {
  source_index: number;
  row: unknown;
}

/** Exact filters: a row matches when, for every field, one of the values equals the row's value (or an element of it). */
export type Where = Record<string, (string | number | boolean | null)[]>;

export interface Page<T> {
  items: T[];
  nextCursor: string | null;
  /** The cursor that continues right after items[i] (for a reply that keeps only the first i + 1). */
  cursorAfter?: (i: number) => string;
}

export interface ArtifactRecord {
  digest: string;
  size: number;
  mime_type: string;
  description: string;
  name: string | null;
  origin: string;
  registered_by: string;
  created_at: string;
  /** For an entry registered from an extraction: where it came from. */
  provenance: ArtifactProvenance | null;
}

export interface ArtifactProvenance {
  /** The artifact that was extracted. */
  parent_artifact: string | null;
  /** The extraction's Evidence, whose entries collection lists the entry. */
  evidence_id: string;
  /** The entry's path in that extraction's output (nested archives' entries under P.extracted/). */
  path: string;
}

/** A function of `artifact` matched to one of `base` by a diff. */
export interface FunctionLink {
  artifact: string;
  address: string;
  base: string;
  base_address: string;
  match_class: 'identical' | 'changed';
  similarity: number;
  confidence: number;
}
