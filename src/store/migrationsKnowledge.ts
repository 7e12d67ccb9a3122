// The team's shared knowledge of its binaries: annotations with their
// revisions (which are also the team's log of who changed what, and when),
// the identities of the functions of every analysed artifact, and the links a
// diff made between the functions of two builds. Versions from 14 on, listed
// after those of migrations.ts (15, a launch's cancel request, too).
import type { Migration } from './migration.ts';

export const KNOWLEDGE_MIGRATIONS: Migration[] = [
  {
    version: 14,
    name: 'Annotations with revisions, function identities across artifacts, links between builds',
    sql: `
CREATE TABLE annotations (
  team TEXT NOT NULL,
  annotation_id TEXT NOT NULL,
  artifact TEXT NOT NULL,
  kind TEXT NOT NULL,
  item TEXT NOT NULL,
  revision INTEGER NOT NULL,
  name TEXT,
  comment TEXT,
  type TEXT,
  tags TEXT NOT NULL,
  note TEXT,
  variables TEXT,
  created_by TEXT NOT NULL,
  created_at TEXT NOT NULL,
  updated_by TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  PRIMARY KEY (team, annotation_id)
);
CREATE UNIQUE INDEX annotations_by_item ON annotations (team, artifact, kind, item);
CREATE INDEX annotations_by_name ON annotations (team, artifact, name);
CREATE INDEX annotations_by_time ON annotations (team, artifact, created_at, annotation_id);
CREATE TABLE annotation_revisions (
  team TEXT NOT NULL,
  annotation_id TEXT NOT NULL,
  revision INTEGER NOT NULL,
  event_id TEXT NOT NULL,
  artifact TEXT NOT NULL,
  kind TEXT NOT NULL,
  item TEXT NOT NULL,
  name TEXT,
  comment TEXT,
  type TEXT,
  tags TEXT NOT NULL,
  note TEXT,
  variables TEXT,
  changed TEXT NOT NULL,
  origin TEXT NOT NULL,
  reverted_to INTEGER,
  source TEXT,
  created_by TEXT NOT NULL,
  created_at TEXT NOT NULL,
  imported_by TEXT,
  imported_at TEXT,
  PRIMARY KEY (team, annotation_id, revision)
);
CREATE UNIQUE INDEX annotation_events ON annotation_revisions (team, created_at, event_id);
CREATE INDEX annotation_events_by_artifact ON annotation_revisions (team, artifact, created_at, event_id);
CREATE TABLE function_identities (
  team TEXT NOT NULL,
  artifact TEXT NOT NULL,
  profile TEXT NOT NULL,
  address TEXT NOT NULL,
  identity TEXT NOT NULL,
  neighbourhood TEXT,
  name TEXT NOT NULL,
  PRIMARY KEY (team, artifact, profile, address)
);
CREATE INDEX function_identities_by_identity ON function_identities (team, identity);
CREATE TABLE function_links (
  team TEXT NOT NULL,
  artifact TEXT NOT NULL,
  address TEXT NOT NULL,
  base TEXT NOT NULL,
  base_address TEXT NOT NULL,
  match_class TEXT NOT NULL,
  similarity DOUBLE PRECISION NOT NULL,
  confidence DOUBLE PRECISION NOT NULL,
  created_at TEXT NOT NULL,
  PRIMARY KEY (team, artifact, address, base)
);
CREATE INDEX function_links_by_base ON function_links (team, base, base_address);
`,
  },
  {
    version: 15,
    name: 'A cancel asked of a launch, which a local effect (no heartbeat) reads from here',
    sql: `
ALTER TABLE launches ADD COLUMN cancel_requested_at TEXT;
`,
  },
];
