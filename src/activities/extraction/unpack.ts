// Reading an extraction into the checked writer (writer.ts): the artifact,
// and with recursive: true every nested archive the writer wrote, level by
// level, under the same global bounds (each archive read by readArchive.ts).
// This runs in the extraction thread (unpackThread.ts), away from the
// gateway's and worker's event loop and heap.
import path from 'node:path';
import { DossierError, toToolError, type ToolError } from '../../domain/errors.ts';
import type { ExtractInput } from '../../tools/extract.ts';
import type { ExtractionContext } from '../effect.ts';
import { formatOf, type ArchiveFormat } from './detect.ts';
import { readArchive, type ArchiveRow, type FormatFacts, type ReadPlan } from './readArchive.ts';
import type { UnblobFacts } from './unblob.ts';
import { settleUnblobRows } from './unblobRows.ts';
import { NESTED_SUFFIX, normalized, startExtraction, type ManifestRow } from './writer.ts';

export type { ArchiveRow };

/** Errors that end the whole extraction (a bound, a cancel, the clock); others only end one nested archive. */
function endsExtraction(err: unknown): boolean {
  return (
    !(err instanceof DossierError) ||
    ['resource_constraint', 'cancelled', 'provider_timeout', 'integrity_error', 'internal'].includes(err.code)
  );
}

/** One extraction's reading and writing, as the worker thread receives it. */
export interface UnpackJob {
  input: Pick<ExtractInput, 'limits' | 'recursive' | 'max_depth' | 'timeout_ms'>;
  file: string;
  format: Exclude<ArchiveFormat, 'auto'>;
  /** The artifact's name, for single-stream and image entries. */
  name: string;
  archiveBytes: number;
  /** When the extraction's timeout_ms runs out (epoch ms). */
  deadlineAt: number;
}

export interface UnpackOutcome {
  rows: ManifestRow[];
  archives: ArchiveRow[];
  /** What unblob reported for each file it read (its output path, "" for the artifact). */
  unblob: { at: string; facts: UnblobFacts }[];
  error: ToolError | null;
  cleanup: { staging_removed: boolean; output: string | null };
  total: number;
  written: number;
}

type Run = Awaited<ReturnType<typeof startExtraction>>;

/** One extraction under way: its run in the writer, and what it has found of the archives in it. */
class Unpacking {
  readonly archives: ArchiveRow[] = [];
  readonly unblob: { at: string; facts: UnblobFacts }[] = [];
  /** Rows unblob already opened or tried (its recursion is its own): never opened again here. */
  private readonly settled = new Set<ManifestRow>();

  constructor(
    private readonly job: UnpackJob,
    private readonly ctx: ExtractionContext,
    readonly run: Run,
  ) {}

  get rows(): ManifestRow[] {
    return this.run.rows;
  }

  /** The time left before the extraction's deadline (at least a second, for a last reader to fail). */
  left(): number {
    return Math.max(1_000, this.job.deadlineAt - Date.now());
  }

  /** One archive's reading, with the global bounds that are left. */
  plan(format: ReadPlan['format'], file: string, name: string, depth = 0): ReadPlan {
    const { input, archiveBytes } = this.job;
    const { limits } = input;
    const { total } = this.run.stats();
    return {
      levels: input.recursive ? input.max_depth - depth + 1 : 1,
      format,
      file,
      name,
      entriesLeft: limits.max_entries - this.rows.length,
      bytesLeft: limits.max_total_bytes - total,
      ratioBytesLeft: limits.max_ratio * Math.max(archiveBytes, 1) - total,
      archiveBytes,
      maxRatio: limits.max_ratio,
      timeoutMs: this.left(),
    };
  }

  /** Where unblob read, its own recursion becomes rows of `archives`, and its files are settled. */
  afterUnblob(facts: FormatFacts, from: number, depth: number, parent: string): void {
    const unblob = facts?.unblob as UnblobFacts | undefined;
    if (!unblob) return;
    this.archives.push(...settleUnblobRows(this.rows, from, unblob, depth, parent, this.settled));
    this.unblob.push({ at: parent, facts: unblob });
  }

  async readArtifact(): Promise<void> {
    const { job, rows } = this;
    const facts = await readArchive(this.ctx, this.plan(job.format, job.file, job.name), this.run.onEntry);
    this.archives.push({
      path: '',
      depth: 0,
      format: job.format,
      status: 'opened',
      entries: rows.length,
      reason: null,
      facts,
    });
    this.afterUnblob(facts, 0, 0, '');
  }

  /**
   * Recursive: every nested archive written so far is opened in turn, and those it holds after it,
   * under the same global bounds; rows grows while this loop runs.
   */
  async readNested(): Promise<void> {
    for (let i = 0; this.job.input.recursive && i < this.rows.length; i++) {
      const row = this.rows[i]!;
      if (!row.nested_archive || row.status !== 'written' || row.type !== 'file' || this.settled.has(row))
        continue;
      await this.openNested(row);
    }
  }

  private notOpened(
    row: ManifestRow,
    where: { path: string; depth: number },
    format: string | null,
    reason: string,
  ) {
    row.reason = reason;
    this.archives.push({ ...where, format, status: 'not_opened', entries: 0, reason, facts: null });
  }

  private async openNested(row: ManifestRow): Promise<void> {
    const { max_depth } = this.job.input;
    const where = { path: normalized(row.path), depth: row.depth + 1 };
    if (where.depth > max_depth)
      return this.notOpened(row, where, null, `nested archive not opened: max_depth=${max_depth} reached`);
    this.run.checkClock();
    const staged = this.run.staged(row);
    const inner = await formatOf(this.ctx.sandbox, staged, Math.min(60_000, this.left()), row.detected_type!);
    if (!inner.format)
      return this.notOpened(
        row,
        where,
        inner.kind,
        `nested archive not opened: dossier has no reader for ${inner.kind} here`,
      );
    const { rows } = this;
    const before = rows.length;
    const nested = `${where.path}${NESTED_SUFFIX}`;
    // The archive around it held that folder itself: what is there did not come from this one, and
    // none of this one's entries may be taken for it.
    if (this.run.holds(nested))
      return this.notOpened(
        row,
        where,
        inner.format,
        `nested archive not opened: ${nested} holds entries of the archive around it, which this one's would be mistaken for`,
      );
    try {
      const plan = this.plan(inner.format, staged, path.basename(where.path), where.depth);
      const facts = await readArchive(this.ctx, plan, this.run.nestedIn(row));
      row.extracted_to = nested;
      this.archives.push({
        ...where,
        format: inner.format,
        status: 'opened',
        entries: rows.length - before,
        reason: null,
        facts,
      });
      this.afterUnblob(facts, before, where.depth, where.path);
    } catch (err) {
      if (endsExtraction(err)) throw err;
      row.extracted_to = rows.length > before ? nested : null;
      row.reason = `nested archive could not be read completely (${(err as Error).message}); the ${rows.length - before} entries read before that are kept`;
      this.archives.push({
        ...where,
        format: inner.format,
        status: 'failed',
        entries: rows.length - before,
        reason: row.reason,
        facts: null,
      });
    }
  }
}

/**
 * Reads the artifact (and with recursive: true every nested archive) into the
 * checked writer, then publishes the output or rolls it back. Runs in the
 * extraction thread (unpackThread.ts).
 */
export async function unpack(job: UnpackJob, ctx: ExtractionContext): Promise<UnpackOutcome> {
  const run = await startExtraction(
    ctx,
    job.input.limits,
    job.archiveBytes,
    Math.max(1_000, job.deadlineAt - Date.now()),
  );
  const unpacking = new Unpacking(job, ctx, run);
  let failure: unknown;
  try {
    await unpacking.readArtifact();
    await unpacking.readNested();
  } catch (err) {
    failure = err;
  }
  const cleanup = await run.settle(failure);
  return {
    rows: run.rows,
    archives: unpacking.archives,
    unblob: unpacking.unblob,
    error: failure ? toToolError(failure) : null,
    cleanup,
    ...run.stats(),
  };
}
