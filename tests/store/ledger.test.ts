// Retained views on both backends, through the transport-free Ledger:
// pages reproduce collections exactly, filters are exact, coverage is honest.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { wireBytes } from '../../src/gateway/callResult.ts';
import { Ledger, replyBytes } from '../../src/gateway/ledger.ts';
import type { ViewRequest } from '../../src/evidence/views.ts';
import type { Store } from '../../src/store/store.ts';
import type { EvidenceRecord, Principal } from '../../src/domain/types.ts';
import { BACKENDS, freshStore } from '../helpers/backends.ts';
import { syntheticTrace } from '../helpers/synthetic.ts';

const alice: Principal = { principal: 'alice', team: 't', role: 'operator' };
const mallory: Principal = { principal: 'mallory', team: 'other', role: 'admin' };

describe.each(BACKENDS)('retained views on %s', (backend) => {
  let store: Store;
  let close: () => Promise<void>;
  let ledger: Ledger;
  let trace: EvidenceRecord;
  const input = syntheticTrace(8_000);

  beforeAll(async () => {
    ({ store, close } = await freshStore(backend));
    ledger = new Ledger(store, { replyBudgetBytes: 40_000 });
    trace = await store.evidence.put(input);
  });
  afterAll(async () => {
    await close();
  });

  async function everyRow(collection: string, limit: number, where?: Record<string, (string | number)[]>) {
    const rows: { source_index: number; row: unknown }[] = [];
    for (let offset = 0; ;) {
      const page = (await ledger.inspect(alice, trace.evidence_id, {
        kind: 'page',
        collection,
        where,
        offset,
        limit,
      })) as {
        rows: typeof rows;
        coverage: { next_offset: number | null; exhausted: boolean; returned: number };
        truncated: boolean;
        limitations: string[];
      };
      expect(page.truncated).toBe(true);
      expect(page.limitations).toEqual(input.record.limitations);
      rows.push(...page.rows);
      if (page.coverage.exhausted) return rows;
      offset = page.coverage.next_offset!;
    }
  }

  it('the summary’s counts equal the collections’', async () => {
    const summary = (await ledger.inspect(alice, trace.evidence_id, { kind: 'summary' })) as {
      collections: Record<string, { rows: number }>;
      summary: Record<string, number>;
    };
    expect(summary.collections.references!.rows).toBe(8_000);
    expect(summary.collections.matches!.rows).toBe(4);
    expect(summary.collections.residual_unknowns!.rows).toBe(2_000);
    expect(summary.summary).toMatchObject({ references: 8_000, matches: 4, owners_unavailable: 2_000 });
  });

  it('concatenating small pages reproduces every collection exactly, duplicates distinct by source_index', async () => {
    const refs = await everyRow('references', 97);
    expect(refs.map((r) => r.row)).toEqual(input.collections.references);
    expect(refs.map((r) => r.source_index)).toEqual([...Array(8_000).keys()]);
    expect(refs[7_999]!.row).toEqual(refs[7_998]!.row);
    expect((await everyRow('matches', 3)).map((r) => r.row)).toEqual(input.collections.matches);
    const unknowns = await everyRow('residual_unknowns', 256);
    expect(new Set(unknowns.map((u) => (u.row as { unknown_id: string }).unknown_id)).size).toBe(2_000);
  });

  it('filters are exact: list fields match by element, case variants do not match', async () => {
    const hits = await everyRow('references', 64, { target_addresses: ['0x600000'] });
    expect(hits).toHaveLength(1_600);
    expect(hits.every((h) => h.source_index % 5 === 0)).toBe(true);
    expect(await everyRow('references', 64, { target_addresses: ['0X600000'] })).toEqual([]);
    const owner = await everyRow('references', 2, { owner: ['sub_7'] });
    expect(owner.map((o) => o.source_index)).toEqual([7, 2_007, 4_007, 6_007]);
    const both = await everyRow('references', 50, { owner: ['sub_0', 'sub_1'], kind: ['call'] });
    const expected = input.collections
      .references!.map((row, i) => ({ row: row as { owner: string; kind: string }, i }))
      .filter(({ row }) => ['sub_0', 'sub_1'].includes(row.owner) && row.kind === 'call')
      .map(({ i }) => i);
    expect(both.map((b) => b.source_index)).toEqual(expected);
    expect((await everyRow('matches', 10, { type: ['string'] })).map((m) => m.source_index)).toEqual([
      0, 1, 2,
    ]);
  });

  it('past-end offsets return an empty page with exhausted: true and the true matched count', async () => {
    const page = await ledger.inspect(alice, trace.evidence_id, {
      kind: 'page',
      collection: 'references',
      offset: 10_000,
      limit: 64,
    });
    expect(page).toMatchObject({
      rows: [],
      coverage: { returned: 0, matched: 8_000, total: 8_000, exhausted: true, next_offset: null },
    });
    const filtered = await ledger.inspect(alice, trace.evidence_id, {
      kind: 'page',
      collection: 'references',
      where: { owner: ['sub_7'] },
      offset: 4,
      limit: 64,
    });
    expect(filtered).toMatchObject({ rows: [], coverage: { matched: 4, exhausted: true } });
  });

  it('refuses unknown collections, unfilterable fields and other teams’ ids with the documented errors', async () => {
    const page = (collection: string, where?: Record<string, string[]>) =>
      ledger.inspect(alice, trace.evidence_id, { kind: 'page', collection, where, offset: 0, limit: 10 });
    await expect(page('nope')).rejects.toMatchObject({
      code: 'invalid_params',
      message: expect.stringContaining('no collection "nope"'),
    });
    await expect(page('references', { source_address: ['0x400000'] })).rejects.toMatchObject({
      code: 'invalid_params',
      remediation: expect.stringContaining('owner'),
    });
    await expect(ledger.inspect(mallory, trace.evidence_id, { kind: 'summary' })).rejects.toMatchObject({
      code: 'not_found',
    });
    await expect(ledger.get(mallory, trace.evidence_id)).rejects.toMatchObject({ code: 'not_found' });
  });

  it('records one residual unknown per unresolved owner, each with its own identity and revision', async () => {
    const open = await ledger.listUnknowns(alice, { status: 'open', limit: 200 });
    // A list keeps what fits the reply budget and continues after it: every unknown is reachable.
    expect(open.unknowns.length).toBeGreaterThan(0);
    expect(open.next_cursor).not.toBeNull();
    const seen = new Set(open.unknowns.map((u) => u.unknown_id));
    for (let cursor = open.next_cursor; cursor;) {
      const next = await ledger.listUnknowns(alice, { status: 'open', limit: 200, cursor });
      expect(Buffer.byteLength(JSON.stringify(next))).toBeLessThanOrEqual(ledger.replyBudgetBytes);
      for (const u of next.unknowns) seen.add(u.unknown_id);
      cursor = next.next_cursor;
    }
    expect(seen.size).toBe(2_000);
    // A cursor continues its own list and filter only: another filter, list or team is refused.
    for (const [asked, who] of [
      [{ status: 'resolved' as const }, alice],
      [{}, alice],
      [{ status: 'open' as const }, mallory],
    ] as const) {
      await expect(
        ledger.listUnknowns(who, { ...asked, limit: 10, cursor: open.next_cursor! }),
      ).rejects.toMatchObject({
        code: 'invalid_params',
        message: expect.stringMatching(/another list or another filter/),
      });
    }
    await expect(ledger.list(alice, { limit: 10, cursor: open.next_cursor! })).rejects.toMatchObject({
      code: 'invalid_params',
    });
    const first = open.unknowns[0]!;
    expect(first.evidence_ids).toEqual([trace.evidence_id]);
    expect((await ledger.listUnknowns(mallory, { limit: 10 })).unknowns).toEqual([]);
  });

  it('update_unknown is compare-and-swap: a stale revision is refused and changes nothing', async () => {
    const { unknown } = await ledger.recordUnknown(alice, {
      question: 'Is the license check bypassable?',
      scope: 'check_license',
      evidence_ids: [trace.evidence_id],
    });
    const again = await ledger.recordUnknown(alice, {
      question: 'Is the license check bypassable?',
      scope: 'check_license',
      evidence_ids: [],
    });
    expect(again).toMatchObject({ created: false, unknown: { unknown_id: unknown.unknown_id, revision: 1 } });

    const updated = await ledger.updateUnknown(alice, {
      unknown_id: unknown.unknown_id,
      expected_revision: 1,
      status: 'resolved',
      settled_by: [trace.evidence_id],
    });
    expect(updated.unknown).toMatchObject({
      status: 'resolved',
      revision: 2,
      settled_by: [trace.evidence_id],
    });
    // The same change again (a retried call) changes nothing, and makes no new revision.
    const same = await ledger.updateUnknown(alice, {
      unknown_id: unknown.unknown_id,
      expected_revision: 2,
      status: 'resolved',
      settled_by: [trace.evidence_id],
    });
    expect(same.unknown).toMatchObject({ status: 'resolved', revision: 2 });
    await expect(
      ledger.updateUnknown(alice, {
        unknown_id: unknown.unknown_id,
        expected_revision: 1,
        status: 'refuted',
        settled_by: [trace.evidence_id],
      }),
    ).rejects.toMatchObject({ code: 'revision_conflict', details: { current_revision: 2 } });
    expect(await store.unknowns.get('t', unknown.unknown_id)).toMatchObject({
      status: 'resolved',
      revision: 2,
    });
    await expect(
      ledger.updateUnknown(mallory, { unknown_id: unknown.unknown_id, expected_revision: 2, status: 'open' }),
    ).rejects.toMatchObject({ code: 'not_found' });
  });

  it('keeps every revision of an unknown with who made it; get_unknown reads it by id with its history, paged', async () => {
    const bob = { ...alice, principal: 'bob' };
    const { unknown } = await ledger.recordUnknown(alice, {
      question: 'Which key signs the update?',
      scope: 'updater',
      evidence_ids: [trace.evidence_id],
    });
    await ledger.updateUnknown(bob, { unknown_id: unknown.unknown_id, expected_revision: 1, note: 'RSA?' });
    await ledger.updateUnknown(alice, {
      unknown_id: unknown.unknown_id,
      expected_revision: 2,
      status: 'resolved',
      settled_by: [trace.evidence_id],
    });
    const read = await ledger.getUnknown(alice, { unknown_id: unknown.unknown_id, history_limit: 2 });
    expect(read.unknown).toMatchObject({ revision: 3, status: 'resolved', updated_by: 'alice' });
    expect(read.history.map((h) => [h.revision, h.status, h.note, h.changed_by])).toEqual([
      [3, 'resolved', 'RSA?', 'alice'],
      [2, 'open', 'RSA?', 'bob'],
    ]);
    expect(read.next_before_revision).toBe(2);
    const rest = await ledger.getUnknown(alice, {
      unknown_id: unknown.unknown_id,
      history_limit: 2,
      before_revision: 2,
    });
    expect(rest.history.map((h) => [h.revision, h.changed_by, h.evidence_ids])).toEqual([
      [1, 'alice', [trace.evidence_id]],
    ]);
    expect(rest.next_before_revision).toBeNull();
    await expect(
      ledger.getUnknown(mallory, { unknown_id: unknown.unknown_id, history_limit: 5 }),
    ).rejects.toMatchObject({ code: 'not_found' });
  });

  it('keeps get_unknown within the reply budget however long the notes, and invents no revision when a result raises a known unknown again', async () => {
    const trace2 = syntheticTrace(4);
    const first = await store.evidence.put(trace2);
    const residual = (await ledger.inspect(alice, first.evidence_id, {
      kind: 'page',
      collection: 'residual_unknowns',
      offset: 0,
      limit: 1,
    })) as { rows: { row: { unknown_id: string } }[] };
    const id = residual.rows[0]!.row.unknown_id;
    for (let revision = 1; revision <= 12; revision++) {
      await ledger.updateUnknown(alice, {
        unknown_id: id,
        expected_revision: revision,
        note: `${revision}:`.padEnd(4_000, 'n'), // each a change: an update that changes nothing makes no revision
      });
    }
    const read = await ledger.getUnknown(alice, { unknown_id: id, history_limit: 200 });
    expect(Buffer.byteLength(JSON.stringify(read))).toBeLessThanOrEqual(40_000);
    expect(read.history.length).toBeLessThan(13);
    expect(read.next_before_revision).toBe(read.history[read.history.length - 1]!.revision);

    // Another result (another principal, later) raises the same unknown: it exists, so no "revision 1" is added.
    await store.evidence.put({
      ...trace2,
      record: { ...trace2.record, principal: 'bob', created_at: new Date().toISOString() },
    });
    const all = await store.unknowns.history('t', id, { limit: 100 });
    expect(all.map((h) => h.revision)).toEqual([13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1]);
    expect(all.at(-1)!.changed_by).toBe(trace2.record.principal);
  });

  it('delivers an oversized result as summary + a continuation that fits, and following it reaches every row', async () => {
    const reply = await ledger.deliver(
      alice,
      { status: 'succeeded', evidence_id: trace.evidence_id },
      'complete',
    );
    expect(reply.detail).toBe('summary');
    expect(reply.result).toBeUndefined();
    const continuation = reply.continuation as {
      kind: 'page';
      collection: string;
      offset: number;
      limit: number;
    };
    expect(continuation).toMatchObject({ kind: 'page', collection: 'references', offset: 0 });
    expect(JSON.stringify(reply).length).toBeLessThan(40_000);
    const rows = await everyRow(continuation.collection, continuation.limit);
    expect(rows).toHaveLength(8_000);
    const page = await ledger.inspect(alice, trace.evidence_id, continuation);
    expect(Buffer.byteLength(JSON.stringify(page))).toBeLessThanOrEqual(40_000);
  });

  it('by default a reply fits the first-reply budget on the wire, and so does the page its continuation names', async () => {
    const reply = await ledger.deliver(
      alice,
      { status: 'succeeded', evidence_id: trace.evidence_id },
      undefined,
    );
    expect(reply).toMatchObject({ detail: 'summary', continuation: { collection: 'references', offset: 0 } });
    // The whole tools/call result: the JSON as text beside it as structured content.
    expect(wireBytes(reply)).toBeLessThanOrEqual(ledger.firstReplyBytes);
    expect(wireBytes(reply)).toBeGreaterThan(replyBytes(reply) * 2);
    const page = await ledger.inspect(alice, trace.evidence_id, reply.continuation as ViewRequest);
    expect(wireBytes(page)).toBeLessThanOrEqual(ledger.firstReplyBytes);
    expect((page as { rows: unknown[] }).rows.length).toBe((reply.continuation as { limit: number }).limit);
  });

  it('a summary and limitations too large for the first reply are left out, each saying where it is', async () => {
    const big = syntheticTrace(20, 't', 'alice');
    big.record.summary = { ...big.record.summary, note: 'x'.repeat(6_000) };
    big.record.limitations = Array.from({ length: 40 }, (_, i) => `limitation ${i}: ${'y'.repeat(60)}`);
    const record = await store.evidence.put(big);
    // A launch's reply carries its result's summary; the ledger adds the rest.
    const launched = { status: 'succeeded', evidence_id: record.evidence_id, summary: big.record.summary };
    const reply = await ledger.deliver(alice, launched, undefined);
    expect(wireBytes(reply)).toBeLessThanOrEqual(ledger.firstReplyBytes);
    expect(reply.summary).toBeUndefined();
    expect(reply.summary_omitted).toMatch(
      /bytes: inspect_analysis_view \{view: \{kind: "summary"\}\} shows it/,
    );
    expect(reply.limitations).toHaveLength(4);
    expect((reply.limitations as string[])[3]).toMatch(/and 37 more/);
    expect(reply.collections).toEqual({
      matches: { rows: 4 },
      references: { rows: 20 },
      residual_unknowns: { rows: 20 },
    });
    // detail "complete" still carries it all within the reply budget.
    const complete = await ledger.deliver(alice, launched, 'complete');
    expect(complete).toMatchObject({ detail: 'complete', summary: big.record.summary });
    expect(replyBytes(complete)).toBeLessThanOrEqual(ledger.replyBudgetBytes);
  });
});
