// Zip (and APK) archives, entry by entry: yauzl reads the central directory
// (raw names, so unsafe ones are recorded, not fatal) and finds each entry's
// data; stored and deflated data is read here in large pieces.
import { closeSync, constants, createReadStream, open as openFd, read as readFd } from 'node:fs';
import { Readable } from 'node:stream';
import { promisify } from 'node:util';
import { createInflateRaw } from 'node:zlib';
import yauzl from 'yauzl';
import { CHUNK_BYTES, corrupt, READ_BYTES, type EntryType, type OnEntry } from './archives.ts';

export async function readZip(file: string, onEntry: OnEntry): Promise<void> {
  // A plain descriptor: yauzl owns it from here and closes it with the zip file.
  const fd = await promisify(openFd)(file, constants.O_RDONLY | constants.O_NOFOLLOW);
  const zip = await new Promise<yauzl.ZipFile>((resolve, reject) =>
    // decodeStrings: false hands us raw names, so unsafe ones are refused and recorded, not fatal.
    yauzl.fromFd(
      fd,
      { lazyEntries: true, decodeStrings: false, validateEntrySizes: true, autoClose: false },
      (err, z) => (err ? reject(corrupt('zip', err)) : resolve(z!)),
    ),
  ).catch((err: unknown) => {
    closeSync(fd);
    throw err;
  });
  // One buffer for every stored entry of this archive (entries are read one after another).
  const buffer = Buffer.allocUnsafe(READ_BYTES);
  try {
    await new Promise<void>((resolve, reject) => {
      zip.on('error', (err) => reject(corrupt('zip', err)));
      zip.on('end', () => resolve());
      zip.on('entry', (entry: yauzl.Entry) => {
        const raw = entry.fileName as unknown as Buffer;
        const name = (
          entry.generalPurposeBitFlag & 0x800 ? raw.toString('utf8') : raw.toString('latin1')
        ).replace(/\\/g, '/');
        const mode = (entry.externalFileAttributes >>> 16) & 0o170000;
        const isDir = name.endsWith('/');
        const type: EntryType = mode === 0o120000 ? 'symlink' : isDir ? 'dir' : 'file';
        const next = async () => {
          if (type === 'dir') return onEntry({ name, type, linkTarget: null, content: null });
          const stream = await openEntry(zip, fd, entry, name, buffer);
          if (type === 'symlink') {
            const chunks: Buffer[] = [];
            let size = 0;
            for await (const c of stream) {
              size += (c as Buffer).length;
              if (size > 4_096) break;
              chunks.push(Buffer.from(c as Buffer));
            }
            stream.close();
            return onEntry({ name, type, linkTarget: Buffer.concat(chunks).toString('utf8'), content: null });
          }
          try {
            const executable = ((entry.externalFileAttributes >>> 16) & 0o111) !== 0;
            await onEntry({ name, type, linkTarget: null, content: stream, executable });
          } catch (err) {
            stream.close();
            throw err;
          }
        };
        next().then(
          () => zip.readEntry(),
          (err) => reject(err),
        );
      });
      zip.readEntry();
    });
  } finally {
    zip.close();
  }
}

/**
 * One zip entry's bytes. Stored and deflated entries (nearly all) are inflated
 * here in large chunks and their length checked against the central
 * directory; anything else (encrypted, other methods) goes through yauzl,
 * which refuses what it cannot read.
 */
async function openEntry(
  zip: yauzl.ZipFile,
  fd: number,
  entry: yauzl.Entry,
  name: string,
  buffer: Buffer,
): Promise<AsyncIterable<Buffer> & { close(): void }> {
  const fast = !entry.isEncrypted() && (entry.compressionMethod === 0 || entry.compressionMethod === 8);
  if (!fast) {
    const stream = await new Promise<Readable>((res, rej) =>
      zip.openReadStream(entry, (err, s) => (err ? rej(corrupt('zip', err)) : res(s!))),
    );
    return Object.assign(stream, { close: () => stream.destroy() });
  }
  // yauzl finds where the data starts (and checks it lies inside the file); the bytes are read here in large pieces.
  const { fileDataStart } = await new Promise<{ fileDataStart: number }>((res, rej) =>
    (
      zip as unknown as {
        readLocalFileHeader(
          e: yauzl.Entry,
          o: { minimal: true },
          cb: (err: Error | null, h?: { fileDataStart: number }) => void,
        ): void;
      }
    ).readLocalFileHeader(entry, { minimal: true }, (err, h) => (err ? rej(corrupt('zip', err)) : res(h!))),
  );
  const expected = entry.uncompressedSize;
  const short = (size: number) =>
    corrupt(
      'zip',
      new Error(`${name} holds ${size > expected ? 'more' : size} bytes, its header says ${expected}`),
    );
  if (entry.compressionMethod === 0) {
    // Stored: read straight into the one buffer of this zip, no stream, no fresh buffer per piece.
    if (entry.compressedSize !== expected) throw short(entry.compressedSize);
    const chunks = stored(fd, fileDataStart, expected, buffer, short);
    return Object.assign(chunks, { close: () => void chunks.return(undefined) });
  }
  const raw =
    entry.compressedSize === 0
      ? Readable.from([])
      : createReadStream('', {
          fd,
          autoClose: false,
          start: fileDataStart,
          end: fileDataStart + entry.compressedSize - 1,
          highWaterMark: READ_BYTES,
        });
  const data = raw.pipe(createInflateRaw({ chunkSize: CHUNK_BYTES }));
  raw.once('error', (err: Error) => data.destroy(err));
  async function* checked(): AsyncGenerator<Buffer> {
    let size = 0;
    try {
      for await (const chunk of data) {
        size += (chunk as Buffer).length;
        if (size > expected) break;
        yield chunk as Buffer;
      }
    } catch (err) {
      throw corrupt('zip', err);
    } finally {
      // Never destroy the file stream: that would close yauzl's descriptor; it is only left unread.
      raw.unpipe();
      data.destroy();
    }
    if (size !== expected) throw short(size);
  }
  const chunks = checked();
  return Object.assign(chunks, { close: () => void chunks.return(undefined) });
}

/** A stored entry's bytes, read by position into `buffer` (each chunk valid until the next is asked for). */
async function* stored(
  fd: number,
  start: number,
  length: number,
  buffer: Buffer,
  cutShort: (size: number) => Error,
): AsyncGenerator<Buffer> {
  const read = promisify(readFd);
  for (let done = 0; done < length;) {
    const { bytesRead } = await read(fd, buffer, 0, Math.min(buffer.length, length - done), start + done);
    if (bytesRead === 0) throw cutShort(done);
    done += bytesRead;
    yield buffer.subarray(0, bytesRead);
  }
}
