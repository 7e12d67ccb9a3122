// Versioned schema. Each step runs once, in order, inside a transaction; the
// applied versions are kept in schema_migrations. Written in the SQL subset
// that SQLite and PostgreSQL share.
import { foldKey } from '../domain/fold.ts';
import { insertMany, type Row } from './rows.ts';
import type { Migration } from './migration.ts';
import { KNOWLEDGE_MIGRATIONS } from './migrationsKnowledge.ts';

export type { Migration };

export const MIGRATIONS: Migration[] = [
  {
    version: 1,
    name: 'tokens, launches, evidence with collection rows and filter keys, residual unknowns',
    sql: `
CREATE TABLE tokens (
  token_hash TEXT PRIMARY KEY,
  principal TEXT NOT NULL,
  team TEXT NOT NULL,
  role TEXT NOT NULL,
  label TEXT,
  created_at TEXT NOT NULL,
  revoked_at TEXT
);
CREATE TABLE launches (
  team TEXT NOT NULL,
  principal TEXT NOT NULL,
  idempotency_key TEXT NOT NULL,
  tool TEXT NOT NULL,
  body_digest TEXT NOT NULL,
  input TEXT NOT NULL,
  workflow_id TEXT NOT NULL UNIQUE,
  run_id TEXT,
  status TEXT NOT NULL,
  effect TEXT NOT NULL,
  evidence_id TEXT,
  summary TEXT,
  error TEXT,
  progress TEXT,
  investigation TEXT,
  created_at TEXT NOT NULL,
  started_at TEXT,
  finished_at TEXT,
  PRIMARY KEY (team, principal, idempotency_key)
);
CREATE INDEX launches_by_team ON launches (team, created_at, workflow_id);
CREATE TABLE evidence_rows (
  evidence_id TEXT NOT NULL,
  collection TEXT NOT NULL,
  source_index INTEGER NOT NULL,
  row TEXT NOT NULL,
  PRIMARY KEY (evidence_id, collection, source_index)
);
CREATE TABLE evidence (
  team TEXT NOT NULL,
  evidence_id TEXT NOT NULL,
  principal TEXT NOT NULL,
  tool TEXT NOT NULL,
  investigation TEXT,
  workflow_id TEXT,
  created_at TEXT NOT NULL,
  record TEXT NOT NULL,
  document TEXT NOT NULL,
  PRIMARY KEY (team, evidence_id)
);
CREATE INDEX evidence_by_team ON evidence (team, created_at, evidence_id);
CREATE TABLE evidence_row_keys (
  evidence_id TEXT NOT NULL,
  collection TEXT NOT NULL,
  field TEXT NOT NULL,
  value TEXT NOT NULL,
  ordinal INTEGER NOT NULL,
  source_index INTEGER NOT NULL,
  PRIMARY KEY (evidence_id, collection, field, value, ordinal)
);
CREATE TABLE evidence_key_counts (
  evidence_id TEXT NOT NULL,
  collection TEXT NOT NULL,
  field TEXT NOT NULL,
  value TEXT NOT NULL,
  rows INTEGER NOT NULL,
  PRIMARY KEY (evidence_id, collection, field, value)
);
CREATE TABLE unknowns (
  team TEXT NOT NULL,
  unknown_id TEXT NOT NULL,
  question TEXT NOT NULL,
  scope TEXT NOT NULL,
  status TEXT NOT NULL,
  revision INTEGER NOT NULL,
  investigation TEXT,
  evidence_ids TEXT NOT NULL,
  settled_by TEXT,
  note TEXT,
  created_by TEXT NOT NULL,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  PRIMARY KEY (team, unknown_id)
);
CREATE INDEX unknowns_by_status ON unknowns (team, status, created_at, unknown_id);
`,
  },
  {
    version: 2,
    name: 'artifacts by digest',
    sql: `
CREATE TABLE artifacts (
  team TEXT NOT NULL,
  digest TEXT NOT NULL,
  size INTEGER NOT NULL,
  mime_type TEXT NOT NULL,
  description TEXT NOT NULL,
  name TEXT,
  origin TEXT NOT NULL,
  registered_by TEXT NOT NULL,
  created_at TEXT NOT NULL,
  PRIMARY KEY (team, digest)
);
CREATE INDEX artifacts_by_team ON artifacts (team, created_at, digest);
`,
  },
  {
    version: 3,
    name: 'analyses: shared analysis databases and the queries answered from them',
    sql: `
CREATE TABLE analyses (
  team TEXT NOT NULL,
  analysis_key TEXT NOT NULL,
  kind TEXT NOT NULL,
  tool TEXT NOT NULL,
  input TEXT NOT NULL,
  database_key TEXT,
  workflow_id TEXT NOT NULL UNIQUE,
  run_id TEXT,
  status TEXT NOT NULL,
  evidence_id TEXT,
  result TEXT,
  error TEXT,
  progress TEXT,
  runs INTEGER NOT NULL DEFAULT 0,
  requested_by TEXT NOT NULL,
  created_at TEXT NOT NULL,
  started_at TEXT,
  finished_at TEXT,
  PRIMARY KEY (team, analysis_key)
);
CREATE INDEX analyses_by_team ON analyses (team, kind, created_at);
`,
  },
  {
    version: 4,
    name: 'devices: the team bench, and turns that serialize operations on a device',
    sql: `
CREATE TABLE devices (
  team TEXT NOT NULL,
  device_id TEXT NOT NULL,
  kind TEXT NOT NULL,
  description TEXT,
  config TEXT NOT NULL,
  config_digest TEXT NOT NULL,
  credential TEXT,
  status TEXT NOT NULL,
  registered_by TEXT NOT NULL,
  created_at TEXT NOT NULL,
  retired_at TEXT,
  PRIMARY KEY (team, device_id)
);
CREATE INDEX devices_by_team ON devices (team, created_at, device_id);
CREATE TABLE device_turns (
  turn_id TEXT PRIMARY KEY,
  team TEXT NOT NULL,
  device_id TEXT NOT NULL,
  launch TEXT NOT NULL,
  arrived_at TEXT NOT NULL,
  state TEXT NOT NULL,
  fencing INTEGER,
  alive_until TEXT NOT NULL
);
CREATE INDEX device_turns_by_device ON device_turns (team, device_id, state, arrived_at);
`,
  },
  {
    version: 5,
    name: 'staged retention, the history of unknowns, completion candidates by prefix',
    sql: `
CREATE TABLE evidence_staging (
  evidence_id TEXT PRIMARY KEY,
  started_at TEXT NOT NULL
);
ALTER TABLE unknowns ADD COLUMN updated_by TEXT;
UPDATE unknowns SET updated_by = CASE WHEN revision = 1 THEN created_by ELSE NULL END;
CREATE TABLE unknown_revisions (
  team TEXT NOT NULL,
  unknown_id TEXT NOT NULL,
  revision INTEGER NOT NULL,
  status TEXT NOT NULL,
  note TEXT,
  settled_by TEXT,
  evidence_ids TEXT NOT NULL,
  changed_by TEXT NOT NULL,
  changed_at TEXT NOT NULL,
  PRIMARY KEY (team, unknown_id, revision)
);
INSERT INTO unknown_revisions (team, unknown_id, revision, status, note, settled_by, evidence_ids, changed_by, changed_at)
  SELECT team, unknown_id, revision, status, note, settled_by, evidence_ids,
         CASE WHEN revision = 1 THEN created_by ELSE '(not recorded: before history was kept)' END, updated_at
  FROM unknowns;
CREATE TABLE completion_candidates (
  team TEXT NOT NULL,
  kind TEXT NOT NULL,
  scope TEXT NOT NULL,
  value TEXT NOT NULL,
  fkey TEXT NOT NULL,
  created_at TEXT NOT NULL,
  PRIMARY KEY (team, kind, scope, value)
);
CREATE INDEX completion_by_prefix ON completion_candidates (team, kind, scope, fkey);
CREATE INDEX launches_by_status ON launches (status, created_at);
`,
    // Completion's candidates of the records kept so far (the fold key is computed here, not in SQL).
    async after(tx) {
      const sources = [
        "SELECT team, 'artifact' AS kind, '' AS scope, digest AS value, created_at FROM artifacts",
        "SELECT team, 'evidence' AS kind, '' AS scope, evidence_id AS value, created_at FROM evidence",
        "SELECT team, 'launch_key' AS kind, principal AS scope, idempotency_key AS value, created_at FROM launches",
        "SELECT team, 'open_unknown' AS kind, '' AS scope, unknown_id AS value, created_at FROM unknowns",
        "SELECT team, 'device' AS kind, '' AS scope, device_id AS value, created_at FROM devices",
        ...['evidence', 'launches', 'unknowns'].map(
          (t) =>
            `SELECT team, 'investigation' AS kind, '' AS scope, investigation AS value, created_at FROM ${t} WHERE investigation IS NOT NULL`,
        ),
      ];
      for (const sql of sources) {
        const rows = await tx.all<Row>(sql);
        await insertMany(
          tx,
          'INSERT INTO completion_candidates (team, kind, scope, value, fkey, created_at)',
          6,
          rows.map((r) => [r.team, r.kind, r.scope, r.value, foldKey(String(r.value)), r.created_at]),
          2_000,
          'ON CONFLICT DO NOTHING',
        );
      }
    },
  },
  {
    version: 6,
    name: 'MCP tasks: a task per launch, scoped to the principal who asked for it',
    sql: `
CREATE TABLE tasks (
  task_id TEXT PRIMARY KEY,
  team TEXT NOT NULL,
  principal TEXT NOT NULL,
  workflow_id TEXT NOT NULL UNIQUE,
  tool TEXT NOT NULL,
  idempotency_key TEXT NOT NULL,
  ttl_ms INTEGER,
  poll_interval_ms INTEGER NOT NULL,
  created_at TEXT NOT NULL
);
CREATE INDEX tasks_by_principal ON tasks (team, principal, created_at, task_id);
`,
  },
  {
    version: 7,
    name: 'Artifacts registered from an extraction keep where they came from',
    sql: `
ALTER TABLE artifacts ADD COLUMN parent_artifact TEXT;
ALTER TABLE artifacts ADD COLUMN parent_evidence TEXT;
ALTER TABLE artifacts ADD COLUMN parent_path TEXT;
`,
  },
  {
    version: 8,
    name: 'MCP sessions and rate buckets shared by gateway replicas',
    sql: `
CREATE TABLE mcp_sessions (
  id TEXT PRIMARY KEY,
  team TEXT NOT NULL,
  principal TEXT NOT NULL,
  init TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  last_seen_at BIGINT NOT NULL
);
CREATE INDEX mcp_sessions_by_owner ON mcp_sessions (team, principal, last_seen_at);
CREATE TABLE rate_buckets (
  key TEXT PRIMARY KEY,
  tokens DOUBLE PRECISION NOT NULL,
  at_ms BIGINT NOT NULL
);
`,
  },
  {
    version: 9,
    name: 'Content-addressed blobs, so hosts share artifacts without a shared folder',
    sql: `
CREATE TABLE blob_chunks (
  digest TEXT NOT NULL,
  seq INTEGER NOT NULL,
  data BYTEA NOT NULL,
  PRIMARY KEY (digest, seq)
);
CREATE TABLE blobs (
  digest TEXT PRIMARY KEY,
  size BIGINT NOT NULL,
  chunks INTEGER NOT NULL,
  created_at TEXT NOT NULL
);
CREATE TABLE blob_owners (
  digest TEXT NOT NULL,
  team TEXT NOT NULL,
  bytes BIGINT NOT NULL,
  PRIMARY KEY (digest, team)
);
CREATE INDEX blob_owners_by_team ON blob_owners (team);
`,
  },
  {
    version: 10,
    name: 'Named blobs of a team (exported bundles), so any gateway lists and serves them',
    sql: `
CREATE TABLE blob_names (
  team TEXT NOT NULL,
  kind TEXT NOT NULL,
  name TEXT NOT NULL,
  digest TEXT NOT NULL,
  bytes BIGINT NOT NULL,
  created_at TEXT NOT NULL,
  PRIMARY KEY (team, kind, name)
);
`,
  },
  {
    version: 11,
    name: 'Disk finished launches keep on each host, by team, so a team bound reclaims the oldest first',
    sql: `
CREATE TABLE retained_disk (
  home TEXT NOT NULL,
  path TEXT NOT NULL,
  team TEXT NOT NULL,
  kind TEXT NOT NULL,
  launch TEXT NOT NULL,
  bytes BIGINT NOT NULL,
  retained_at TEXT NOT NULL,
  reclaimed_at TEXT,
  PRIMARY KEY (home, path)
);
CREATE INDEX retained_disk_held ON retained_disk (home, team, retained_at, path, bytes) WHERE reclaimed_at IS NULL;
CREATE INDEX retained_disk_by_path ON retained_disk (team, path);
`,
  },
  {
    version: 12,
    name: 'Tasks that wait for a human to approve their launch (the stateless era), before any key is claimed',
    sql: `
CREATE TABLE task_approvals (
  task_id TEXT PRIMARY KEY,
  team TEXT NOT NULL,
  principal TEXT NOT NULL,
  tool TEXT NOT NULL,
  idempotency_key TEXT NOT NULL,
  body_digest TEXT NOT NULL,
  arguments TEXT NOT NULL,
  plan TEXT NOT NULL,
  answer TEXT,
  reply TEXT,
  ttl_ms INTEGER,
  poll_interval_ms INTEGER NOT NULL,
  created_at TEXT NOT NULL,
  answered_at TEXT
);
CREATE UNIQUE INDEX task_approvals_by_call ON task_approvals (team, principal, idempotency_key, body_digest);
`,
  },
  {
    version: 13,
    name: 'Toolsets a token lists by default, and those an MCP session lists (it may enable more)',
    sql: `
ALTER TABLE tokens ADD COLUMN toolsets TEXT;
ALTER TABLE mcp_sessions ADD COLUMN toolsets TEXT;
`,
  },
  // The team's shared knowledge (annotations, function identities, links between builds).
  ...KNOWLEDGE_MIGRATIONS,
];
