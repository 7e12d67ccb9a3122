// Formats beyond zip/tar/7z that firmware and app analysts receive, each
// turned into the same entry sequence the checked writer consumes:
// - ar/.deb, cpio (newc, odc, binary), rpm and ISO 9660 through bsdtar in the
//   sandbox, which rewrites them as one tar stream on stdout (it writes no file);
// - cramfs and ext2/3/4 through 7-Zip (read7z);
// - Android sparse images and uImage by small readers here, which only read
//   the artifact and emit bytes (the writer's bounds hold on what they emit);
// - an APK's signing block, listed from the bytes before its central directory.
import { constants } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { Readable } from 'node:stream';
import { crc32 } from 'node:zlib';
import { checkedOutput, streamHelper } from '../../sandbox/helpers.ts';
import type { Sandbox } from '../../sandbox/sandbox.ts';
import { corrupt as unreadable, type OnEntry } from './archives.ts';
import { readTar } from './tar.ts';

/** The formats here name themselves whole ("the Android sparse image", "the uImage"). */
const corrupt = (format: string, why: string) => unreadable(format, new Error(why), '');

/** ar/.deb, cpio, rpm and ISO 9660 as one tar stream from bsdtar (libarchive) in the sandbox. */
export function readThroughBsdtar(
  sandbox: Sandbox,
  file: string,
  format: string,
  timeoutMs: number,
  onEntry: OnEntry,
): Promise<void> {
  const tar = checkedOutput(
    streamHelper(sandbox, {
      program: 'bsdtar',
      pkg: 'libarchive-tools',
      // @archive: copy the entries of an archive of any format libarchive reads into a new (pax) tar on stdout.
      args: ['-cf', '-', '--format=pax', `@/input/archive`],
      mounts: [{ host: file, inside: '/input/archive' }],
      timeoutMs,
    }),
  );
  return readTar(tar, format, onEntry);
}

/** A squashfs image as a tar stream from sqfs2tar in the sandbox, entry by entry. */
export function readSquashfs(
  sandbox: Sandbox,
  image: string,
  timeoutMs: number,
  onEntry: OnEntry,
): Promise<void> {
  const tar = checkedOutput(
    streamHelper(sandbox, {
      program: 'sqfs2tar',
      pkg: 'squashfs-tools-ng',
      args: ['--no-xattr', '/input/fs.sqfs'],
      mounts: [{ host: image, inside: '/input/fs.sqfs' }],
      timeoutMs,
    }),
  );
  return readTar(tar, 'squashfs', onEntry);
}

const SPARSE_MAGIC = 0xed26ff3a;
const CHUNK = { raw: 0xcac1, fill: 0xcac2, dontCare: 0xcac3, crc: 0xcac4 } as const;
const PIECE = 1024 * 1024;

async function readExactly(fd: FileHandle, length: number, position: number, what: string) {
  const buf = Buffer.alloc(length);
  const { bytesRead } = await fd.read(buf, 0, length, position);
  if (bytesRead !== length) throw corrupt('image', `${what} is cut short`);
  return buf;
}

export interface SparseFacts {
  block_size: number;
  blocks: number;
  chunks: number;
  raw_bytes: number;
}

/**
 * An Android sparse image (img2simg's format) as one raw image entry: raw
 * chunks copied, fill chunks repeated, "don't care" chunks as zeros. The
 * header's counts are checked against the chunks as they are read.
 */
export async function readAndroidSparse(file: string, name: string, onEntry: OnEntry): Promise<SparseFacts> {
  const fd = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW);
  try {
    const header = await readExactly(fd, 28, 0, 'the header');
    if (header.readUInt32LE(0) !== SPARSE_MAGIC) throw corrupt('Android sparse image', 'no sparse magic');
    const fileHeader = header.readUInt16LE(8);
    const chunkHeader = header.readUInt16LE(10);
    const blockSize = header.readUInt32LE(12);
    const blocks = header.readUInt32LE(16);
    const chunks = header.readUInt32LE(20);
    if (header.readUInt16LE(4) !== 1 || fileHeader < 28 || chunkHeader < 12 || blockSize % 4 || !blockSize)
      throw corrupt('Android sparse image', 'an unknown version or header layout');
    const { size: fileBytes } = await fd.stat();
    // Every chunk takes at least its header: more chunks than that cannot be in the file.
    if (chunks > (fileBytes - fileHeader) / chunkHeader)
      throw corrupt(
        'Android sparse image',
        `the header states ${chunks} chunks, more than the file can hold`,
      );
    const facts = { block_size: blockSize, blocks, chunks, raw_bytes: blocks * blockSize };

    async function* image(): AsyncGenerator<Buffer> {
      let at = fileHeader;
      let seen = 0;
      for (let i = 0; i < chunks; i++) {
        const head = await readExactly(fd, 12, at, `chunk ${i}'s header`);
        const type = head.readUInt16LE(0);
        const count = head.readUInt32LE(4);
        const total = head.readUInt32LE(8);
        const body = at + chunkHeader;
        const bytes = count * blockSize;
        seen += type === CHUNK.crc ? 0 : count;
        if (seen > blocks)
          throw corrupt('Android sparse image', 'more blocks in chunks than the header states');
        // Each chunk's stated length is exactly its header and its data, and inside the file.
        const expected = chunkHeader + ({ [CHUNK.raw]: bytes, [CHUNK.fill]: 4, [CHUNK.crc]: 4 }[type] ?? 0);
        if (total !== expected || at + total > fileBytes)
          throw corrupt(
            'Android sparse image',
            `chunk ${i} states ${total} bytes, not ${expected} within the file`,
          );
        if (type === CHUNK.raw) {
          for (let done = 0; done < bytes;) {
            const n = Math.min(PIECE, bytes - done);
            yield await readExactly(fd, n, body + done, `raw chunk ${i}`);
            done += n;
          }
        } else if (type === CHUNK.fill || type === CHUNK.dontCare) {
          let pattern = Buffer.alloc(4);
          if (type === CHUNK.fill) pattern = await readExactly(fd, 4, body, `fill chunk ${i}`);
          const piece = Buffer.alloc(Math.min(PIECE, bytes));
          for (let o = 0; o < piece.length; o += 4) pattern.copy(piece, o);
          for (let done = 0; done < bytes; done += piece.length)
            yield done + piece.length <= bytes ? piece : piece.subarray(0, bytes - done);
        } else if (type !== CHUNK.crc) {
          throw corrupt('Android sparse image', `chunk ${i} has an unknown type 0x${type.toString(16)}`);
        }
        at += total;
      }
      if (seen !== blocks)
        throw corrupt('Android sparse image', `the chunks hold ${seen} of ${blocks} blocks`);
    }
    await onEntry({
      name,
      type: 'file',
      linkTarget: null,
      content: Readable.from(image(), { objectMode: false }),
    });
    return facts;
  } finally {
    await fd.close();
  }
}

const UIMAGE_MAGIC = 0x27051956;
// U-Boot's include/image.h numbering (enum ih_os, ih_arch, ih_type).
const UIMAGE_OS: Record<number, string> = {
  1: 'openbsd',
  2: 'netbsd',
  3: 'freebsd',
  5: 'linux',
  14: 'vxworks',
  16: 'qnx',
  17: 'u-boot',
  18: 'rtems',
  25: 'arm-trusted-firmware',
  26: 'tee',
  27: 'opensbi',
  28: 'efi',
};
const UIMAGE_ARCH: Record<number, string> = {
  1: 'alpha',
  2: 'arm',
  3: 'x86',
  4: 'ia64',
  5: 'mips',
  6: 'mips64',
  7: 'ppc',
  8: 's390',
  9: 'sh',
  10: 'sparc',
  11: 'sparc64',
  12: 'm68k',
  14: 'microblaze',
  15: 'nios2',
  16: 'blackfin',
  17: 'avr32',
  21: 'openrisc',
  22: 'arm64',
  23: 'arc',
  24: 'x86_64',
  25: 'xtensa',
  26: 'riscv',
};
const UIMAGE_TYPE: Record<number, string> = {
  1: 'standalone',
  2: 'kernel',
  3: 'ramdisk',
  4: 'multi',
  5: 'firmware',
  6: 'script',
  7: 'filesystem',
  8: 'flat_dt',
};
const UIMAGE_COMP = ['none', 'gzip', 'bzip2', 'lzma', 'lzo', 'lz4', 'zstd'] as const;
const PAYLOAD_SUFFIX: Record<string, string> = {
  gzip: '.gz',
  bzip2: '.bz2',
  lzma: '.lzma',
  lzo: '.lzo',
  lz4: '.lz4',
  zstd: '.zst',
};

export interface UImageFacts {
  name: string;
  os: string;
  arch: string;
  image_type: string;
  compression: string;
  load_address: string;
  entry_point: string;
  created: string;
  data_bytes: number;
  header_crc_ok: boolean;
  data_crc_ok: boolean;
}

/** Parses a legacy U-Boot image header (64 bytes, big-endian); null when it is not one. */
export function parseUImageHeader(
  header: Buffer,
): (UImageFacts & { header_crc: number; data_crc: number }) | null {
  if (header.length < 64 || header.readUInt32BE(0) !== UIMAGE_MAGIC) return null;
  const zeroed = Buffer.from(header.subarray(0, 64));
  zeroed.writeUInt32BE(0, 4);
  const hex = (n: number) => `0x${n.toString(16).padStart(8, '0')}`;
  return {
    name: header.subarray(32, 64).toString('latin1').replace(/\0.*$/s, ''),
    os: UIMAGE_OS[header[28]!] ?? `os ${header[28]}`,
    arch: UIMAGE_ARCH[header[29]!] ?? `arch ${header[29]}`,
    image_type: UIMAGE_TYPE[header[30]!] ?? `type ${header[30]}`,
    compression: UIMAGE_COMP[header[31]!] ?? `compression ${header[31]}`,
    load_address: hex(header.readUInt32BE(16)),
    entry_point: hex(header.readUInt32BE(20)),
    created: new Date(header.readUInt32BE(8) * 1000).toISOString(),
    data_bytes: header.readUInt32BE(12),
    header_crc: header.readUInt32BE(4),
    data_crc: header.readUInt32BE(24),
    header_crc_ok: crc32(zeroed) === header.readUInt32BE(4),
    data_crc_ok: false,
  };
}

/** A uImage as its 64-byte header and its payload, carved by the size the header states. */
export async function readUImage(file: string, onEntry: OnEntry): Promise<UImageFacts> {
  const fd = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW);
  try {
    const header = await readExactly(fd, 64, 0, 'the uImage header').catch(() => {
      throw corrupt('uImage', 'shorter than its 64-byte header');
    });
    const facts = parseUImageHeader(header);
    if (!facts) throw corrupt('uImage', 'no uImage magic');
    if (!facts.header_crc_ok) throw corrupt('uImage', 'the header CRC does not match');
    const { size } = await fd.stat();
    if (64 + facts.data_bytes > size)
      throw corrupt(
        'uImage',
        `the header states ${facts.data_bytes} payload bytes, the file holds ${size - 64}`,
      );
    await onEntry({
      name: 'uimage-header.bin',
      type: 'file',
      linkTarget: null,
      content: Readable.from([header]),
    });
    let sum = 0;
    async function* payload(): AsyncGenerator<Buffer> {
      for (let done = 0; done < facts!.data_bytes;) {
        const n = Math.min(PIECE, facts!.data_bytes - done);
        const piece = await readExactly(fd, n, 64 + done, 'the payload');
        sum = crc32(piece, sum);
        done += n;
        yield piece;
      }
    }
    const suffix = PAYLOAD_SUFFIX[facts.compression] ?? '';
    await onEntry({
      name: `uimage-payload${suffix}`,
      type: 'file',
      linkTarget: null,
      content: Readable.from(payload(), { objectMode: false }),
    });
    const { header_crc: _h, data_crc, ...rest } = facts;
    return { ...rest, data_crc_ok: sum === data_crc };
  } finally {
    await fd.close();
  }
}

export interface ApkSigningBlock {
  present: boolean;
  bytes: number | null;
  /** One row per ID-value pair, named when the ID is a known signature scheme. */
  blocks: { id: string; scheme: string; bytes: number }[];
}

const APK_BLOCK_IDS: Record<number, string> = {
  0x7109871a: 'APK Signature Scheme v2',
  0xf05368c0: 'APK Signature Scheme v3',
  0x1b93ad61: 'APK Signature Scheme v3.1',
  0x42726577: 'verity padding',
  0x6dff800d: 'source stamp v2',
  0x2146444e: 'Google Play dependency metadata',
};

/** Lists an APK's signing block: the ID-value pairs just before the central directory. */
export async function apkSigningBlock(file: string): Promise<ApkSigningBlock> {
  const none: ApkSigningBlock = { present: false, bytes: null, blocks: [] };
  const fd = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW);
  try {
    const { size } = await fd.stat();
    const tailLength = Math.min(size, 22 + 65_535);
    const tail = Buffer.alloc(tailLength);
    await fd.read(tail, 0, tailLength, size - tailLength);
    const eocd = tail.lastIndexOf(Buffer.from('504b0506', 'hex'));
    if (eocd < 0 || eocd + 22 > tail.length) return none;
    const cdOffset = tail.readUInt32LE(eocd + 16);
    if (cdOffset < 32 || cdOffset > size) return none;
    const footer = Buffer.alloc(24);
    await fd.read(footer, 0, 24, cdOffset - 24);
    if (footer.subarray(8).toString('latin1') !== 'APK Sig Block 42') return none;
    const blockSize = Number(footer.readBigUInt64LE(0));
    if (blockSize < 24 || blockSize + 8 > cdOffset || blockSize > 64 * 1024 * 1024) return none;
    const block = Buffer.alloc(blockSize - 24);
    await fd.read(block, 0, block.length, cdOffset - blockSize - 8 + 8);
    const blocks: ApkSigningBlock['blocks'] = [];
    for (let at = 0; at + 12 <= block.length && blocks.length < 256;) {
      const length = Number(block.readBigUInt64LE(at));
      if (length < 4 || at + 8 + length > block.length) break;
      const id = block.readUInt32LE(at + 8);
      blocks.push({
        id: `0x${id.toString(16).padStart(8, '0')}`,
        scheme: APK_BLOCK_IDS[id] ?? 'unknown',
        bytes: length - 4,
      });
      at += 8 + length;
    }
    return { present: true, bytes: blockSize + 8, blocks };
  } finally {
    await fd.close();
  }
}
