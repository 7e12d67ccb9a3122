// A file's bytes written a batch at a time. The pieces a stream hands over are
// small (64 KiB from a pipe, less from a tar parser): one call to the file system
// for up to a MiB of them, rather than one per piece, takes a fifth to a quarter
// off writing an unpacked tree.
import type { FileHandle } from 'node:fs/promises';

/** What is gathered before it is written. */
const BATCH_BYTES = 1024 * 1024;

export function batchedWrites(fd: FileHandle) {
  let batch: Buffer[] = [];
  let bytes = 0;
  const flush = async () => {
    const pieces = batch;
    batch = [];
    bytes = 0;
    await writeAll(fd, pieces);
  };
  return {
    /** Keeps `piece` (it must not change afterwards), writing the batch once it is large enough. */
    async write(piece: Buffer): Promise<void> {
      batch.push(piece);
      bytes += piece.length;
      if (bytes >= BATCH_BYTES) await flush();
    },
    /** Writes what is still gathered. */
    flush,
  };
}

/** Writes every byte of `pieces`, however the file system splits the writes. */
async function writeAll(fd: FileHandle, pieces: Buffer[]): Promise<void> {
  let left = pieces;
  while (left.length > 0) {
    let { bytesWritten } = await fd.writev(left);
    const rest: Buffer[] = [];
    for (const piece of left) {
      if (bytesWritten >= piece.length) bytesWritten -= piece.length;
      else {
        rest.push(bytesWritten > 0 ? piece.subarray(bytesWritten) : piece);
        bytesWritten = 0;
      }
    }
    left = rest;
  }
}
