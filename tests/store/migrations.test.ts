// An older store, upgraded: a store made at some schema version and filled as
// dossier of that version filled it (its own SQL, each table's data written at
// the version that brought the table, so every later migration runs over
// data), then opened by today's code. Every record must read back whole and
// right, and the upgraded store must take new writes. On SQLite and PostgreSQL.
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { annotationId } from '../../src/domain/annotations.ts';
import { buildEvidence } from '../../src/domain/evidence.ts';
import { foldKey } from '../../src/domain/fold.ts';
import type { CandidateKind } from '../../src/store/candidates.ts';
import { MIGRATIONS } from '../../src/store/migrations.ts';
import { PostgresDriver, SqliteDriver, type SqlDriver } from '../../src/store/sql.ts';
import { isPostgresUrl, migrate, openStore, type Store } from '../../src/store/store.ts';
import { hashToken } from '../../src/store/tokens.ts';
import { BACKENDS, freshStoreLocation } from '../helpers/backends.ts';

const LATEST = MIGRATIONS.at(-1)!.version;
const T0 = '2025-01-02T03:04:05.000Z';
const T1 = '2025-01-02T03:05:00.000Z';
const TEAM = 'lab';
const TOKEN = 'a-token-made-by-an-older-dossier';
const REVOKED = 'a-revoked-token';
const ART_A = `sha256:${'a'.repeat(64)}`;
const ANN_OLD = annotationId({ artifact: ART_A, kind: 'function', item: '0x401000' });

const evidence = buildEvidence({
  record: {
    tool: 'capture_process_scenario',
    provider: { name: 'dossier-capture', version: '0.1.0' },
    parameters: { executable: '/usr/bin/echo', args: ['hi'] },
    parameters_digest: 'f'.repeat(64),
    target: { path: '/usr/bin/echo' },
    principal: 'alice',
    team: TEAM,
    investigation: 'inv-old',
    launch: { workflow_id: `launch/${TEAM}/alice/done-1`, run_id: 'run-done-1' },
    created_at: T1,
    summary: { exit_code: 0 },
    truncated: false,
    limitations: [],
  },
  document: { exit_code: 0, stdout_head: 'hi\n' },
  collections: {
    stdout: [
      { line: 1, text: 'hi' },
      { line: 2, text: 'there' },
      { line: 3, text: 'hi' },
    ],
  },
  filterable: { stdout: ['text'] },
});
const EV = evidence.record.evidence_id;

interface SeedLaunch {
  key: string;
  status: string;
  effect: string;
  runId: string | null;
  evidenceId: string | null;
  summary: Record<string, unknown> | null;
  error: Record<string, unknown> | null;
  finishedAt: string | null;
}
const LAUNCHES: SeedLaunch[] = [
  { key: 'pending-1', status: 'pending', effect: 'not_started', runId: null, evidenceId: null, summary: null, error: null, finishedAt: null }, // prettier-ignore
  { key: 'running-1', status: 'running', effect: 'started', runId: 'run-running-1', evidenceId: null, summary: null, error: null, finishedAt: null }, // prettier-ignore
  { key: 'done-1', status: 'succeeded', effect: 'started', runId: 'run-done-1', evidenceId: EV, summary: { exit_code: 0 }, error: null, finishedAt: T1 }, // prettier-ignore
  { key: 'failed-1', status: 'failed', effect: 'not_started', runId: 'run-failed-1', evidenceId: null, summary: null, error: { code: 'not_found', message: 'gone' }, finishedAt: T1 }, // prettier-ignore
];
const input = (key: string) => ({ executable: '/usr/bin/echo', args: [key], env: {}, detail: 'complete' });
const BLOB = Buffer.from('bytes an older dossier kept\n');
const BLOB_DIGEST = createHash('sha256').update(BLOB).digest('hex');

/** What dossier wrote at each schema version, with that version's SQL (tables it brought, or new rows). */
const SEEDS: Record<number, (db: SqlDriver) => Promise<void>> = {
  1: async (db) => {
    for (const [token, revoked] of [
      [TOKEN, null],
      [REVOKED, T1],
    ] as const)
      await db.run(
        'INSERT INTO tokens (token_hash, principal, team, role, label, created_at, revoked_at) VALUES (?, ?, ?, ?, ?, ?, ?)',
        [hashToken(token), 'alice', TEAM, 'operator', 'old', T0, revoked],
      );
    for (const l of LAUNCHES)
      await db.run(
        `INSERT INTO launches (team, principal, idempotency_key, tool, body_digest, input, workflow_id, run_id, status, effect,
           evidence_id, summary, error, progress, investigation, created_at, started_at, finished_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        [
          TEAM, 'alice', l.key, 'capture_process_scenario', `digest-${l.key}`, JSON.stringify(input(l.key)),
          `launch/${TEAM}/alice/${l.key}`, l.runId, l.status, l.effect, l.evidenceId,
          l.summary && JSON.stringify(l.summary), l.error && JSON.stringify(l.error),
          l.status === 'running' ? JSON.stringify({ phase: 'on_device' }) : null,
          'inv-old', T0, l.effect === 'started' ? T0 : null, l.finishedAt,
        ], // prettier-ignore
      );
    await db.run(
      `INSERT INTO evidence (team, evidence_id, principal, tool, investigation, workflow_id, created_at, record, document)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      [TEAM, EV, 'alice', evidence.record.tool, 'inv-old', evidence.record.launch!.workflow_id, T1, JSON.stringify(evidence.record), evidence.documentJson], // prettier-ignore
    );
    for (const r of evidence.rows)
      await db.run(
        'INSERT INTO evidence_rows (evidence_id, collection, source_index, row) VALUES (?, ?, ?, ?)',
        [EV, r.collection, r.sourceIndex, r.json],
      );
    for (const k of evidence.keys)
      await db.run(
        'INSERT INTO evidence_row_keys (evidence_id, collection, field, value, ordinal, source_index) VALUES (?, ?, ?, ?, ?, ?)',
        [EV, k.collection, k.field, k.value, k.ordinal, k.sourceIndex],
      );
    for (const c of evidence.counts)
      await db.run(
        'INSERT INTO evidence_key_counts (evidence_id, collection, field, value, rows) VALUES (?, ?, ?, ?, ?)',
        [EV, c.collection, c.field, c.value, c.rows],
      );
    // An open unknown at its first revision, and one settled at its second.
    await db.run(
      `INSERT INTO unknowns (team, unknown_id, question, scope, status, revision, investigation, evidence_ids, settled_by, note, created_by, created_at, updated_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?), (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      [
        TEAM, 'unk_open', 'Why does it say hi?', 'echo', 'open', 1, 'inv-old', JSON.stringify([EV]), null, null, 'alice', T0, T0,
        TEAM, 'unk_settled', 'Is it echo?', 'echo', 'resolved', 2, null, JSON.stringify([EV]), JSON.stringify([EV]), 'yes', 'alice', T0, T1,
      ], // prettier-ignore
    );
  },
  2: async (db) => {
    await db.run(
      `INSERT INTO artifacts (team, digest, size, mime_type, description, name, origin, registered_by, created_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      [TEAM, `sha256:${'a'.repeat(64)}`, 42, 'application/x-executable', 'ELF 64-bit', 'tool', 'path:/srv/tool', 'alice', T0], // prettier-ignore
    );
  },
  3: async (db) => {
    await db.run(
      `INSERT INTO analyses (team, analysis_key, kind, tool, input, database_key, workflow_id, run_id, status, evidence_id, result, error, progress, runs, requested_by, created_at, started_at, finished_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      [TEAM, 'db:old', 'database', 'analysis_database', JSON.stringify({ artifact: `sha256:${'a'.repeat(64)}`, profile: 'default' }), null, `analysis-db/${TEAM}/${'a'.repeat(64)}/default-angr`, 'run-db', 'succeeded', null, JSON.stringify({ digest: 'd'.repeat(64) }), null, null, 1, 'alice', T0, T0, T1], // prettier-ignore
    );
  },
  4: async (db) => {
    await db.run(
      `INSERT INTO devices (team, device_id, kind, description, config, config_digest, credential, status, registered_by, created_at, retired_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?), (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      [
        TEAM, 'board-1', 'ssh', 'the bench board', JSON.stringify({ host: '10.0.0.2', port: 22 }), 'cd1', 'sealed-credential', 'active', 'alice', T0, null,
        TEAM, 'board-0', 'adb', null, JSON.stringify({ serial: 'X1' }), 'cd0', null, 'retired', 'alice', T0, T1,
      ], // prettier-ignore
    );
    await db.run(
      `INSERT INTO device_turns (turn_id, team, device_id, launch, arrived_at, state, fencing, alive_until) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
      ['turn-old', TEAM, 'board-1', `launch/${TEAM}/alice/running-1`, T0, 'done', 1, T1],
    );
  },
  5: async (db) => {
    // Written with its history and its completion candidate, as dossier has since this version.
    await db.run(
      `INSERT INTO unknowns (team, unknown_id, question, scope, status, revision, investigation, evidence_ids, created_by, created_at, updated_at, updated_by)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      [TEAM, 'unk_v5', 'Asked at version 5?', 'here', 'open', 1, null, '[]', 'bob', T1, T1, 'bob'],
    );
    await db.run(
      `INSERT INTO unknown_revisions (team, unknown_id, revision, status, note, settled_by, evidence_ids, changed_by, changed_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      [TEAM, 'unk_v5', 1, 'open', null, null, '[]', 'bob', T1],
    );
    await db.run(
      'INSERT INTO completion_candidates (team, kind, scope, value, fkey, created_at) VALUES (?, ?, ?, ?, ?, ?)',
      [TEAM, 'open_unknown', '', 'unk_v5', foldKey('unk_v5'), T1],
    );
  },
  6: async (db) => {
    await db.run(
      `INSERT INTO tasks (task_id, team, principal, workflow_id, tool, idempotency_key, ttl_ms, poll_interval_ms, created_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      [
        'tsk_old',
        TEAM,
        'alice',
        `launch/${TEAM}/alice/done-1`,
        'capture_process_scenario',
        'done-1',
        null,
        1000,
        T1,
      ],
    );
  },
  7: async (db) => {
    const digest = `sha256:${'b'.repeat(64)}`;
    await db.run(
      `INSERT INTO artifacts (team, digest, size, mime_type, description, name, origin, registered_by, created_at, parent_artifact, parent_evidence, parent_path)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      [TEAM, digest, 7, 'text/plain', 'ASCII text', null, `extracted:${EV}:etc/passwd`, 'alice', T1, `sha256:${'a'.repeat(64)}`, EV, 'etc/passwd'], // prettier-ignore
    );
    await db.run(
      'INSERT INTO completion_candidates (team, kind, scope, value, fkey, created_at) VALUES (?, ?, ?, ?, ?, ?)',
      [TEAM, 'artifact', '', digest, foldKey(digest), T1],
    );
  },
  8: async (db) => {
    await db.run(
      'INSERT INTO mcp_sessions (id, team, principal, init, created_at, last_seen_at) VALUES (?, ?, ?, ?, ?, ?)',
      ['session-old', TEAM, 'alice', '{"protocolVersion":"2025-06-18"}', 1000, 2000],
    );
    await db.run('INSERT INTO rate_buckets (key, tokens, at_ms) VALUES (?, ?, ?)', [
      `${TEAM}/alice`,
      7.5,
      2000,
    ]);
  },
  9: async (db) => {
    await db.run('INSERT INTO blob_chunks (digest, seq, data) VALUES (?, ?, ?)', [BLOB_DIGEST, 0, BLOB]);
    await db.run('INSERT INTO blobs (digest, size, chunks, created_at) VALUES (?, ?, ?, ?)', [
      BLOB_DIGEST,
      BLOB.length,
      1,
      T1,
    ]);
    await db.run('INSERT INTO blob_owners (digest, team, bytes) VALUES (?, ?, ?)', [
      BLOB_DIGEST,
      TEAM,
      BLOB.length,
    ]);
  },
  10: async (db) => {
    await db.run(
      'INSERT INTO blob_names (team, kind, name, digest, bytes, created_at) VALUES (?, ?, ?, ?, ?, ?)',
      [TEAM, 'bundle', 'old.bundle.json', BLOB_DIGEST, BLOB.length, T1],
    );
  },
  14: async (db) => {
    const revision = [
      TEAM,
      ANN_OLD,
      1,
      `${ANN_OLD}@1`,
      ART_A,
      'function',
      '0x401000',
      'parse',
      null,
      null,
      '["licence"]',
      null,
      null,
    ];
    await db.run(
      `INSERT INTO annotations (team, annotation_id, artifact, kind, item, revision, name, comment, type, tags, note,
         variables, created_by, created_at, updated_by, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      [...revision.slice(0, 2), ...revision.slice(4, 7), 1, ...revision.slice(7), 'alice', T1, 'alice', T1],
    );
    await db.run(
      `INSERT INTO annotation_revisions (team, annotation_id, revision, event_id, artifact, kind, item, name, comment,
         type, tags, note, variables, changed, origin, reverted_to, source, created_by, created_at, imported_by,
         imported_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      [...revision, '["name","tags"]', 'write', null, null, 'alice', T1, null, null],
    );
  },
};

/** A store at schema `version`, filled as each version up to it filled it. */
async function olderStore(location: string, version: number) {
  const db = isPostgresUrl(location) ? new PostgresDriver(location) : new SqliteDriver(location);
  try {
    for (let v = 1; v <= version; v++) {
      await migrate(db, v);
      await SEEDS[v]?.(db);
    }
  } finally {
    await db.close();
  }
}

/** Every record seeded up to `version`, read through today's store. */
async function expectAllRecords(store: Store, version: number) {
  // Tokens resolve by their hash; the revoked one still does not.
  expect(await store.tokens.resolve(TOKEN)).toEqual({ principal: 'alice', team: TEAM, role: 'operator' });
  expect(await store.tokens.resolve(REVOKED)).toBeUndefined();
  // Launches, whatever state they were left in.
  for (const l of LAUNCHES) {
    expect(await store.launches.get(TEAM, 'alice', l.key)).toEqual({
      team: TEAM,
      principal: 'alice',
      key: l.key,
      tool: 'capture_process_scenario',
      bodyDigest: `digest-${l.key}`,
      input: input(l.key),
      workflowId: `launch/${TEAM}/alice/${l.key}`,
      runId: l.runId,
      status: l.status,
      effect: l.effect,
      evidenceId: l.evidenceId,
      summary: l.summary,
      error: l.error,
      progress: l.status === 'running' ? { phase: 'on_device' } : null,
      investigation: 'inv-old',
      createdAt: T0,
      startedAt: l.effect === 'started' ? T0 : null,
      finishedAt: l.finishedAt,
    });
  }
  const listed = await store.launches.list(TEAM, { status: 'running', limit: 10 });
  expect(listed.items.map((l) => l.key).sort()).toEqual(['pending-1', 'running-1']);
  expect((await store.launches.unstarted(new Date().toISOString(), 10)).map((l) => l.key)).toEqual([
    'pending-1',
  ]);
  // Evidence: the record, the document, every row, and a filtered page by its keys and counts.
  expect(await store.evidence.get(TEAM, EV)).toEqual(evidence.record);
  expect(await store.evidence.document(TEAM, EV)).toEqual(JSON.parse(evidence.documentJson));
  expect(await store.evidence.allRows(EV, 'stdout')).toEqual(evidence.rows.map((r) => JSON.parse(r.json)));
  const page = await store.evidence.page({
    evidenceId: EV,
    collection: 'stdout',
    total: 3,
    where: { text: ['hi'] },
    offset: 0,
    limit: 10,
  });
  expect(page).toEqual({
    rows: [
      { source_index: 0, row: { line: 1, text: 'hi' } },
      { source_index: 2, row: { line: 3, text: 'hi' } },
    ],
    matched: 2,
  });
  // Unknowns, with who last changed them and a history begun by the migration.
  expect(await store.unknowns.get(TEAM, 'unk_open')).toMatchObject({
    status: 'open',
    revision: 1,
    evidence_ids: [EV],
    created_by: 'alice',
    updated_by: 'alice',
  });
  expect(await store.unknowns.get(TEAM, 'unk_settled')).toMatchObject({
    status: 'resolved',
    revision: 2,
    settled_by: [EV],
    note: 'yes',
    updated_at: T1,
    updated_by: null,
  });
  expect(await store.unknowns.history(TEAM, 'unk_settled', { limit: 10 })).toEqual([
    {
      revision: 2,
      status: 'resolved',
      note: 'yes',
      settled_by: [EV],
      evidence_ids: [EV],
      changed_by: '(not recorded: before history was kept)',
      changed_at: T1,
    },
  ]);
  // Completion finds what was kept before candidates were (only the open unknowns, the active devices).
  const candidates = (kind: CandidateKind, principal = 'alice') =>
    store.candidates.candidates(TEAM, principal, kind, '', 100);
  expect(await candidates('launch_key')).toEqual(['done-1', 'failed-1', 'pending-1', 'running-1']);
  expect(await candidates('launch_key', 'bob')).toEqual([]);
  expect(await candidates('evidence')).toEqual([EV]);
  expect(await candidates('investigation')).toEqual(['inv-old']);
  expect(await candidates('open_unknown')).toEqual(['unk_open', ...(version >= 5 ? ['unk_v5'] : [])]);
  if (version < 2) return;

  expect(await candidates('artifact')).toEqual([
    `sha256:${'a'.repeat(64)}`,
    ...(version >= 7 ? [`sha256:${'b'.repeat(64)}`] : []),
  ]);
  const tool = await store.artifacts.get(TEAM, `sha256:${'a'.repeat(64)}`);
  expect(tool).toMatchObject({ size: 42, name: 'tool', origin: 'path:/srv/tool', provenance: null });
  if (version < 3) return;
  expect(await store.analyses.get(TEAM, 'db:old')).toMatchObject({
    kind: 'database',
    status: 'succeeded',
    result: { digest: 'd'.repeat(64) },
    runs: 1,
    requestedBy: 'alice',
    finishedAt: T1,
  });
  if (version < 4) return;
  expect(await store.devices.get(TEAM, 'board-1')).toMatchObject({
    kind: 'ssh',
    status: 'active',
    config: { host: '10.0.0.2', port: 22 },
  });
  expect(await store.devices.credential(TEAM, 'board-1')).toBe('sealed-credential');
  expect((await store.devices.list(TEAM, { includeRetired: true, limit: 10 })).items).toHaveLength(2);
  expect(await candidates('device')).toEqual(['board-1']);
  // The line on the device goes on from the old turn's fencing number.
  await store.devices.arrive('turn-new', TEAM, 'board-1', `launch/${TEAM}/alice/new`, 10_000);
  expect(await store.devices.take('turn-new', TEAM, 'board-1', 10_000)).toBe(2);
  if (version < 5) return;
  expect(await store.unknowns.history(TEAM, 'unk_v5', { limit: 10 })).toMatchObject([
    { revision: 1, changed_by: 'bob' },
  ]);
  if (version < 6) return;
  expect(await store.tasks.get(TEAM, 'alice', 'tsk_old')).toMatchObject({
    workflow_id: `launch/${TEAM}/alice/done-1`,
    ttl_ms: null,
    poll_interval_ms: 1000,
  });
  if (version < 7) return;
  expect((await store.artifacts.get(TEAM, `sha256:${'b'.repeat(64)}`))!.provenance).toEqual({
    parent_artifact: `sha256:${'a'.repeat(64)}`,
    evidence_id: EV,
    path: 'etc/passwd',
  });
  if (version < 8) return;
  expect(await store.sessions.get('session-old', { team: TEAM, principal: 'alice' }, 0)).toMatchObject({
    init: '{"protocolVersion":"2025-06-18"}',
    created_at: 1000,
    last_seen_at: 2000,
  });
  // 7.5 tokens left at 2000 ms: 7 are granted at once.
  expect(await store.rateBuckets.take(`${TEAM}/alice`, 100, 60, 2000)).toMatchObject({ granted: 7 });
  if (version >= 14) {
    // An annotation of that version reads back with its history, and takes the next revision.
    const key = { artifact: ART_A, kind: 'function' as const, item: '0x401000' };
    expect(await store.annotations.get(TEAM, key)).toMatchObject({
      revision: 1,
      name: 'parse',
      tags: ['licence'],
    });
    expect(await store.annotations.history(TEAM, ANN_OLD, { limit: 10 })).toMatchObject([
      { revision: 1, changed: ['name', 'tags'], changed_by: 'alice', imported: null },
    ]);
  }
  if (version < 9 || !store.blobs) return;
  expect(await store.blobs.ownedBy(BLOB_DIGEST, TEAM)).toBe(true);
  const copy = path.join(mkdtempSync(path.join(os.tmpdir(), 'dossier-blob-')), 'blob');
  expect(await store.blobs.copyTo(BLOB_DIGEST, copy)).toBe(BLOB_DIGEST);
  expect(readFileSync(copy)).toEqual(BLOB);
  if (version < 10) return;
  expect(await store.blobs.lookup(TEAM, 'bundle', 'old.bundle.json')).toMatchObject({ digest: BLOB_DIGEST });
}

describe.each(BACKENDS)('a store upgraded on %s', (backend) => {
  it.each(MIGRATIONS.map((m) => m.version))(
    'made at schema version %i with data, opened by today’s code: every migration applies, every record reads back right, new writes work',
    async (version) => {
      const { location, cleanup } = await freshStoreLocation(backend);
      try {
        await olderStore(location, version);
        const store = await openStore(location);
        try {
          await expectAllRecords(store, version);
          // The upgraded store takes new records beside the old ones.
          const claimed = await store.launches.claim({
            team: TEAM,
            principal: 'alice',
            key: 'after-upgrade',
            tool: 'capture_process_scenario',
            bodyDigest: 'digest-after',
            input: input('after-upgrade'),
            workflowId: `launch/${TEAM}/alice/after-upgrade`,
            investigation: null,
          });
          expect(claimed.created).toBe(true);
          const updated = await store.unknowns.update(TEAM, 'unk_open', 1, { status: 'resolved' }, 'bob');
          expect(updated).toMatchObject({ applied: true, unknown: { revision: 2, updated_by: 'bob' } });
          expect(
            (await store.unknowns.history(TEAM, 'unk_open', { limit: 10 })).map((r) => r.revision),
          ).toEqual([2, 1]);
        } finally {
          await store.close();
        }
        // Opening it again changes nothing: every version is recorded once.
        const again = await openStore(location);
        await again.close();
        const db = isPostgresUrl(location) ? new PostgresDriver(location) : new SqliteDriver(location);
        const versions = await db.all<{ version: number }>(
          'SELECT version FROM schema_migrations ORDER BY version',
        );
        await db.close();
        expect(versions.map((v) => Number(v.version))).toEqual(MIGRATIONS.map((m) => m.version));
        expect(versions).toHaveLength(LATEST);
      } finally {
        cleanup();
      }
    },
  );
});
