// The ledger behind the gateway's read and unknown tools, and the delivery of
// producing tools' results within the reply budget.
import { DossierError } from '../domain/errors.ts';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { detectType, storeArtifact, storeArtifactFile } from '../evidence/artifacts.ts';
import { TOOLS_BY_NAME } from '../tools/catalog.ts';
import { BUNDLE_LIMITS, PAGE_LIMIT, UPLOAD_LIMIT } from '../tools/ledger.ts';
import { openUnder } from '../sandbox/paths.ts';
import type { Sandbox } from '../sandbox/sandbox.ts';
import { verifyBundle } from '../evidence/bundles.ts';
import { completePromptArgument } from './completion.ts';
import { fitList } from './lists.ts';
import { unknownId } from '../domain/evidence.ts';
import type { EvidenceFilter } from '../store/evidence.ts';
import type { Store } from '../store/store.ts';
import type { UnknownFilter } from '../store/unknowns.ts';
import type { EvidenceRecord, Principal, UnknownStatus } from '../domain/types.ts';
import { findEvidence, fitPage, pageView, summaryView, type ViewRequest } from '../evidence/views.ts';

/** Bytes a reply takes on the wire as MCP text content (its JSON). */
export const replyBytes = (value: unknown) => Buffer.byteLength(JSON.stringify(value));

export interface LedgerOptions {
  replyBudgetBytes: number;
  /** Folders bundles are imported from. */
  bundleRoots?: string[];
  /** Where the artifact directory lives, the folders artifacts are registered from, and the upload cap. */
  home?: string;
  allowedRoots?: string[];
  uploadLimit?: number;
  /** Where helpers that read untrusted bytes (file) run. */
  sandbox?: Sandbox;
}

export class Ledger {
  readonly replyBudgetBytes: number;
  private readonly bundleRoots: string[];

  constructor(
    private readonly store: Pick<Store, 'evidence' | 'unknowns' | 'artifacts' | 'candidates' | 'analyses'>,
    private readonly opts: LedgerOptions,
  ) {
    this.replyBudgetBytes = opts.replyBudgetBytes;
    this.bundleRoots = opts.bundleRoots ?? [];
  }

  /** Copies a file from under the allowed roots: opened first, then checked, so a swapped link reads nothing. */
  async registerArtifact(caller: Principal, file: string, name?: string) {
    const opened = await openUnder(file, this.opts.allowedRoots ?? [], 'DOSSIER_ALLOWED_ROOTS');
    try {
      const stored = await storeArtifactFile(
        this.home(),
        opened.handle.fd,
        this.opts.uploadLimit ?? UPLOAD_LIMIT.default,
      );
      return await this.recordArtifact(caller, stored, name ?? path.basename(file), `path:${opened.real}`);
    } finally {
      await opened.handle.close();
    }
  }

  async uploadArtifact(caller: Principal, body: Readable, name: string | undefined) {
    const stored = await storeArtifact(this.home(), body, this.opts.uploadLimit ?? UPLOAD_LIMIT.default);
    return this.recordArtifact(caller, stored, name ?? null, 'upload');
  }

  async listArtifacts(caller: Principal, filter: { cursor?: string; limit: number }) {
    return fitList('artifacts', await this.store.artifacts.list(caller.team, filter), this.replyBudgetBytes);
  }

  private async recordArtifact(
    caller: Principal,
    stored: { digest: string; size: number; file: string },
    name: string | null,
    origin: string,
  ) {
    const type = await detectType(this.sandbox(), stored.file);
    const { created, artifact } = await this.store.artifacts.put(caller.team, {
      digest: stored.digest,
      size: stored.size,
      ...type,
      name,
      origin,
      registered_by: caller.principal,
      created_at: new Date().toISOString(),
    });
    return { created, artifact };
  }

  /** Prompt-argument completion over this team's live records (never an error: empty instead). */
  complete(
    caller: Principal,
    prompt: string,
    argument: string,
    typed: string,
    context?: Record<string, string>,
  ) {
    return completePromptArgument(this.store, caller, prompt, argument, typed, context);
  }

  private sandbox(): Sandbox {
    if (!this.opts.sandbox) throw new Error('the ledger was built without a sandbox');
    return this.opts.sandbox;
  }

  private home(): string {
    if (!this.opts.home) throw new Error('the ledger was built without DOSSIER_HOME');
    return this.opts.home;
  }

  /**
   * Imports a bundle from the caller's team folder under a bundle root
   * (`<root>/<team>/…`, where exports land); any other path, another team's
   * included, is not_found. Every record must be the caller's team's.
   */
  async importBundle(caller: Principal, file: string) {
    const teamRoots = this.bundleRoots.map((root) => path.join(root, caller.team));
    const opened = await openUnder(file, teamRoots, 'DOSSIER_BUNDLE_ROOTS').catch((err: unknown) => {
      if (err instanceof DossierError && err.code !== 'not_found' && err.code !== 'policy_denied') throw err;
      throw new DossierError(
        'not_found',
        `No bundle of your team at ${file}.`,
        `Bundles are imported from your team's folder: ${teamRoots.join(', ')}/…; pass the path export_evidence_bundle reported, or copy the bundle there.`,
        { path: file },
      );
    });
    let text: string;
    try {
      if (opened.stat.size > BUNDLE_LIMITS.bytes.max) {
        throw new DossierError(
          'resource_constraint',
          `${file} has ${opened.stat.size} bytes, more than a bundle may (${BUNDLE_LIMITS.bytes.max}).`,
          'Export smaller bundles.',
          { bytes: opened.stat.size },
        );
      }
      text = await opened.handle.readFile('utf8');
    } finally {
      await opened.handle.close();
    }
    const built = verifyBundle(text);
    const foreign = built.find((b) => b.record.team !== caller.team);
    if (foreign) {
      throw new DossierError(
        'policy_denied',
        `The bundle holds Evidence of another team (${foreign.record.evidence_id}); it was refused whole and nothing was imported.`,
        "Import only bundles of your team's Evidence.",
        { evidence_id: foreign.record.evidence_id },
      );
    }
    const { imported, present } = await this.store.evidence.importAll(caller.team, built);
    return { imported, already_present: present, evidence_ids: built.map((b) => b.record.evidence_id) };
  }

  async inspect(caller: Principal, evidenceId: string, view: ViewRequest) {
    const record = await findEvidence(this.store.evidence, caller.team, evidenceId);
    if (view.kind === 'summary') return { ...summaryView(record) };
    const page = await pageView(this.store.evidence, record, view);
    return { ...fitPage(page, (p) => replyBytes(p) <= this.replyBudgetBytes) };
  }

  async get(caller: Principal, evidenceId: string) {
    return { evidence: await findEvidence(this.store.evidence, caller.team, evidenceId) };
  }

  async list(caller: Principal, filter: EvidenceFilter) {
    return fitList('evidence', await this.store.evidence.list(caller.team, filter), this.replyBudgetBytes);
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
   * Delivers a producing tool's result: complete when it fits the reply budget,
   * otherwise its summary plus a continuation page request that fits. Never cut.
   */
  async deliver(
    caller: Principal,
    reply: Record<string, unknown>,
    detail: 'complete' | 'summary',
  ): Promise<Record<string, unknown>> {
    const evidenceId = reply.evidence_id as string | undefined;
    if (!evidenceId) return reply;
    const record = await findEvidence(this.store.evidence, caller.team, evidenceId);
    const collections = Object.entries(record.collections);
    const estimate =
      replyBytes(reply) +
      record.document.bytes +
      collections.reduce((n, [name, c]) => n + c.bytes + name.length + 8, 64);
    if (detail === 'complete' && estimate <= this.replyBudgetBytes) {
      const [document, stored] = await Promise.all([
        this.store.evidence.document(caller.team, evidenceId),
        this.store.evidence.allCollections(evidenceId),
      ]);
      // Empty collections have no rows in the store; the complete result still names them.
      const rows = Object.fromEntries(collections.map(([name]) => [name, stored[name] ?? []]));
      const complete = { ...reply, detail: 'complete', result: { document, collections: rows } };
      if (replyBytes(complete) <= this.replyBudgetBytes) return complete;
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
    const continuation = await this.continuation(record);
    return continuation ? { ...summarized, complete_bytes: estimate, continuation } : summarized;
  }

  /** The first page request of the largest collection whose reply fits the budget. */
  private async continuation(record: EvidenceRecord) {
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
    const fitted = fitPage(page, (p) => replyBytes(p) <= this.replyBudgetBytes);
    // Pass it as `view` to inspect_analysis_view with this reply's evidence_id.
    return { kind: 'page' as const, collection, offset: 0, limit: Math.max(1, fitted.rows.length) };
  }
}
