// The ledger behind the gateway's read and unknown tools, and the delivery of
// producing tools' results within the reply budget.
import { DossierError } from '../domain/errors.ts';
import { TOOLS_BY_NAME } from '../tools/catalog.ts';
import { PAGE_LIMIT } from '../tools/ledger.ts';
import { completePromptArgument, completeResourceArgument } from './completion.ts';
import { Intake, type IntakeOptions } from './intake.ts';
import { fitList } from './lists.ts';
import { wireBytes } from './callResult.ts';
import { unknownId } from '../domain/evidence.ts';
import type { EvidenceFilter } from '../store/evidence.ts';
import type { Store } from '../store/store.ts';
import type { UnknownFilter } from '../store/unknowns.ts';
import type { EvidenceRecord, Principal, UnknownStatus } from '../domain/types.ts';
import { findEvidence, fitPage, pageView, summaryView, type ViewRequest } from '../evidence/views.ts';
import { Knowledge } from './knowledge.ts';
import { Overlay } from './overlay.ts';

type Row = Record<string, unknown>;

/** Bytes a reply's JSON takes (its structured content; the reply budget counts these). */
export const replyBytes = (value: unknown) => Buffer.byteLength(JSON.stringify(value));

/** A launch or analysis reply's default size on the wire (DOSSIER_FIRST_REPLY_BYTES). */
export const FIRST_REPLY_BYTES = 8_000;

export type LedgerOptions = IntakeOptions & {
  /** A launch or analysis reply's size unless it asks for detail "complete": the whole tools/call result. */
  firstReplyBytes?: number;
};

/** How much of a result a reply carries: undefined is the first-reply budget (see detailSchema). */
export type Detail = 'complete' | 'summary' | undefined;

type Fits = (value: Record<string, unknown>) => boolean;

/**
 * An Evidence record as a list shows it: without its parameters (a launch's whole input, which may
 * be larger than a reply; parameters_digest stays) and its limitations (an analysis's are most of
 * its record), counted instead. get_evidence shows both.
 */
function listed(record: EvidenceRecord) {
  const { parameters: _parameters, limitations, ...rest } = record;
  return { ...rest, limitations_count: limitations.length };
}

/** How many characters of a long string get_evidence keeps when a record's parameters do not fit. */
const CUT_AT = 1_024;

/** `value` with every string longer than `max` characters cut to its first `max`, marked. */
function cutStrings(value: unknown, max: number): unknown {
  if (typeof value === 'string')
    return value.length > max ? `${value.slice(0, max)}… (${value.length} characters)` : value;
  if (Array.isArray(value)) return value.map((v) => cutStrings(v, max));
  if (value && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, cutStrings(v, max)]));
  return value;
}

export class Ledger {
  readonly replyBudgetBytes: number;
  readonly firstReplyBytes: number;
  /** Artifacts and bundles in and out (src/gateway/intake.ts). */
  readonly intake: Intake;

  constructor(
    private readonly store: Pick<
      Store,
      | 'evidence'
      | 'unknowns'
      | 'artifacts'
      | 'candidates'
      | 'analyses'
      | 'blobs'
      | 'retained'
      | 'annotations'
      | 'functions'
    >,
    private readonly opts: LedgerOptions,
  ) {
    this.replyBudgetBytes = opts.replyBudgetBytes;
    this.firstReplyBytes = opts.firstReplyBytes ?? FIRST_REPLY_BYTES;
    this.intake = new Intake(store, opts);
    this.knowledge = new Knowledge(store, opts.replyBudgetBytes);
    this.overlay = new Overlay(store);
  }

  /** The team's annotations and what diffs carry between builds (src/gateway/knowledge.ts). */
  readonly knowledge: Knowledge;
  /** The team's names on analysis answers, applied as they are read (src/gateway/overlay.ts). */
  private readonly overlay: Overlay;

  /** Prompt-argument completion over this team's live records (never an error: empty instead). */
  complete(
    caller: Principal,
    prompt: string,
    argument: string,
    typed: string,
    context?: Record<string, string>,
  ) {
    return completePromptArgument(this.completionStores(), caller, prompt, argument, typed, context);
  }

  /** Resource-template completion (the Evidence template's ids), never an error: empty instead. */
  completeResource(caller: Principal, uri: string, argument: string, typed: string) {
    return completeResourceArgument(this.completionStores(), caller, uri, argument, typed);
  }

  private completionStores() {
    return { ...this.store, home: this.opts.home, blobs: this.store.blobs };
  }

  async inspect(caller: Principal, evidenceId: string, view: ViewRequest) {
    const record = await findEvidence(this.store.evidence, caller.team, evidenceId);
    const named = Overlay.applies(record);
    if (view.kind === 'summary') {
      const summary = summaryView(record);
      if (!named) return { ...summary };
      return { ...summary, summary: await this.overlay.head(caller.team, record, summary.summary) };
    }
    const page = await pageView(this.store.evidence, record, view);
    if (named) {
      const rows = await this.overlay.rows(
        caller.team,
        record,
        view.collection,
        page.rows.map((r) => r.row as Row),
      );
      page.rows = page.rows.map((r, i) => ({ ...r, row: rows[i] }));
    }
    return { ...fitPage(page, (p) => replyBytes(p) <= this.replyBudgetBytes) };
  }

  /**
   * One Evidence record. Its parameters are its launch's whole input: where they would take the
   * reply over its budget, long strings in them are cut, or else they are left out, and the record
   * says so (parameters_digest is always of the whole).
   */
  async get(caller: Principal, evidenceId: string) {
    const record = await findEvidence(this.store.evidence, caller.team, evidenceId);
    const fits = (evidence: unknown) => replyBytes({ evidence }) <= this.replyBudgetBytes;
    if (fits(record)) return { evidence: record };
    const bytes = replyBytes(record.parameters);
    const cut = { ...record, parameters: cutStrings(record.parameters, CUT_AT) };
    if (fits(cut))
      return {
        evidence: {
          ...cut,
          parameters_cut: `The parameters are ${bytes} bytes: each string longer than ${CUT_AT} characters is cut to its first ${CUT_AT} here.`,
        },
      };
    return {
      evidence: {
        ...record,
        parameters: null,
        parameters_cut: `The parameters are ${bytes} bytes, more than a reply holds: left out here.`,
      },
    };
  }

  async list(caller: Principal, filter: EvidenceFilter) {
    return fitList(
      'evidence',
      await this.store.evidence.list(caller.team, filter),
      this.replyBudgetBytes,
      listed,
    );
  }

  async recordUnknown(
    caller: Principal,
    input: { question: string; scope: string; evidence_ids: string[]; investigation?: string },
  ) {
    await this.requireEvidence(caller, input.evidence_ids);
    const id = unknownId(input);
    const { created, unknown } = await this.store.unknowns.record(
      caller.team,
      caller.principal,
      { unknown_id: id, question: input.question, scope: input.scope },
      input.investigation ?? null,
      input.evidence_ids,
    );
    return { created, unknown };
  }

  async updateUnknown(
    caller: Principal,
    input: {
      unknown_id: string;
      expected_revision: number;
      status?: UnknownStatus;
      note?: string | null;
      settled_by?: string[];
    },
  ) {
    const current = await this.visibleUnknown(caller, input.unknown_id);
    const settles = input.status !== undefined && input.status !== 'open';
    if (settles && !(input.settled_by?.length || current.settled_by?.length)) {
      throw new DossierError(
        'invalid_params',
        `Status "${input.status}" needs the Evidence that settles it.`,
        'Pass settled_by with the evidence_id(s) that resolve, refute or supersede the unknown.',
      );
    }
    await this.requireEvidence(caller, input.settled_by ?? []);
    const { applied, unknown } = await this.store.unknowns.update(
      caller.team,
      input.unknown_id,
      input.expected_revision,
      {
        status: input.status,
        note: input.note,
        settledBy: input.settled_by,
      },
      caller.principal,
    );
    if (!applied) {
      throw new DossierError(
        'revision_conflict',
        `Unknown ${input.unknown_id} is at revision ${unknown?.revision}, not ${input.expected_revision}; nothing was changed.`,
        'Read it again (list_unknowns), reconcile with the newer revision, and retry with its revision as expected_revision.',
        {
          unknown_id: input.unknown_id,
          expected_revision: input.expected_revision,
          current_revision: unknown?.revision,
        },
      );
    }
    return { unknown };
  }

  /** One unknown of the caller's team with its revisions, newest first (who made each, and when). */
  /** The team's unknown, or not_found (another team's unknown is not visible, so not found either). */
  private async visibleUnknown(caller: Principal, unknownId: string) {
    const unknown = await this.store.unknowns.get(caller.team, unknownId);
    if (!unknown) {
      throw new DossierError(
        'not_found',
        `No unknown ${unknownId} is visible to your team.`,
        'list_unknowns shows your team’s unknowns.',
        { unknown_id: unknownId },
      );
    }
    return unknown;
  }

  async getUnknown(
    caller: Principal,
    input: { unknown_id: string; before_revision?: number; history_limit: number },
  ) {
    const unknown = await this.visibleUnknown(caller, input.unknown_id);
    const history = await this.store.unknowns.history(caller.team, input.unknown_id, {
      beforeRevision: input.before_revision,
      limit: input.history_limit + 1,
    });
    // Revisions kept within the reply budget too (a note is up to 4 KB); the rest is one call away.
    let kept = history.slice(0, input.history_limit);
    const reply = (h: typeof kept) => ({
      unknown,
      history: h,
      next_before_revision: h.length < history.length ? h[h.length - 1]!.revision : null,
    });
    while (kept.length > 1 && replyBytes(reply(kept)) > this.replyBudgetBytes) kept = kept.slice(0, -1);
    return reply(kept);
  }

  async listUnknowns(caller: Principal, filter: UnknownFilter) {
    return fitList('unknowns', await this.store.unknowns.list(caller.team, filter), this.replyBudgetBytes);
  }

  private async requireEvidence(caller: Principal, ids: string[]) {
    for (const id of ids) await findEvidence(this.store.evidence, caller.team, id);
  }

  /**
   * Delivers a producing tool's result within its budget: unless it asks for
   * detail "complete" (up to the reply budget), the whole tools/call result on
   * the wire fits the first-reply budget. Complete when it fits, otherwise its
   * summary plus a continuation page request that fits the same budget. Never cut.
   */
  async deliver(
    caller: Principal,
    reply: Record<string, unknown>,
    detail: Detail,
  ): Promise<Record<string, unknown>> {
    const evidenceId = reply.evidence_id as string | undefined;
    if (!evidenceId) return reply;
    const record = await findEvidence(this.store.evidence, caller.team, evidenceId);
    const [budget, fits]: [number, Fits] =
      detail === 'complete'
        ? [this.replyBudgetBytes, (v) => replyBytes(v) <= this.replyBudgetBytes]
        : [this.firstReplyBytes, (v) => wireBytes(v) <= this.firstReplyBytes];
    const collections = Object.entries(record.collections);
    // The team's names, applied as the answer is delivered: the retained answer keeps the provider's.
    const named = Overlay.applies(record);
    if (named) reply.summary = await this.overlay.head(caller.team, record, reply.summary as Row);
    const estimate =
      replyBytes(reply) +
      record.document.bytes +
      collections.reduce((n, [name, c]) => n + c.bytes + name.length + 8, 64);
    if (detail !== 'summary' && estimate <= budget) {
      const [document, stored] = await Promise.all([
        this.store.evidence.document(caller.team, evidenceId),
        this.store.evidence.allCollections(evidenceId),
      ]);
      // Empty collections have no rows in the store; the complete result still names them.
      const rows = Object.fromEntries(collections.map(([name]) => [name, stored[name] ?? []]));
      if (named)
        for (const [name, list] of Object.entries(rows))
          rows[name] = await this.overlay.rows(caller.team, record, name, list as Row[]);
      // What was capped or left out says so in every shape of the reply, the complete one too.
      const complete = {
        ...reply,
        detail: 'complete',
        result: {
          document: named ? await this.overlay.head(caller.team, record, document, true) : document,
          collections: rows,
        },
        truncated: record.truncated,
        limitations: record.limitations,
      };
      if (fits(complete)) return complete;
    }
    const summarized = {
      ...reply,
      detail: 'summary',
      collections: Object.fromEntries(
        collections.map(([name, c]) => [name, { rows: c.rows, filterable: c.filterable }]),
      ),
      truncated: record.truncated,
      limitations: record.limitations,
    };
    const continuation = await this.continuation(record, fits);
    const out = continuation ? { ...summarized, complete_bytes: estimate, continuation } : summarized;
    return fits(out) ? out : shrink(out, fits);
  }

  /** The first page request of the largest collection whose reply (a page view) fits the same budget. */
  private async continuation(record: EvidenceRecord, fits: Fits) {
    // The contract's primary collection first (trace_feature: references), else the largest.
    const preferred = TOOLS_BY_NAME.get(record.tool)?.primaryCollection;
    const largest = Object.entries(record.collections).sort((a, b) => b[1].rows - a[1].rows)[0];
    const collection = preferred && record.collections[preferred]?.rows ? preferred : largest?.[0];
    if (!collection || !record.collections[collection]?.rows) return undefined;
    const page = await pageView(this.store.evidence, record, {
      kind: 'page',
      collection,
      offset: 0,
      limit: PAGE_LIMIT.default,
    });
    const fitted = fitPage(page, (p) => fits({ ...p }));
    // Pass it as `view` to inspect_analysis_view with this reply's evidence_id.
    return { kind: 'page' as const, collection, offset: 0, limit: Math.max(1, fitted.rows.length) };
  }
}

/** Limitations a reply that must shrink keeps (the rest are one summary view away). */
const KEPT_LIMITATIONS = 3;

const SUMMARY_VIEW = 'inspect_analysis_view {view: {kind: "summary"}}';

/**
 * A summarized reply over its budget (a summary or limitations that large),
 * made to fit by leaving out, in turn, the collections' filterable fields, all
 * but the first limitations, and the summary itself, each saying where the
 * rest is; whatever remains over the budget is the launch's own record.
 */
function shrink(reply: Record<string, unknown>, fits: Fits): Record<string, unknown> {
  const collections = reply.collections as Record<string, { rows: number }>;
  let out: Record<string, unknown> = {
    ...reply,
    collections: Object.fromEntries(Object.entries(collections).map(([n, c]) => [n, { rows: c.rows }])),
  };
  if (fits(out)) return out;
  const limitations = reply.limitations as string[];
  if (limitations.length > KEPT_LIMITATIONS) {
    out = {
      ...out,
      limitations: [
        ...limitations.slice(0, KEPT_LIMITATIONS),
        `…and ${limitations.length - KEPT_LIMITATIONS} more: ${SUMMARY_VIEW} lists them all.`,
      ],
    };
    if (fits(out)) return out;
  }
  const { summary, ...rest } = out;
  if (summary === undefined) return out;
  return { ...rest, summary_omitted: `${replyBytes(summary)} bytes: ${SUMMARY_VIEW} shows it.` };
}
