// Retained views of Evidence: a summary, or one page of one
// collection with exact filters and coverage. An empty page never implies an
// absent row: coverage says how many matched and whether the list is exhausted.
import { DossierError } from '../domain/errors.ts';
import type { z } from 'zod';
import { WHERE_LIMITS, type viewSchema } from '../tools/ledger.ts';
import type { EvidenceStore } from '../store/evidence.ts';
import type { EvidenceRecord, PageRow, Where } from '../domain/types.ts';

/** A view request, as inspect_analysis_view's `view` input parses it. */
export type ViewRequest = z.output<typeof viewSchema>;

export interface Coverage {
  offset: number;
  returned: number;
  matched: number;
  total: number;
  next_offset: number | null;
  exhausted: boolean;
  /** Set when the page holds fewer rows than asked so that its reply fits the reply budget. */
  limited_by?: 'reply_budget';
}

export interface SummaryView {
  evidence_id: string;
  kind: 'summary';
  tool: string;
  summary: Record<string, unknown>;
  collections: EvidenceRecord['collections'];
  truncated: boolean;
  limitations: string[];
  provenance: Pick<
    EvidenceRecord,
    | 'provider'
    | 'parameters_digest'
    | 'target'
    | 'principal'
    | 'team'
    | 'investigation'
    | 'launch'
    | 'created_at'
  >;
}

export interface PageView {
  evidence_id: string;
  kind: 'page';
  collection: string;
  where: Where;
  rows: PageRow[];
  coverage: Coverage;
  truncated: boolean;
  limitations: string[];
}

export async function findEvidence(
  store: EvidenceStore,
  team: string,
  evidenceId: string,
): Promise<EvidenceRecord> {
  const record = await store.get(team, evidenceId);
  if (!record) {
    throw new DossierError(
      'not_found',
      `No Evidence ${evidenceId} is visible to your team.`,
      'Check the id: launch replies and list_evidence carry the evidence_id of each result.',
      { evidence_id: evidenceId },
    );
  }
  return record;
}

export function summaryView(record: EvidenceRecord): SummaryView {
  return {
    evidence_id: record.evidence_id,
    kind: 'summary',
    tool: record.tool,
    summary: record.summary,
    collections: record.collections,
    truncated: record.truncated,
    limitations: record.limitations,
    provenance: {
      provider: record.provider,
      parameters_digest: record.parameters_digest,
      target: record.target,
      principal: record.principal,
      team: record.team,
      investigation: record.investigation,
      launch: record.launch,
      created_at: record.created_at,
    },
  };
}

/** Checks a page request against the Evidence before anything is read. */
export function checkPage(record: EvidenceRecord, view: Extract<ViewRequest, { kind: 'page' }>) {
  // Own names only: "toString" or "constructor" is no collection, whatever Object.prototype holds.
  const info = Object.hasOwn(record.collections, view.collection)
    ? record.collections[view.collection]
    : undefined;
  if (!info) {
    const names = Object.keys(record.collections);
    throw new DossierError(
      'invalid_params',
      `Evidence ${record.evidence_id} has no collection "${view.collection}".`,
      names.length
        ? `Use one of: ${names.join(', ')} (the summary view lists them with row counts).`
        : 'This Evidence has no collections; ask for the summary view.',
      { collection: view.collection, collections: names },
    );
  }
  for (const [field, values] of Object.entries(view.where ?? {})) {
    if (!info.filterable.includes(field)) {
      throw new DossierError(
        'invalid_params',
        `Collection "${view.collection}" cannot be filtered by "${field}".`,
        info.filterable.length
          ? `Filter by one of: ${info.filterable.join(', ')}.`
          : 'This collection has no filterable fields; page it without where.',
        { collection: view.collection, field, filterable: info.filterable },
      );
    }
    if (values.length > WHERE_LIMITS.values) {
      throw new DossierError(
        'invalid_params',
        `where.${field} has ${values.length} values (at most ${WHERE_LIMITS.values}).`,
        'Split the filter over several pages of calls.',
      );
    }
  }
  return info;
}

export async function pageView(
  store: EvidenceStore,
  record: EvidenceRecord,
  view: Extract<ViewRequest, { kind: 'page' }>,
): Promise<PageView> {
  const info = checkPage(record, view);
  const where = view.where ?? {};
  const { rows, matched } = await store.page({
    evidenceId: record.evidence_id,
    collection: view.collection,
    total: info.rows,
    where,
    offset: view.offset,
    limit: view.limit,
  });
  return {
    evidence_id: record.evidence_id,
    kind: 'page',
    collection: view.collection,
    where,
    rows,
    coverage: coverage(view.offset, rows.length, matched, info.rows),
    truncated: record.truncated,
    limitations: record.limitations,
  };
}

export function coverage(offset: number, returned: number, matched: number, total: number): Coverage {
  const end = offset + returned;
  const exhausted = end >= matched;
  return { offset, returned, matched, total, next_offset: exhausted ? null : end, exhausted };
}

/**
 * Drops rows from the end of a page until its reply fits, keeping coverage honest: the most rows
 * that fit (a search over the count, about eight measurements for 256 rows), at least one, and the
 * coverage says the budget, not the data, ended the page.
 */
export function fitPage(view: PageView, fits: (v: PageView) => boolean): PageView {
  // One row, or none, is as small as a page gets: nothing to cut, and nothing said of cutting.
  if (view.rows.length <= 1 || fits(view)) return view;
  const cut = (keep: number): PageView => ({
    ...view,
    rows: view.rows.slice(0, keep),
    coverage: {
      ...coverage(view.coverage.offset, keep, view.coverage.matched, view.coverage.total),
      limited_by: 'reply_budget',
    },
  });
  // fits(cut(low)) holds (or low is the one row a page always keeps); fits(cut(high)) does not.
  let low = 1;
  let high = view.rows.length;
  while (high - low > 1) {
    const mid = Math.floor((low + high) / 2);
    if (fits(cut(mid))) low = mid;
    else high = mid;
  }
  return cut(low);
}
