// Pure parsing: naming formats by their bytes, 7-Zip's listing of file
// systems, a uImage header, binwalk's uImage rows. No server, no helper.
import { crc32 } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { parse7zListing, sniff } from './archives.ts';
import { parseSignatures } from './carveFirmware.ts';
import { parseUImageHeader } from './formats.ts';

const hex = (h: string) => Buffer.from(h, 'hex');
const at = (offset: number, bytes: Buffer, length = offset + bytes.length + 16) => {
  const b = Buffer.alloc(length);
  bytes.copy(b, offset);
  return b;
};

describe('sniff', () => {
  it('names each format by its magic, wherever the format puts it', () => {
    expect(sniff(Buffer.concat([Buffer.from('!<arch>\ndebian-binary   '), Buffer.alloc(40)]))).toBe('deb');
    expect(sniff(Buffer.concat([Buffer.from('!<arch>\nlibfoo.o/       '), Buffer.alloc(40)]))).toBe('ar');
    expect(sniff(Buffer.from('070701000000'))).toBe('cpio');
    expect(sniff(Buffer.from('070707000000'))).toBe('cpio');
    expect(sniff(hex('edabeedb0300'))).toBe('rpm');
    expect(sniff(hex('3aff26ed01000000'))).toBe('android-sparse');
    expect(sniff(hex('27051956aabbccdd'))).toBe('uimage');
    expect(sniff(hex('453dcd2800100000'))).toBe('cramfs');
    expect(sniff(hex('8519' + '01e0' + '00000000'))).toBe('jffs2');
    expect(sniff(Buffer.from('UBI#\x01\x00\x00\x00'))).toBe('ubi');
    // UBIFS: the node magic, then a superblock node (type 6 at offset 20).
    expect(sniff(Buffer.concat([hex('31181006'), Buffer.alloc(16), hex('06')]))).toBe('ubifs');
    expect(sniff(at(32769, Buffer.from('CD001')))).toBe('iso9660');
    expect(sniff(at(1080, hex('53ef')))).toBe('ext');
    expect(sniff(Buffer.from('hsqs'))).toBe('squashfs');
  });

  it('does not take a two-byte coincidence for JFFS2, or a short head for ISO or ext', () => {
    expect(sniff(hex('85190000ffffffff'))).not.toBe('jffs2');
    // A UBIFS node that is not the superblock (a data node, type 1) is no image's start.
    expect(sniff(Buffer.concat([hex('31181006'), Buffer.alloc(16), hex('01')]))).not.toBe('ubifs');
    expect(sniff(at(32769, Buffer.from('CD001')).subarray(0, 32770))).not.toBe('iso9660');
    expect(sniff(at(1080, hex('53ef')).subarray(0, 1081))).not.toBe('ext');
  });
});

describe("7-Zip's listing of file systems (cramfs, ext)", () => {
  it('reads Folder and Mode when there are no Windows attributes', () => {
    const listing = [
      'Path = bin\nFolder = +\nSize = \nMode = drwxr-xr-x',
      'Path = bin/sh\nFolder = -\nSize = 7\nMode = lrwxrwxrwx',
      'Path = bin/busybox\nFolder = -\nSize = 900\nMode = -rwxr-xr-x',
      'Path = dev/console\nFolder = -\nSize = 0\nMode = crw-------',
      'Path = etc/passwd\nFolder = -\nSize = 30\nMode = -rw-r--r--',
    ].join('\n\n');
    const entries = parse7zListing(listing);
    expect(entries.map((e) => [e.name, e.type])).toEqual([
      ['bin', 'dir'],
      ['bin/sh', 'symlink'],
      ['bin/busybox', 'file'],
      ['dev/console', 'other'],
      ['etc/passwd', 'file'],
    ]);
    expect(entries.filter((e) => e.type === 'file').map((e) => e.executable)).toEqual([true, false]);
  });
});

describe('uImage', () => {
  function header(size: number) {
    const h = Buffer.alloc(64);
    h.writeUInt32BE(0x27051956, 0);
    h.writeUInt32BE(1_700_000_000, 8);
    h.writeUInt32BE(size, 12);
    h.writeUInt32BE(0x8000, 16);
    h.writeUInt32BE(0x8040, 20);
    h[28] = 5; // linux
    h[29] = 22; // arm64
    h[30] = 2; // kernel
    h[31] = 1; // gzip
    h.write('probe', 32, 'latin1');
    h.writeUInt32BE(crc32(h), 4);
    return h;
  }

  it('reads the header and checks its CRC', () => {
    expect(parseUImageHeader(header(4096))).toMatchObject({
      name: 'probe',
      os: 'linux',
      arch: 'arm64',
      image_type: 'kernel',
      compression: 'gzip',
      load_address: '0x00008000',
      entry_point: '0x00008040',
      data_bytes: 4096,
      header_crc_ok: true,
    });
    const bad = header(4096);
    bad[40] = bad[40]! ^ 1;
    expect(parseUImageHeader(bad)?.header_crc_ok).toBe(false);
    expect(parseUImageHeader(Buffer.alloc(64))).toBeNull();
  });

  it("binwalk's uImage row is carved as the header plus the payload it states, not 64 bytes", () => {
    const table = [
      'DECIMAL       HEXADECIMAL     DESCRIPTION',
      '0             0x0             uImage header, header size: 64 bytes, header CRC: 0x1, created: 2026-12-01 05:06:19, image size: 102464 bytes, Data Address: 0x0, OS: Linux',
      '64            0x40            gzip compressed data',
    ].join('\n');
    const [uimage, gzip] = parseSignatures(table, 500_000, 100);
    expect(uimage).toMatchObject({ kind: 'uimage', offset: 0, length: 64 + 102_464 });
    expect(gzip).toMatchObject({ kind: 'gzip', offset: 64, length: 500_000 - 64 });
  });

  it('a signature in a region runs to the next one of its region or the region end, never past the image', () => {
    const table = [
      'region 0 64',
      '0 0x0 uImage header, header size: 64 bytes, header CRC: 0x1, image size: 1000 bytes, OS: Linux',
      'region 4096 8192',
      '4100 0x1004 LZMA compressed data',
      '5000 0x1388 Copyright string: "x"',
      'region 9000 20000',
      '9500 0x251C gzip compressed data',
    ].join('\n');
    const rows = parseSignatures(table, 10_000, 100);
    expect(rows.map((r) => [r.offset, r.length])).toEqual([
      [0, 1064], // the header's stated size reaches past its region, into the payload unblob read
      [4100, 900],
      [5000, 3192],
      [9500, 500], // the region claims more than the image has
    ]);
    expect(parseSignatures(table, 10_000, 2)).toHaveLength(2);
  });
});
