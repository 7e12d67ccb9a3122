// What unblob's tree means for the manifest: how deep each of its entries
// lies (one level per `…_extract/` folder above it), which files unblob itself
// opened (their `…_extract/` folder is beside them, unless the input held that
// folder itself), and its recursion tree as
// rows of the `archives` collection. Files of a kind only unblob reads that it
// did not open are not handed to it again; dossier's own readers still open
// what unblob left (a squashfs, whose extractor unblob lacks here).
import { MAX_ROWS, type UnblobFacts } from './unblob.ts';
import type { ArchiveRow } from './readArchive.ts';
import { UNBLOB_KINDS } from './kinds.ts';
import { NESTED_SUFFIX, normalized, type ManifestRow } from './writer.ts';

const EXTRACT = '_extract';

export function settleUnblobRows(
  rows: ManifestRow[],
  from: number,
  facts: UnblobFacts,
  baseDepth: number,
  parent: string,
  settled: Set<ManifestRow>,
): ArchiveRow[] {
  const dirs = new Set<string>();
  const counts = new Map<string, number>();
  for (let i = from; i < rows.length; i++) {
    const row = rows[i]!;
    const rel = normalized(row.path);
    if (row.type === 'dir') dirs.add(rel);
    const parts = normalized(row.inner_path).split('/');
    let prefix = '';
    for (const part of parts.slice(0, -1)) {
      prefix = prefix ? `${prefix}/${part}` : part;
      if (!part.endsWith(EXTRACT)) continue;
      row.depth++;
      counts.set(prefix, (counts.get(prefix) ?? 0) + 1);
    }
  }
  // A folder named like unblob's that the input itself held is not what unblob unpacked (it skips a
  // file whose folder exists): the file beside it is not settled by it.
  const existing = facts.existing_dirs === null ? null : new Set((facts.existing_dirs ?? []).map(normalized));
  const unpackedBy = (row: ManifestRow) =>
    existing !== null && !existing.has(`${normalized(row.inner_path)}${EXTRACT}`);
  for (let i = from; i < rows.length; i++) {
    const row = rows[i]!;
    if (row.type !== 'file' || row.status !== 'written') continue;
    const rel = normalized(row.path);
    if (dirs.has(`${rel}${EXTRACT}`) && unpackedBy(row)) {
      row.extracted_to = `${rel}${EXTRACT}`;
      settled.add(row);
    } else if (row.nested_archive && UNBLOB_KINDS.has(row.detected_type ?? '')) {
      row.reason =
        'nested archive not opened: unblob did not unpack it (its depth reached, or see unblob.errors)';
      settled.add(row);
    }
  }
  const base = parent ? `${parent}${NESTED_SUFFIX}/` : '';
  return facts.tree
    .filter((node) => node.depth > 0 && node.path)
    .slice(0, MAX_ROWS)
    .map((node) => ({
      path: `${base}${node.path}`,
      depth: baseDepth + node.depth,
      format: node.handlers.join('+') || 'unknown',
      status: 'opened' as const,
      entries: counts.get(`${node.path}${EXTRACT}`) ?? 0,
      reason: null,
      facts: null,
      reader: 'unblob' as const,
    }));
}
