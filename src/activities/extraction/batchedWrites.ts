// A file's bytes written a batch at a time. The pieces a stream hands over are
// small (64 KiB from a pipe, less from a tar parser): one call to the file system
// for up to a MiB of them, rather than one per piece, takes a fifth to a quarter
// off writing an unpacked tree. A piece is valid only until the next is asked
// for (a reader may reuse its buffer, see ArchiveEntry), so what waits for the
// batch is copied into a buffer of the writer's own, taken from a small pool.
import type { FileHandle } from 'node:fs/promises';

/** What is gathered before it is written. */
const BATCH_BYTES = 1024 * 1024;
/** Gathering buffers kept for the next files (each file holds one while it is written). */
const pool: Buffer[] = [];
const POOL_MAX = 8;

export function batchedWrites(fd: FileHandle) {
  let gathered: Buffer | undefined;
  let used = 0;
  const flush = async () => {
    if (used === 0) return;
    const bytes = used;
    used = 0;
    await writeAll(fd, gathered!.subarray(0, bytes));
  };
  const release = () => {
    if (gathered && pool.length < POOL_MAX) pool.push(gathered);
    gathered = undefined;
    used = 0;
  };
  return {
    /** Gathers a copy of `piece`, writing the batch whenever it is full; a large piece goes straight. */
    async write(piece: Buffer): Promise<void> {
      for (let at = 0; at < piece.length;) {
        if (used === 0 && piece.length - at >= BATCH_BYTES) {
          await writeAll(fd, piece.subarray(at));
          return;
        }
        gathered ??= pool.pop() ?? Buffer.allocUnsafe(BATCH_BYTES);
        const n = piece.copy(gathered, used, at, Math.min(piece.length, at + BATCH_BYTES - used));
        used += n;
        at += n;
        if (used === BATCH_BYTES) await flush();
      }
    },
    /** Writes what is still gathered; the file's last call. */
    async end(): Promise<void> {
      try {
        await flush();
      } finally {
        release();
      }
    },
    /** Gives up what is gathered (the file is removed). */
    abandon: release,
  };
}

/** Writes every byte of `bytes`, however the file system splits the writes. */
async function writeAll(fd: FileHandle, bytes: Buffer): Promise<void> {
  for (let at = 0; at < bytes.length;) {
    const { bytesWritten } = await fd.write(bytes, at, bytes.length - at);
    at += bytesWritten;
  }
}
