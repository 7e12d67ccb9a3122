import { describe, expect, it } from 'vitest';
import type { EvidenceRecord } from '../domain/types.ts';
import { checkPage, coverage, fitPage, summaryView, type PageView } from './views.ts';

const record = {
  evidence_id: `ev_${'0'.repeat(64)}`,
  tool: 'trace_feature',
  collections: { references: { rows: 10, bytes: 100, digest: 'd', filterable: ['owner'] } },
  truncated: true,
  limitations: ['capped'],
  summary: { matches: 1 },
} as unknown as EvidenceRecord;

describe('views', () => {
  it('coverage says where the next page starts and whether the list is exhausted', () => {
    expect(coverage(0, 4, 10, 10)).toEqual({
      offset: 0,
      returned: 4,
      matched: 10,
      total: 10,
      next_offset: 4,
      exhausted: false,
    });
    expect(coverage(8, 2, 10, 10)).toMatchObject({ next_offset: null, exhausted: true });
    // An empty page of a filter that matched nothing is exhausted, and says how many rows exist.
    expect(coverage(0, 0, 0, 10)).toMatchObject({ matched: 0, total: 10, exhausted: true });
  });

  it('refuses an unknown collection or a field that is not filterable, naming what is', () => {
    const page = { kind: 'page' as const, collection: 'nope', offset: 0, limit: 5 };
    expect(() => checkPage(record, page)).toThrow(/no collection "nope"/);
    expect(() => checkPage(record, { ...page, collection: 'references', where: { kind: ['x'] } })).toThrow(
      /cannot be filtered by "kind"/,
    );
    expect(checkPage(record, { ...page, collection: 'references', where: { owner: ['x'] } }).rows).toBe(10);
  });

  it('fitPage keeps the most rows that fit, and coverage says the budget ended the page', () => {
    const rows = Array.from({ length: 8 }, (_, i) => ({ source_index: i, row: { i } }));
    const view: PageView = {
      evidence_id: record.evidence_id,
      kind: 'page',
      collection: 'references',
      where: {},
      rows,
      coverage: coverage(0, 8, 10, 10),
      truncated: false,
      limitations: [],
    };
    const fitted = fitPage(view, (v) => v.rows.length <= 3);
    expect(fitted.rows.map((r) => r.source_index)).toEqual([0, 1, 2]);
    expect(fitted.coverage).toMatchObject({
      returned: 3,
      next_offset: 3,
      exhausted: false,
      limited_by: 'reply_budget',
    });
    // One row is always kept; a page that fits is left as it is, saying nothing of the budget.
    expect(fitPage(view, () => false).rows).toHaveLength(1);
    expect(fitPage(view, () => true).coverage).not.toHaveProperty('limited_by');
    const one = { ...view, rows: rows.slice(0, 1), coverage: coverage(0, 1, 10, 10) };
    expect(fitPage(one, () => false)).toBe(one);
    const none = { ...view, rows: [], coverage: coverage(0, 0, 0, 0) };
    expect(fitPage(none, () => false).coverage).toEqual(coverage(0, 0, 0, 0));
    for (let most = 1; most <= 8; most++)
      expect(fitPage(view, (v) => v.rows.length <= most).rows).toHaveLength(most);
  });

  it('the summary carries truncated and limitations with the provenance', () => {
    expect(summaryView(record)).toMatchObject({ kind: 'summary', truncated: true, limitations: ['capped'] });
  });
});
