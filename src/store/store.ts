// The store: one schema over SQLite (embedded) or PostgreSQL (cluster), as one
// small aggregate per kind of record, each with a narrow interface, so every
// part of dossier sees only what it needs (the launch service sees launches).
import { AnalysisStore } from './analyses.ts';
import { ArtifactStore } from './artifacts.ts';
import { DeviceStore } from './devices.ts';
import { CandidateStore } from './candidates.ts';
import { EvidenceStore } from './evidence.ts';
import { LaunchStore } from './launches.ts';
import { MIGRATIONS } from './migrations.ts';
import { AnnotationStore } from './annotations.ts';
import { FunctionIndexStore } from './functionIndex.ts';
import { now, type Row } from './rows.ts';
import { PostgresDriver, SqliteDriver, type SqlDriver } from './sql.ts';
import { TaskStore } from './tasks.ts';
import { TaskApprovalStore } from './taskApprovals.ts';
import { RateBucketStore, SessionStore } from './sessions.ts';
import { BlobStore } from './blobs.ts';
import { Finishes } from './finishes.ts';
import { RetainedStore } from './retained.ts';
import { TokenStore } from './tokens.ts';
import { UnknownStore } from './unknowns.ts';

export interface Store {
  readonly dialect: 'sqlite' | 'postgres';
  readonly tokens: TokenStore;
  readonly launches: LaunchStore;
  readonly evidence: EvidenceStore;
  readonly unknowns: UnknownStore;
  readonly artifacts: ArtifactStore;
  readonly analyses: AnalysisStore;
  readonly devices: DeviceStore;
  readonly candidates: CandidateStore;
  readonly tasks: TaskStore;
  /** Tasks waiting for a human's approval before their launch is claimed (the stateless era). */
  readonly taskApprovals: TaskApprovalStore;
  readonly sessions: SessionStore;
  readonly rateBuckets: RateBucketStore;
  /** Artifacts' bytes shared between hosts (PostgreSQL); undefined on SQLite. */
  readonly blobs: BlobStore | undefined;
  /** Disk finished launches keep on each host, by team. */
  readonly retained: RetainedStore;
  /** The team's annotations, with every revision (the log of who changed what). */
  readonly annotations: AnnotationStore;
  /** Function identities across the team's artifacts, and the links diffs made between builds. */
  readonly functions: FunctionIndexStore;
  close(): Promise<void>;
}

export function isPostgresUrl(location: string): boolean {
  return /^postgres(ql)?:\/\//.test(location);
}

/** Opens the configured store (a SQLite file path, or a postgres:// URL) and migrates its schema. */
export async function openStore(location: string): Promise<Store> {
  const db: SqlDriver = isPostgresUrl(location) ? new PostgresDriver(location) : new SqliteDriver(location);
  await migrate(db);
  // The ends of launches and analyses this process records, for the calls here waiting on them.
  const finishes = new Finishes();
  return {
    dialect: db.dialect,
    tokens: new TokenStore(db),
    launches: new LaunchStore(db, finishes),
    evidence: new EvidenceStore(db),
    unknowns: new UnknownStore(db),
    artifacts: new ArtifactStore(db),
    analyses: new AnalysisStore(db, finishes),
    devices: new DeviceStore(db),
    candidates: new CandidateStore(db),
    tasks: new TaskStore(db),
    taskApprovals: new TaskApprovalStore(db),
    sessions: new SessionStore(db),
    rateBuckets: new RateBucketStore(db),
    // Only a store that several hosts reach shares bytes; the embedded stack keeps its folder alone.
    blobs: db.dialect === 'postgres' ? new BlobStore(db) : undefined,
    retained: new RetainedStore(db),
    annotations: new AnnotationStore(db),
    functions: new FunctionIndexStore(db),
    close: () => db.close(),
  };
}

/**
 * Applies the versioned migrations not yet applied, in order, under the driver's cross-process lock;
 * those up to `upTo` only when given (the upgrade test builds a store as an older dossier left it).
 */
export async function migrate(db: SqlDriver, upTo = Number.POSITIVE_INFINITY) {
  await db.migrate(async (tx) => {
    await tx.exec(
      'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)',
    );
    const applied = new Set(
      (await tx.all<Row>('SELECT version FROM schema_migrations')).map((r) => Number(r.version)),
    );
    for (const m of MIGRATIONS) {
      if (applied.has(m.version) || m.version > upTo) continue;
      await tx.exec(m.sql);
      await m.after?.(tx);
      await tx.run('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)', [
        m.version,
        m.name,
        now(),
      ]);
    }
  });
}
