// The Evidence ledger end to end over MCP, on a stack whose store is
// PostgreSQL (the other e2e files use the SQLite default).
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshStoreLocation } from '../helpers/backends.ts';
import { call, type Reply } from '../helpers/mcp.ts';
import { startTestStack, type TestStack } from '../helpers/stack.ts';
import { scratchDir } from '../helpers/scratch.ts';

const inbox = scratchDir('bundles');
let t: TestStack;
let client: Client;
beforeAll(async () => {
  const { location } = await freshStoreLocation('postgres');
  t = await startTestStack({ env: { DOSSIER_STORE: location, DOSSIER_BUNDLE_ROOTS: inbox } });
  client = await t.connect();
});
afterAll(async () => {
  await t?.stop(true);
});

async function follow(evidenceId: string, view: Reply) {
  const rows: Reply[] = [];
  for (let v = view; ;) {
    const page = await call(client, 'inspect_analysis_view', { evidence_id: evidenceId, view: v });
    expect(page._isError).toBe(false);
    rows.push(...page.rows);
    if (page.coverage.exhausted) return rows;
    v = { ...v, offset: page.coverage.next_offset };
  }
}

describe('producing tools deliver within the reply budget', () => {
  it('a small result comes complete; an oversized one comes as summary + a continuation that reaches every row', async () => {
    const small = await call(client, 'capture_process_scenario', {
      executable: '/usr/bin/seq',
      args: ['3'],
      idempotency_key: 'seq-3',
    });
    expect(small.detail).toBe('complete');
    expect(small.result.collections.stdout.map((r: Reply) => r.text)).toEqual(['1', '2', '3']);
    expect(small).toMatchObject({ truncated: false, limitations: expect.any(Array) });
    // What was capped says so in the complete reply too, not only in its summary.
    const capped = await call(client, 'capture_process_scenario', {
      executable: '/usr/bin/seq',
      args: ['100'],
      max_output_bytes: 16,
      idempotency_key: 'seq-capped',
    });
    expect(capped).toMatchObject({ detail: 'complete', truncated: true });
    expect(capped.limitations.join(' ')).toMatch(/stdout was capped at 16 bytes/);

    const big = await call(client, 'capture_process_scenario', {
      executable: '/usr/bin/seq',
      args: ['5000'],
      idempotency_key: 'seq-5000',
    });
    expect(big.status).toBe('succeeded');
    expect(big.detail).toBe('summary');
    expect(big.result).toBeUndefined();
    expect(big.continuation).toMatchObject({ kind: 'page', collection: 'stdout', offset: 0 });
    expect(Buffer.byteLength(JSON.stringify(big))).toBeLessThanOrEqual(40_000);
    const rows = await follow(big.evidence_id, big.continuation);
    expect(rows.map((r) => r.row.text)).toEqual(Array.from({ length: 5000 }, (_, i) => String(i + 1)));
    expect(rows.map((r) => r.source_index)).toEqual([...Array(5000).keys()]);

    const summaryOnly = await call(client, 'capture_process_scenario', {
      executable: '/usr/bin/seq',
      args: ['3'],
      detail: 'summary',
      idempotency_key: 'seq-3-summary',
    });
    expect(summaryOnly.detail).toBe('summary');
    expect(summaryOnly.collections.stdout.rows).toBe(3);
  });

  it('a first reply fits 8 KB on the wire however large the result; detail "complete" still brings it whole within 40,000 B', async () => {
    const args = { executable: '/usr/bin/tar', args: ['--help'], idempotency_key: 'tar-help' };
    const first = await client.callTool({ name: 'capture_process_scenario', arguments: args });
    // The whole tools/call result as sent: the JSON as text, beside it as structured content.
    expect(Buffer.byteLength(JSON.stringify(first))).toBeLessThanOrEqual(8_000);
    const reply = first.structuredContent as Reply;
    expect(reply).toMatchObject({
      status: 'succeeded',
      detail: 'summary',
      continuation: { collection: 'stdout' },
    });
    expect(reply.complete_bytes).toBeGreaterThan(8_000);
    const lines = reply.collections.stdout.rows as number;
    const complete = await call(client, 'capture_process_scenario', { ...args, detail: 'complete' });
    expect(complete).toMatchObject({ detail: 'complete', launch: { attached: true } });
    expect(complete.result.collections.stdout).toHaveLength(lines);
    expect(Buffer.byteLength(JSON.stringify({ ...complete, _isError: undefined }))).toBeLessThanOrEqual(
      40_000,
    );
    // Following the continuation reaches every line, page by page, each page as small as the first reply.
    const rows = await follow(reply.evidence_id, reply.continuation);
    expect(rows).toHaveLength(lines);
  });

  it('filters a real capture’s rows exactly and says how many matched', async () => {
    const big = await call(client, 'get_launch', { idempotency_key: 'seq-5000' });
    const page = await call(client, 'inspect_analysis_view', {
      evidence_id: big.evidence_id,
      view: { kind: 'page', collection: 'stdout', where: { line: [42, 4242] } },
    });
    expect(page.rows.map((r: Reply) => r.row.text)).toEqual(['42', '4242']);
    expect(page.coverage).toMatchObject({ matched: 2, total: 5000, exhausted: true });
  });
});

describe('malformed requests and other teams', () => {
  it('answers malformed views with invalid_params and other teams’ ids with not_found', async () => {
    const { evidence_id } = await call(client, 'get_launch', { idempotency_key: 'seq-3' });
    for (const view of [
      {},
      { kind: 'everything' },
      { kind: 'page', collection: 'stdout', limit: 1000 },
      { kind: 'page', collection: 'stdout', offset: -1 },
      { kind: 'page', collection: 'stdout', where: { line: [{ nested: true }] } },
      { kind: 'page', collection: 'stdout', where: { text: ['1'] } },
      { kind: 'page', collection: 'no_such_collection' },
      // Names Object.prototype holds are no collections (once answered as empty ones, or internal).
      { kind: 'page', collection: 'toString' },
      { kind: 'page', collection: '__proto__' },
      { kind: 'page', collection: 'constructor', where: { x: ['a'] } },
      // A filter field validation would drop without a word is refused, not ignored.
      { kind: 'page', collection: 'stdout', where: JSON.parse('{"__proto__": ["a"]}') as object },
    ]) {
      const reply = await call(client, 'inspect_analysis_view', { evidence_id, view });
      expect(reply.error?.code, JSON.stringify(view)).toBe('invalid_params');
    }
    expect(
      (await call(client, 'inspect_analysis_view', { evidence_id: 'ev_123', view: { kind: 'summary' } }))
        .error.code,
    ).toBe('invalid_params');
    const outsider = await t.connect(await t.tokenFor('mallory', 'elsewhere'));
    for (const [tool, args] of [
      ['inspect_analysis_view', { evidence_id, view: { kind: 'summary' } }],
      ['get_evidence', { evidence_id }],
      ['export_evidence_bundle', { evidence_ids: [evidence_id], idempotency_key: 'steal-1' }],
    ] as const) {
      const reply = await call(outsider, tool, args);
      expect(reply.error?.code ?? reply.status, tool).toMatch(/not_found|failed/);
      if (reply.status === 'failed') expect(reply.error.code).toBe('not_found');
    }
  });

  it('lists Evidence by tool and by launch, team by team', async () => {
    const launch = await call(client, 'get_launch', { idempotency_key: 'seq-3' });
    const byLaunch = await call(client, 'list_evidence', { workflow_id: launch.launch.workflow_id });
    expect(byLaunch.evidence.map((e: Reply) => e.evidence_id)).toEqual([launch.evidence_id]);
    // A list counts a record's limitations; get_evidence has them, and the parameters.
    const whole = (await call(client, 'get_evidence', { evidence_id: launch.evidence_id })).evidence;
    expect(byLaunch.evidence[0]).toMatchObject({ limitations_count: whole.limitations.length });
    expect(byLaunch.evidence[0]).not.toHaveProperty('limitations');
    expect(byLaunch.evidence[0]).not.toHaveProperty('parameters');
    const byTool = await call(client, 'list_evidence', { tool: 'capture_process_scenario', limit: 2 });
    expect(byTool.evidence).toHaveLength(2);
    expect(byTool.next_cursor).toEqual(expect.any(String));
  });

  it('pages past a record whose parameters alone are larger than a reply: a list shows records without them', async () => {
    const big = await call(client, 'capture_process_scenario', {
      executable: '/usr/bin/wc',
      args: ['-c'],
      stdin: 'x'.repeat(200_000),
      idempotency_key: 'big-stdin',
      investigation: 'big-parameters',
    });
    expect(big.status, JSON.stringify(big.error)).toBe('succeeded');
    await call(client, 'capture_process_scenario', {
      executable: '/usr/bin/true',
      idempotency_key: 'after-big-stdin',
      investigation: 'big-parameters',
    });
    const listed = await call(client, 'list_evidence', { investigation: 'big-parameters' });
    expect(listed.error).toBeUndefined();
    expect(listed.evidence.map((e: Reply) => e.evidence_id)).toContain(big.evidence_id);
    expect(listed.evidence).toHaveLength(2);
    for (const e of listed.evidence) {
      expect(e.parameters).toBeUndefined();
      expect(e.parameters_digest).toEqual(expect.any(String));
    }
    const launches = await call(client, 'list_launches', {});
    expect(launches.error).toBeUndefined();
    expect(launches.launches.map((l: Reply) => l.launch.idempotency_key)).toContain('big-stdin');
    // get_evidence shows them, each long string cut where the whole would not fit a reply.
    const whole = await call(client, 'get_evidence', { evidence_id: big.evidence_id });
    expect(whole.error).toBeUndefined();
    expect(whole.evidence.parameters).toMatchObject({ executable: '/usr/bin/wc', args: ['-c'] });
    expect(whole.evidence.parameters.stdin).toMatch(/^x{1024}… \(200000 characters\)$/);
    expect(whole.evidence.parameters_cut).toMatch(/cut to its first 1024/);
    // One that fits comes whole, as it always did.
    const small = await call(client, 'get_evidence', { evidence_id: listed.evidence[0].evidence_id });
    expect(small.evidence.parameters).toEqual(expect.any(Object));
    expect(small.evidence.parameters_cut).toBeUndefined();
  });
});

describe('evidence bundles', () => {
  it('exports a bundle into the team folder; another cluster imports it for the same team, atomically; a tampered one is refused whole', async () => {
    const big = await call(client, 'get_launch', { idempotency_key: 'seq-5000' });
    const small = await call(client, 'get_launch', { idempotency_key: 'seq-3' });
    const exported = await call(client, 'export_evidence_bundle', {
      evidence_ids: [big.evidence_id, small.evidence_id],
      idempotency_key: 'export-1',
    });
    expect(exported.status).toBe('succeeded');
    const file = exported.summary.path as string;
    expect(file).toContain(path.join(t.home, 'exports', 'local'));

    // Another cluster (its own store) with the bundle copied into its inbox's folder for team local.
    const other = await startTestStack({ env: { DOSSIER_BUNDLE_ROOTS: inbox } });
    try {
      const there = await other.connect();
      mkdirSync(path.join(inbox, 'local'), { recursive: true });
      const copy = path.join(inbox, 'local', 'bundle.json');
      writeFileSync(copy, readFileSync(file));
      const tampered = path.join(inbox, 'local', 'tampered.json');
      writeFileSync(tampered, readFileSync(file, 'utf8').replace('"text":"4242"', '"text":"4243"'));
      const refused = await call(there, 'import_evidence_bundle', { path: tampered });
      // Its content is not what its digests say: an integrity error, not a malformed input.
      expect(refused.error.code).toBe('integrity_error');
      expect(refused.error.message).toMatch(/refused whole/);
      expect((await call(there, 'list_evidence', {})).evidence).toEqual([]);

      const imported = await call(there, 'import_evidence_bundle', { path: copy });
      expect(imported).toMatchObject({ imported: 2, already_present: 0 });
      const rows = await call(there, 'inspect_analysis_view', {
        evidence_id: big.evidence_id,
        view: { kind: 'page', collection: 'stdout', offset: 4998, limit: 5 },
      });
      expect(rows.rows.map((r: Reply) => r.row.text)).toEqual(['4999', '5000']);
      expect((await call(there, 'import_evidence_bundle', { path: copy })).imported).toBe(0);
      const outside = await call(there, 'import_evidence_bundle', { path: '/etc/hostname' });
      expect(outside.error.code).toBe('not_found');
    } finally {
      await other.stop(true);
    }
  });

  it('another team can import neither a bundle path of this team nor this team’s bundle copied into its own folder', async () => {
    const exported = await call(client, 'get_launch', { idempotency_key: 'export-1' });
    const file = exported.summary.path as string;
    const bob = await t.connect(await t.tokenFor('bob', 'partner-team'));
    const direct = await call(bob, 'import_evidence_bundle', { path: file });
    expect(direct.error.code).toBe('not_found');
    mkdirSync(path.join(inbox, 'partner-team'), { recursive: true });
    const planted = path.join(inbox, 'partner-team', 'planted.json');
    writeFileSync(planted, readFileSync(file));
    const foreign = await call(bob, 'import_evidence_bundle', { path: planted });
    expect(foreign.error.code).toBe('policy_denied');
    expect(foreign.error.message).toMatch(/another team/);
    expect((await call(bob, 'list_evidence', {})).evidence).toEqual([]);
  });
});
