// The image's own chunks in extract_firmware, carved by dossier from the verified
// image rather than sent back through unblob's tar: unblob tells them (the
// `dossier-top` line) long before it has extracted them, so they are written
// while it works, and its tar leaves them out (carved_by_reader in its facts).
import { createReadStream } from 'node:fs';
import { corrupt, type OnEntry } from './archives.ts';
import { normalized } from './writer.ts';
import { MAX_ROWS, type TopChunks, type UnblobFacts } from './unblob.ts';

/** One of the image's own chunks as its carved/ file: the wrapper's name for it, and its range. */
interface ImageChunk {
  name: string;
  start: number;
  end: number;
}

/** A chunk's kind, as it names a carved/ file (KIND in unpack_unblob.py). */
const KIND = '[a-z0-9_]{1,64}';
const CHUNK_KIND = new RegExp(`^${KIND}$`);
const CARVED_NAME = new RegExp(`^carved/0x([0-9a-f]+)\\.(${KIND})$`);

/** extract_firmware's name for a chunk of the image (carved_name in unpack_unblob.py makes the same). */
export const carvedName = (start: number, kind: string) => `carved/0x${start.toString(16)}.${kind}`;

/** Whether `n` is an offset of an image of `bytes` bytes (its end included): a safe integer in it. */
export const offsetIn =
  (bytes: number) =>
  (n: unknown): n is number =>
    Number.isSafeInteger(n) && (n as number) >= 0 && (n as number) <= bytes;

/** Whether a row's start and end are a range of at least one byte of an image of `bytes` bytes. */
function rangeIn(bytes: number, row: { start?: unknown; end?: unknown }): boolean {
  const inside = offsetIn(bytes);
  return inside(row.start) && inside(row.end) && row.start < row.end;
}

/**
 * Writes bytes [start, end) of `file` as the file entry `name`. The read stream is closed after the
 * write, read or refused unread (a bound, a cancel): it would keep its descriptor; `signal` cuts it short.
 */
export async function writeRange(
  write: OnEntry,
  name: string,
  range: { file: string; start: number; end: number },
  signal?: AbortSignal,
) {
  const content = createReadStream(range.file, { start: range.start, end: range.end - 1, signal });
  try {
    await write({ name, type: 'file', linkTarget: null, content });
  } finally {
    content.destroy();
  }
}

/**
 * The image's own chunks as the `dossier-top` line tells them, each inside the image and of a kind
 * that names a file: checked as the wrapper checks the rows it leaves out of the tar (carved_by_reader
 * in unpack_unblob.py), so both name the same chunks.
 */
function imageChunks(top: TopChunks, bytes: number): ImageChunk[] {
  return top.chunks
    .filter(
      (c) =>
        c.depth === 0 &&
        c.path === '' &&
        rangeIn(bytes, c) &&
        typeof c.kind === 'string' &&
        CHUNK_KIND.test(c.kind),
    )
    .slice(0, MAX_ROWS)
    .map((c) => ({ name: carvedName(c.start, c.kind), start: c.start, end: c.end }));
}

/**
 * The image's own chunks, carved by dossier from the verified image while unblob still extracts
 * them: unblob's tar leaves them out (its facts' carved_by_reader names them). Those told too late
 * to carve early, or not told at all, are carved once the facts name them. Each goes through the
 * checked writer like any other entry, in turn with the tar's.
 */
export class ImageCarver {
  private readonly carved = new Map<string, string>();
  /** Names unblob's tar wrote (its entries go through `fromTar`). */
  private readonly inTar = new Set<string>();
  private early: Promise<void> = Promise.resolve();
  private failure: unknown;
  private readonly stopped = new AbortController();

  constructor(
    private readonly image: { file: string; bytes: number },
    private readonly write: OnEntry,
    private readonly stopCarving: () => void,
  ) {}

  /** On the `dossier-top` line: carve its chunks now (a failure stops the carving, and is kept). */
  told(top: TopChunks) {
    if (this.stopped.signal.aborted) return;
    const chunks = imageChunks(top, this.image.bytes);
    this.early = this.carve(chunks).catch((err: unknown) => {
      this.failure ??= err;
      this.stopCarving();
    });
  }

  /**
   * The carving failed: nothing more is carved (the chunk being read is cut short), and a top line
   * heard after this is not acted on. Resolves once nothing of this carver's writes any more.
   */
  async close() {
    this.stopped.abort();
    await this.early;
  }

  /** Unblob's tar entries to the writer, through here: a name carved here is refused from it. */
  fromTar(write: OnEntry): OnEntry {
    return (entry) => {
      const name = normalized(entry.name);
      this.inTar.add(name);
      if (this.carved.has(name))
        return Promise.reject(corrupt('unblob', new Error(`${name} was carved and also in its tar`), 'run'));
      return write(entry);
    };
  }

  /** A failure of the early carving, which is why unblob was stopped (if it was). */
  get failed(): unknown {
    return this.failure;
  }

  /** After unblob: every chunk its facts say the tar left out is carved, with the range told. */
  async settle(facts: UnblobFacts) {
    await this.early;
    if (this.failure !== undefined) throw this.failure;
    const left = facts.carved_by_reader ?? [];
    if (!Array.isArray(left)) throw corrupt('unblob', new Error('its facts name no list of chunks'), 'run');
    const named = new Set<string>();
    for (const c of left.slice(0, MAX_ROWS) as unknown[] as ImageChunk[]) {
      const m = CARVED_NAME.exec(String(c?.name));
      if (!m || !rangeIn(this.image.bytes, c) || m[1] !== c.start.toString(16))
        throw corrupt(
          'unblob',
          new Error(`its wrapper left out a chunk it cannot name: ${JSON.stringify(c)}`),
          'run',
        );
      const had = this.carved.get(c.name);
      if (had !== undefined && had !== `${c.start}:${c.end}`)
        throw corrupt('unblob', new Error(`${c.name} was told with two ranges`), 'run');
      if (this.inTar.has(c.name))
        throw corrupt('unblob', new Error(`${c.name} was left out of its tar and also in it`), 'run');
      named.add(c.name);
      if (had === undefined) await this.carve([{ name: c.name, start: c.start, end: c.end }]);
    }
    // A chunk carved early that the tar did not leave out would be in it twice.
    for (const name of this.carved.keys())
      if (!named.has(name))
        throw corrupt('unblob', new Error(`${name} was carved and also in its tar`), 'run');
  }

  private async carve(chunks: ImageChunk[]) {
    for (const c of chunks) {
      if (this.stopped.signal.aborted) return;
      if (this.carved.has(c.name)) continue;
      this.carved.set(c.name, `${c.start}:${c.end}`);
      await writeRange(this.write, c.name, { file: this.image.file, ...c }, this.stopped.signal);
    }
  }
}

/** The writer takes one entry at a time: the image's chunks carved here and unblob's tar take turns. */
export function inTurn(onEntry: OnEntry): OnEntry {
  let turn: Promise<unknown> = Promise.resolve();
  return (entry) => {
    const mine = turn.then(() => onEntry(entry));
    turn = mine.catch(() => undefined);
    return mine;
  };
}
