// The checked writer every extraction feeds entries to. Every entry is
// checked before anything is written: absolute and `..` paths, paths through a
// recorded link, paths too deep and duplicates are refused and recorded; links
// are recorded, never created. Content is written into a staging tree with
// O_EXCL|O_NOFOLLOW, hashed and counted as it streams; a bound exceeded or a
// corrupt archive fails the extraction and removes the staging tree, so no
// partial tree is left. Entries of nested archives (recursive extraction) go
// through the same writer under `<archive path>.extracted/`, so bounds are global.
// It runs in the extraction thread (unpackThread.ts), which does nothing else, and
// writes synchronously: a thread-pool hop per piece cost more than the write (a
// stalled disk holds that thread's cancels and clocks until the write returns).
import { createHash } from 'node:crypto';
import { closeSync, constants, existsSync, mkdirSync, openSync, rmSync, writeSync } from 'node:fs';
import { mkdir, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { DossierError } from '../../domain/errors.ts';
import type { ExtractInput } from '../../tools/extract.ts';
import { cancelledExtraction, sniff, tooBig, tooDense, tooMany, type ArchiveEntry } from './archives.ts';
import type { ExtractionContext } from '../effect.ts';
import { outputOf } from '../workspaces/workspaces.ts';
import { HEAD_BYTES, OPENABLE, UNBLOB_KINDS } from './kinds.ts';

export interface ManifestRow {
  occurrence: number;
  path: string;
  type: ArchiveEntry['type'];
  size: number | null;
  sha256: string | null;
  /** A written file's digest as tools take it ("sha256:…"): pass it as `artifact` to analyse the entry. */
  artifact: string | null;
  detected_type: string | null;
  nested_archive: boolean;
  link_target: string | null;
  /** Written with the execute bits (the archive marked it executable); no other mode bit is ever kept. */
  executable: boolean;
  status: 'written' | 'recorded' | 'refused';
  reason: string | null;
  /** How many archives deep the entry was found: 0 in the artifact itself. */
  depth: number;
  /** The output path of the nested archive the entry came from (null at depth 0). */
  parent: string | null;
  /** The entry's own name inside that archive (its path in the artifact at depth 0). */
  inner_path: string;
  /** For a nested archive opened by a recursive extraction: the folder its entries went to. */
  extracted_to: string | null;
}

/** An entry's path as written: no empty or "." components. */
export const normalized = (name: string) =>
  name
    .split('/')
    .filter((p) => p !== '' && p !== '.')
    .join('/');

/** Why a name may not be written, or null when it is safe. */
export function unsafeName(name: string, maxDepth: number): string | null {
  if (name.length === 0) return 'empty name';
  if (name.includes('\0')) return 'NUL in name';
  if (name.startsWith('/') || /^[A-Za-z]:/.test(name)) return 'absolute path';
  const parts = name.split('/').filter((p) => p !== '' && p !== '.');
  if (parts.includes('..')) return 'path escapes the output directory (..)';
  if (parts.length === 0) return 'empty name';
  if (parts.length > maxDepth) return `deeper than max_depth=${maxDepth}`;
  // What Linux can create: a component of at most 255 bytes, a path of at most 4,095 (with the output folder's own).
  if (parts.some((p) => Buffer.byteLength(p) > 255)) return 'a name component longer than 255 bytes';
  if (Buffer.byteLength(parts.join('/')) > 3_000) return 'a path longer than 3,000 bytes';
  return null;
}

interface EntryOrigin {
  depth: number;
  parent: string | null;
}
const TOP: EntryOrigin = { depth: 0, parent: null };
/** A nested archive's entries go to a folder beside it: `<its path>.extracted/`. */
export const NESTED_SUFFIX = '.extracted';

/** Every bound an extraction's bytes count against, and its clock. */
class Budget {
  total = 0;
  constructor(
    private readonly signal: AbortSignal,
    private readonly limits: ExtractInput['limits'],
    private readonly archiveBytes: number,
    private readonly teamBytes: number,
    private readonly deadline: number,
    private readonly timeoutMs: number,
  ) {}

  checkClock() {
    if (this.signal.aborted) throw cancelledExtraction();
    if (Date.now() > this.deadline) {
      throw new DossierError(
        'provider_timeout',
        `The extraction ran past timeout_ms=${this.timeoutMs}.`,
        'Raise timeout_ms or split the archive.',
      );
    }
  }

  /** Counts `n` more bytes of an entry (its size so far given) against every bound; returns its new size. */
  count(n: number, size: number, rel: string) {
    const { limits } = this;
    const now = size + n;
    this.total += n;
    const total = this.total;
    if (now > limits.max_entry_bytes) {
      throw new DossierError(
        'resource_constraint',
        `Entry ${rel} unpacks to more than max_entry_bytes=${limits.max_entry_bytes}; the extraction was rolled back.`,
        'Raise limits.max_entry_bytes (up to its ceiling) with a new idempotency_key if this is expected.',
        { path: rel, max_entry_bytes: limits.max_entry_bytes },
      );
    }
    if (total > limits.max_total_bytes) throw tooBig(total, limits.max_total_bytes);
    if (total > this.teamBytes) throw overTeamBound(total, this.teamBytes);
    if (total > limits.max_ratio * Math.max(this.archiveBytes, 1))
      throw tooDense(total, this.archiveBytes, limits.max_ratio);
    // Once per MiB or so: a reader that emits a long run of bytes still notices a cancel or the clock.
    if ((total & 0xfffff) < n) this.checkClock();
    return now;
  }
}

/** The manifest row of an entry, refused until it is written or recorded. */
function newRow(entry: ArchiveEntry, inner: ArchiveEntry, at: EntryOrigin, occurrence: number): ManifestRow {
  return {
    occurrence,
    path: entry.name,
    type: entry.type,
    size: null,
    sha256: null,
    artifact: null,
    detected_type: null,
    nested_archive: false,
    link_target: entry.linkTarget,
    executable: entry.type === 'file' && Boolean(entry.executable),
    status: 'refused',
    reason: null,
    depth: at.depth,
    parent: at.parent,
    inner_path: inner.name,
    extracted_to: null,
  };
}

/** A piece written whole, synchronously (see the header; docs/benchmarks.md has the figures). */
function writeAll(fd: number, buf: Buffer) {
  for (let at = 0; at < buf.length;) {
    const n = writeSync(fd, buf, at);
    if (n === 0) throw new Error('the disk took none of the bytes written');
    at += n;
  }
}

/** Writes a file entry's bytes (never through a link, never over a file), hashing them and sniffing its head. */
async function writeFile(
  target: string,
  entry: ArchiveEntry,
  row: ManifestRow,
  count: (n: number, size: number) => number,
): Promise<void> {
  const fd = openSync(
    target,
    constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
    entry.executable ? 0o755 : 0o644,
  );
  const hash = createHash('sha256');
  let size = 0;
  const heads: Buffer[] = [];
  let headBytes = 0;
  try {
    for await (const chunk of entry.content!) {
      const buf = chunk as Buffer;
      size = count(buf.length, size);
      if (headBytes < HEAD_BYTES) {
        const piece = Buffer.from(buf.subarray(0, HEAD_BYTES - headBytes));
        heads.push(piece);
        headBytes += piece.length;
      }
      hash.update(buf);
      writeAll(fd, buf);
    }
  } catch (err) {
    // Never leave a partial file behind a nested archive that is reported failed and kept.
    try {
      closeSync(fd);
    } finally {
      rmSync(target, { force: true });
    }
    row.reason = `not written: ${(err as Error).message}`;
    throw err;
  }
  closeSync(fd);
  const kind = sniff(Buffer.concat(heads));
  const hex = hash.digest('hex');
  Object.assign(row, {
    size,
    sha256: hex,
    artifact: `sha256:${hex}`,
    detected_type: kind,
    nested_archive: OPENABLE.has(kind) || UNBLOB_KINDS.has(kind),
    status: 'written',
    reason: null,
  });
}

/** On failure remove everything staged; on success move it into place, whole. */
async function settle(
  staging: string,
  output: string,
  failure: unknown,
): Promise<{ staging_removed: boolean; output: string | null }> {
  if (failure) {
    await rm(staging, { recursive: true, force: true });
    return { staging_removed: !existsSync(staging), output: null };
  }
  await mkdir(path.dirname(output), { recursive: true });
  await rename(staging, output); // the output directory is created exactly once, whole
  return { staging_removed: true, output };
}

/** The bounded, checked writer every extraction feeds entries to; see the file comment. */
export async function startExtraction(
  ctx: ExtractionContext,
  limits: ExtractInput['limits'],
  archiveBytes: number,
  timeoutMs: number,
) {
  const staging = path.join(ctx.workspace, 'out');
  const output = outputOf(ctx.config.home, ctx.caller.team, ctx.workspace);
  // One launch may not keep more than its whole team may (DOSSIER_TEAM_WORKSPACE_BYTES).
  const teamBytes = ctx.config.teamWorkspaceBytes;
  await mkdir(staging);
  const deadline = Date.now() + timeoutMs;
  const rows: ManifestRow[] = [];
  const taken = new Map<string, ArchiveEntry['type']>(); // normalized path → what occupies it
  let written = 0;

  const budget = new Budget(ctx.signal, limits, archiveBytes, teamBytes, deadline, timeoutMs);
  const checkClock = () => budget.checkClock();
  const count = (n: number, size: number, rel: string) => budget.count(n, size, rel);

  const onEntry = async (inner: ArchiveEntry, at: EntryOrigin = TOP) => {
    const entry =
      at.parent === null
        ? inner
        : { ...inner, name: `${at.parent}${NESTED_SUFFIX}/${inner.name.replace(/^(\.\/+)+/, '')}` };
    if (rows.length >= limits.max_entries) throw tooMany(rows.length + 1, limits.max_entries);
    checkClock();
    const row = newRow(entry, inner, at, rows.length);
    rows.push(row);
    // A refused entry's bytes are still read (the next entry may follow them in the same stream)
    // and counted against the bounds, but written nowhere.
    const refuse = async (reason: string) => {
      row.reason = reason;
      if (entry.content) for await (const chunk of entry.content) count((chunk as Buffer).length, 0, rel);
    };
    const rel = normalized(entry.name);
    if (entry.type === 'dir' && /^(\.\/?)*$/.test(row.inner_path)) {
      row.status = 'written'; // the archive's own root, "./": it is the output directory (or the nested one's folder)
      return;
    }
    // A nested entry's own name is checked too: "/etc/passwd" under a prefix is still an absolute name.
    const bad =
      unsafeName(entry.name, limits.max_depth) ??
      (at.parent === null ? null : unsafeName(row.inner_path, limits.max_depth));
    if (bad) return refuse(bad);
    const parts = rel.split('/');
    const folders = parts.slice(1).map((_, i) => parts.slice(0, i + 1).join('/'));
    for (const folder of folders) {
      const occupant = taken.get(folder);
      if (occupant && occupant !== 'dir') return refuse(`path goes through a ${occupant} entry (${folder})`);
    }
    if (entry.type === 'symlink' || entry.type === 'hardlink') {
      if (taken.has(rel)) return refuse('duplicate path');
      taken.set(rel, entry.type);
      row.status = 'recorded';
      row.reason = 'links are recorded, never created';
      return;
    }
    if (entry.type === 'other')
      return refuse(entry.kind ? `not extracted: ${entry.kind}` : 'device, fifo or other special entry');
    const target = path.join(staging, rel);
    if (!target.startsWith(`${staging}/`)) return refuse('path escapes the output directory');
    if (entry.type === 'dir') {
      if (taken.has(rel) && taken.get(rel) !== 'dir') return refuse('duplicate path');
      taken.set(rel, 'dir');
      claimFolders(taken, folders);
      mkdirSync(target, { recursive: true });
      row.status = 'written';
      return;
    }
    if (taken.has(rel)) return refuse('duplicate path');
    taken.set(rel, 'file');
    claimFolders(taken, folders);
    mkdirSync(path.dirname(target), { recursive: true });
    await writeFile(target, entry, row, (n, size) => count(n, size, rel));
    written++;
    ctx.progress({ phase: 'extracting', entries: rows.length, written, bytes: budget.total });
  };

  /** Feeds a nested archive's entries to the writer under `<its path>.extracted/`, one level deeper. */
  const nestedIn = (row: ManifestRow) => {
    const at: EntryOrigin = { depth: row.depth + 1, parent: normalized(row.path) };
    return (entry: ArchiveEntry) => onEntry(entry, at);
  };

  return {
    onEntry,
    nestedIn,
    checkClock,
    rows,
    settle: (failure: unknown) => settle(staging, output, failure),
    stats: () => ({ total: budget.total, written }),
    /** Where a written entry is in the staging tree (only before settle). */
    staged: (row: ManifestRow) => path.join(staging, normalized(row.path)),
    /** Whether an entry (or a folder an entry is in) already holds this path. */
    holds: (rel: string) => taken.has(normalized(rel)),
  };
}

/** An entry's folders exist once it is written, listed or not: a file of a folder's name later is a duplicate. */
function claimFolders(taken: Map<string, ArchiveEntry['type']>, folders: string[]) {
  for (const folder of folders) if (!taken.has(folder)) taken.set(folder, 'dir');
}

function overTeamBound(bytes: number, max: number) {
  return new DossierError(
    'resource_constraint',
    `The archive unpacks to more than ${max} bytes, all that one team may keep on a worker (DOSSIER_TEAM_WORKSPACE_BYTES); the extraction was rolled back.`,
    'Extract a smaller archive (or part of it), or ask an admin to raise DOSSIER_TEAM_WORKSPACE_BYTES.',
    { bytes, team_workspace_bytes: max },
  );
}

/** Milliseconds left until a deadline set now, at least one second (helpers need some time to fail cleanly). */
export function deadline(timeoutMs: number): () => number {
  const end = Date.now() + timeoutMs;
  return () => Math.max(1_000, end - Date.now());
}

/** The most detected types a summary counts one by one; the rest are counted together. */
const MAX_SUMMARY_TYPES = 32;

/** The folders an extraction made (its own root among them): rows of status "written" that hold no file. */
export function foldersOf(rows: readonly ManifestRow[]): number {
  let folders = 0;
  for (const r of rows) if (r.type === 'dir' && r.status === 'written') folders++;
  return folders;
}

/**
 * How many written files of each detected type (most first), and the inspect_analysis_view view
 * that pages one type's entries, so a caller finds the ELF files without guessing a filter value.
 */
export function typeCounts(rows: readonly ManifestRow[]): {
  detected_types: Record<string, number>;
  view_by_type?: { kind: 'page'; collection: 'entries'; where: { detected_type: [string] } };
} {
  const counts = new Map<string, number>();
  for (const r of rows)
    if (r.status === 'written' && r.detected_type)
      counts.set(r.detected_type, (counts.get(r.detected_type) ?? 0) + 1);
  const sorted = [...counts].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
  const detected_types = Object.fromEntries(sorted.slice(0, MAX_SUMMARY_TYPES));
  const rest = sorted.slice(MAX_SUMMARY_TYPES).reduce((n, [, c]) => n + c, 0);
  if (rest) detected_types['(other types)'] = rest;
  const first = counts.has('elf') ? 'elf' : sorted[0]?.[0];
  return first
    ? {
        detected_types,
        view_by_type: { kind: 'page', collection: 'entries', where: { detected_type: [first] } },
      }
    : { detected_types };
}
