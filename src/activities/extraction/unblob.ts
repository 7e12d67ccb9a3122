// unblob as the breadth reader: every format dossier has no reader of its own
// for, and the carver of firmware images. It runs in the sandbox, carving and
// extracting into its private in-memory /tmp sized for this extraction (the
// bytes bound), with a watchdog on the entries it makes (the entries bound),
// under the extraction's clock; dossier's wrapper streams the tree back as one
// tar, which goes through the same tar reader and checked writer as every
// other format. unblob's own file creation is never trusted: names, links,
// special files and every byte are checked again as they are written.
import { DossierError } from '../../domain/errors.ts';
import { unblobEnv } from '../../python/unblob.ts';
import { sandboxedEnv } from '../../python/venv.ts';
import { checkedOutput, stderrTail, streamHelper, type StreamingHelper } from '../../sandbox/helpers.ts';
import type { Sandbox } from '../../sandbox/sandbox.ts';
import { cancelledExtraction, corrupt, type OnEntry } from './archives.ts';
import { readTar } from './tar.ts';

/** The largest scratch space unblob gets (it is memory). */
export const UNBLOB_SCRATCH_MAX = 4 * 1024 ** 3;
const EXIT = { unreadable: 2, scratchFull: 3, tooMany: 4 } as const;
/** At or above this many bits per byte, an unknown chunk looks encrypted or compressed. */
export const HIGH_ENTROPY = 7.5;

export interface UnblobChunk {
  /** The file the chunk was found in ("" for the artifact itself), as written in the output. */
  path: string;
  depth: number;
  start: number;
  end: number;
  size: number;
  handler: string;
  kind: string;
  unknown: boolean;
  carved_to: string | null;
  /** Shannon entropy in bits per byte, for unknown chunks. */
  entropy: number | null;
  entropy_sampled: boolean;
  encrypted: boolean;
  extracted: boolean;
}

export interface UnblobFacts {
  seconds: number;
  depth: number;
  chunks: UnblobChunk[];
  chunk_count: number;
  handlers: Record<string, number>;
  tree: { path: string; depth: number; handlers: string[]; chunks: number }[];
  errors: { path: string; severity: string; kind: string; detail: string }[];
  counts: Record<string, number>;
  /** For firmware: the kind of the image when it is one chunk whole. */
  whole_file: string | null;
  /**
   * Folders of the tree named like unblob's (`x_extract/`) that unblob found already there, in the
   * input, and so did not extract into; null when there were too many to list (none is trusted).
   */
  existing_dirs: string[] | null;
  /** The facts were longer than the wrapper writes (4 MiB): its longest lists keep their first rows. */
  trimmed?: boolean;
  /**
   * firmware: the image's own chunks the tar leaves out, as the `dossier-top` line told them (the
   * reader carves them from the image itself: carveFirmware.ts), by their carved/ names.
   */
  carved_by_reader?: { name: string; start: number; end: number }[];
  version: string;
}

export interface UnblobRead {
  sandbox: Sandbox;
  python: string;
  file: string;
  /** artifact: unblob's own names; firmware: carved/0x<offset>.<kind> and <kind>-0x<offset>/ at the top. */
  mode: 'artifact' | 'firmware';
  /** Archive levels unblob may open, the file itself the first. */
  depth: number;
  /** Entries it may make in its scratch space (what the extraction may still write). */
  maxEntries: number;
  scratchBytes: number;
  timeoutMs: number;
  progress?: (facts: Record<string, unknown>) => void;
  /** Stops unblob when it aborts: a cancelled launch is not left carving until its time runs out. */
  signal?: AbortSignal;
  /**
   * firmware: called with the image's own chunks (depth 0, as the facts will list them) as soon as
   * unblob has found them, while it still extracts them; not called when it found none.
   */
  onTop?: (top: TopChunks) => void;
}

/** The image's own chunks, told before unblob extracts them. */
export type TopChunks = Pick<UnblobFacts, 'whole_file'> & {
  chunks: Pick<UnblobChunk, 'path' | 'depth' | 'start' | 'end' | 'size' | 'unknown' | 'kind'>[];
};

/** Reads a file through unblob into the writer; returns unblob's chunks, handlers, tree and errors. */
export async function readUnblob(read: UnblobRead, onEntry: OnEntry): Promise<UnblobFacts> {
  read.progress?.({ phase: 'preparing unblob' });
  const engine = await unblobEnv(read.python);
  const env = sandboxedEnv(engine);
  const scratch = Math.max(16 * 1024 * 1024, Math.min(read.scratchBytes, UNBLOB_SCRATCH_MAX));
  read.progress?.({ phase: 'unblob: carving and extracting' });
  const helper = streamHelper(read.sandbox, {
    program: env.python,
    pkg: 'python3 (the unblob venv: npm run provision:unpackers)',
    args: [
      env.script('unpack_unblob.py'),
      read.mode,
      String(Math.max(1, read.depth)),
      String(read.maxEntries),
      '/input/image',
    ],
    mounts: [...env.mounts, { host: read.file, inside: '/input/image' }],
    tmpBytes: scratch,
    // unblob's pool of two processes shares its queues through POSIX semaphores.
    shmBytes: 1024 * 1024,
    timeoutMs: read.timeoutMs,
    limits: { addressSpaceBytes: 4 * 1024 ** 3 },
    env: { PYTHONDONTWRITEBYTECODE: '1' },
    signal: read.signal,
  });
  const { ended: stderrEnded, lastLine } = stderrTail(helper, 8 * 1024 * 1024);
  const version = engine.version;
  // Heard only while this read lasts (a line after it has failed, a tar cut short, is not acted on),
  // and once: the image's chunks are told once, and each telling starts carving and a listing.
  let listening = true;
  if (read.onTop) {
    const onTop = read.onTop;
    onStderrLine(helper, 'dossier-top ', (line) => {
      // Anything but the chunks' rows is not used: the facts tell the same chunks at the end.
      const top = topChunks(line);
      if (!top || !listening) return;
      listening = false;
      onTop(top);
    });
  }
  const done = helper.done.catch(async (err: Error) => {
    if (err instanceof DossierError) throw err;
    await stderrEnded;
    const why = lastLine('unpack_unblob: ') ?? err.message;
    const exit = /failed \(exit (\d+)\)/.exec(err.message)?.[1];
    if (Number(exit) === EXIT.scratchFull)
      throw new DossierError(
        'resource_constraint',
        `What unblob unpacked does not fit in the ${scratch}-byte scratch space it was given.`,
        `The scratch space is what the extraction may still write (limits.max_total_bytes, and limits.max_ratio times the artifact's size), at most ${UNBLOB_SCRATCH_MAX} bytes: raise those limits if this file is expected to unpack this large.`,
        { scratch_bytes: scratch },
      );
    if (Number(exit) === EXIT.tooMany)
      throw new DossierError(
        'resource_constraint',
        `unblob unpacked more than the ${read.maxEntries} entries the extraction may still write; the extraction was rolled back.`,
        'Raise limits.max_entries (up to its ceiling) with a new idempotency_key if this is expected.',
        { max_entries: read.maxEntries },
      );
    throw corrupt('unblob', new Error(why), 'run');
  });
  try {
    await readTar(checkedOutput({ ...helper, done }), 'unblob', onEntry);
  } catch (err) {
    listening = false;
    throw read.signal?.aborted ? cancelledExtraction() : err;
  }
  // Stopped before it wrote anything: its tar ends where it was cut.
  if (read.signal?.aborted) throw cancelledExtraction();
  await stderrEnded;
  listening = false;
  const facts = lastLine('dossier-facts ');
  const counts = lastLine('dossier-counts ');
  if (!facts || !counts) throw corrupt('unblob', new Error('it reported nothing'), 'run');
  return {
    ...(JSON.parse(facts) as RawFacts),
    counts: JSON.parse(counts) as UnblobFacts['counts'],
    version,
  };
}

type RawFacts = Omit<UnblobFacts, 'version' | 'counts'>;

/**
 * The `dossier-top` line's chunks, when it is a list of at most 10,000 rows (what a row says is
 * checked where regions are made of it, for these and the facts' rows alike), else null.
 */
function topChunks(line: string): TopChunks | null {
  let top: Partial<TopChunks> | null;
  try {
    top = JSON.parse(line) as Partial<TopChunks> | null;
  } catch {
    return null;
  }
  const rows = top?.chunks;
  if (
    !Array.isArray(rows) ||
    rows.length > MAX_ROWS ||
    !rows.every((c) => c !== null && typeof c === 'object')
  )
    return null;
  return { chunks: rows, whole_file: typeof top?.whole_file === 'string' ? top.whole_file : null };
}

/** Rows of one list the wrapper writes at most (MAX_ROWS in unpack_unblob.py): chunks, tree nodes. */
export const MAX_ROWS = 10_000;

/** The longest facts line the wrapper writes (MAX_FACTS_BYTES in unpack_unblob.py), with room. */
const FACTS_LINE_MAX = 4 * 1024 * 1024 + 64 * 1024;

/**
 * Calls `found` once, with the rest of the first stderr line that starts with `prefix`, as soon as
 * it is whole. Each chunk is looked at once: a line is gathered only while it may be that line.
 */
function onStderrLine(helper: StreamingHelper, prefix: string, found: (rest: string) => void) {
  let line: string[] = [];
  let length = 0;
  let skipping = false; // the current line is too long to be the facts
  const scan = (chunk: Buffer) => {
    const text = chunk.toString();
    for (let start = 0; ;) {
      const end = text.indexOf('\n', start);
      const piece = text.slice(start, end === -1 ? undefined : end);
      if (!skipping) {
        line.push(piece);
        length += piece.length;
        if (length > FACTS_LINE_MAX) skipping = true;
      }
      if (end === -1) return;
      const whole = skipping ? '' : line.join('');
      line = [];
      length = 0;
      skipping = false;
      start = end + 1;
      if (whole.startsWith(prefix)) {
        helper.stderr.off('data', scan);
        found(whole.slice(prefix.length));
        return;
      }
    }
  };
  helper.stderr.on('data', scan);
}

/** The chunks a reader should know of: unknown ones with their entropy, the residual unknowns among them. */
export function unknownChunkQuestions(
  facts: UnblobFacts,
  scope: string,
): { question: string; scope: string }[] {
  return facts.chunks
    .filter((c) => c.unknown && c.entropy !== null && c.entropy >= HIGH_ENTROPY)
    .slice(0, 1_000)
    .map((c) => ({
      question: `Unknown chunk of ${c.size} bytes at 0x${c.start.toString(16)} in ${c.path || 'the artifact'} has entropy ${c.entropy} bits/byte: encrypted or compressed with an unknown scheme?`,
      scope: `${scope} ${c.path || '.'}@0x${c.start.toString(16)}`,
    }));
}

/** One sentence each for what unblob could not do (missing extractors, failed commands). */
export function unblobLimitations(facts: UnblobFacts, where: string): string[] {
  const out: string[] = [];
  const errors = facts.errors.filter((e) => e.severity === 'ERROR');
  const missing = new Set<string>();
  for (const e of errors) {
    const deps = /"dependencies": \[([^\]]*)\]/.exec(e.detail)?.[1];
    if (deps) for (const d of deps.split(',')) missing.add(d.trim().replace(/"/g, ''));
  }
  if (missing.size)
    out.push(
      `unblob could not extract some chunks of ${where}: its extractor ${[...missing].join(', ')} is not installed here (dossier's own reader opens those it reads, e.g. squashfs)`,
    );
  const others =
    errors.length - [...errors].filter((e) => e.kind === 'ExtractorDependencyNotFoundReport').length;
  if (others)
    out.push(`unblob reported ${others} errors while unpacking ${where} (see unblob.errors in the document)`);
  // unblob reports an extractor that failed half-way (fsck.erofs crashing on a deep tree, say) as a
  // warning, and keeps what it wrote: the reader must know the chunk may be incomplete.
  const broken = facts.errors.filter(
    (e) => e.severity !== 'ERROR' && e.kind === 'ExtractCommandFailedReport',
  ).length;
  if (broken)
    out.push(
      `an extractor unblob ran failed on ${broken} chunks of ${where}: what it wrote before failing is kept, and may be incomplete (see unblob.errors in the document)`,
    );
  const unknown = facts.chunks.filter((c) => c.unknown);
  if (unknown.length)
    out.push(
      `${unknown.length} chunks of ${where} matched no format (${unknown.reduce((n, c) => n + c.size, 0)} bytes; see chunks with unknown: true and their entropy)`,
    );
  if (facts.chunk_count >= MAX_ROWS)
    out.push(`unblob reported more chunks than the ${MAX_ROWS.toLocaleString('en')} kept`);
  if (facts.trimmed)
    out.push(
      "unblob's facts were longer than the 4 MiB kept: its longest lists (errors, then the tree and the chunks) keep their first rows",
    );
  return out;
}
