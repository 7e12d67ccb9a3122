// A YAFFS2 image written to the layout mkyaffs2image writes (no YAFFS2
// builder is packaged in Debian): 2,048-byte pages each followed by a 64-byte
// spare area that holds the chunk's tags without ECC (two 0xff bytes, then
// sequence number, object id, chunk id and byte count, little-endian). Chunk 0
// of an object is its header (yaffs2_obj_hdr: type, parent, name, mode, size,
// ...); a file's data follows in chunks 1..n. The root directory is object 1
// and is not written.

const PAGE = 2048;
const SPARE = 64;
const SEQUENCE = 0x1000;

type Entry = { path: string; data?: Buffer };

function chunk(page: Buffer, objectId: number, chunkId: number, bytes: number): Buffer {
  const data = Buffer.alloc(PAGE, 0xff);
  page.copy(data);
  const spare = Buffer.alloc(SPARE, 0xff);
  spare.writeUInt32LE(SEQUENCE, 2);
  spare.writeUInt32LE(objectId, 6);
  spare.writeUInt32LE(chunkId, 10);
  spare.writeUInt32LE(bytes, 14);
  return Buffer.concat([data, spare]);
}

function header(type: 1 | 3, parent: number, name: string, size: number): Buffer {
  const h = Buffer.alloc(512, 0);
  h.writeUInt32LE(type, 0);
  h.writeUInt32LE(parent, 4);
  h.writeUInt16LE(0xffff, 8); // sum_no_longer_used
  h.write(name, 10, 'utf8'); // name[256]
  h.writeUInt16LE(0xffff, 266); // chksum
  h.writeUInt32LE(type === 3 ? 0o40755 : 0o100644, 268); // st_mode
  h.writeUInt32LE(size, 292); // file_size_low (uid, gid, atime, mtime, ctime before it)
  h.writeUInt32LE(0xffffffff, 296); // equiv_id
  h.fill(0, 300, 460); // alias
  h.writeUInt32LE(0xffffffff, 460 + 4 + 24 + 8); // file_size_high: sizes are 32-bit
  return h;
}

/**
 * A YAFFS2 image of these files, directories first in the order met. The first
 * object must be a directory holding the next one (how unblob finds the spare
 * size), so the first path should be in a subdirectory.
 */
export function yaffs2Image(files: Entry[]): Buffer {
  const ids = new Map<string, number>([['', 1]]);
  let next = 257;
  const out: Buffer[] = [];
  for (const { path, data } of files) {
    const parts = path.split('/');
    for (let i = 1; i < parts.length; i++) {
      const dir = parts.slice(0, i).join('/');
      if (ids.has(dir)) continue;
      ids.set(dir, next);
      out.push(chunk(header(3, ids.get(parts.slice(0, i - 1).join('/'))!, parts[i - 1]!, 0), next, 0, 0));
      next++;
    }
    const id = next++;
    const body = data ?? Buffer.alloc(0);
    out.push(chunk(header(1, ids.get(parts.slice(0, -1).join('/'))!, parts.at(-1)!, body.length), id, 0, 0));
    for (let at = 0, n = 1; at < body.length; at += PAGE, n++) {
      const piece = body.subarray(at, at + PAGE);
      out.push(chunk(piece, id, n, piece.length));
    }
  }
  return Buffer.concat(out);
}
