// Breadth through unblob: every format family dossier has no reader for,
// made here with the real tools (mkfs.erofs, mkfs.fat and mcopy, zstd, lz4,
// lzip, lzop) or written to its published layout (a Netgear TRX header, a
// YAFFS2 image as mkyaffs2image lays it out),
// unpacked through the sandbox and the checked writer; a firmware image of a
// vendor header, a kernel, an erofs file system and a random blob carved and
// unpacked whole, the blob an unknown chunk with its entropy; hostile variants
// contained.
import { execFileSync, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cachedUnblob } from '../../src/python/unblob.ts';
import { allRows, call, type Reply } from '../helpers/mcp.ts';
import { startTestStack, type TestStack } from '../helpers/stack.ts';
import { scratchDir } from '../helpers/scratch.ts';
import { yaffs2Image } from '../helpers/yaffs2.ts';

const work = scratchDir('breadth');
const outside = path.join(work, 'outside');
let t: TestStack;
let client: Client;
let n = 0;

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
/** Shannon entropy in bits per byte. */
function shannon(b: Buffer): number {
  const counts = new Array<number>(256).fill(0);
  for (const x of b) counts[x]!++;
  return -counts.filter((c) => c > 0).reduce((sum, c) => sum + (c / b.length) * Math.log2(c / b.length), 0);
}
const run = (cmd: string, args: string[], cwd = work) =>
  execFileSync(cmd, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
const files: Record<string, Buffer> = {
  'etc/motd': Buffer.from('welcome to the router\n'),
  'bin/httpd': Buffer.concat(
    Array.from({ length: 200 }, (_, i) => Buffer.from(`\x7fELF httpd ${i} `.repeat(8))),
  ),
  'bin/key.bin': randomBytes(4_000),
};

const streamPayload = { noise: randomBytes(40_000), text: files['bin/httpd']!, lzip: randomBytes(40_000) };

/** A Netgear TRX v1 image of these partitions, to the header's published layout (CRC from offset 12). */
function trx(parts: Buffer[]): Buffer {
  const offsets: number[] = [];
  let at = 28;
  const body: Buffer[] = [];
  for (const p of parts) {
    const pad = (4 - (at % 4)) % 4;
    body.push(Buffer.alloc(pad), p);
    at += pad;
    offsets.push(at);
    at += p.length;
  }
  const tail = Buffer.alloc(16);
  tail.writeUInt16LE(0, 0); // flags
  tail.writeUInt16LE(1, 2); // version
  offsets.slice(0, 3).forEach((o, i) => tail.writeUInt32LE(o, 4 + i * 4));
  const covered = Buffer.concat([tail, ...body]);
  const head = Buffer.alloc(12);
  head.write('HDR0', 0, 'latin1');
  head.writeUInt32LE(12 + covered.length, 4);
  head.writeUInt32LE((crc32(covered) ^ 0xffffffff) >>> 0, 8);
  return Buffer.concat([head, covered]);
}

function crc32(buf: Buffer): number {
  let c = 0xffffffff;
  for (const b of buf) {
    c ^= b;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0xedb88320 : c >>> 1;
  }
  return (c ^ 0xffffffff) >>> 0;
}

beforeAll(async () => {
  mkdirSync(outside);
  const tree = path.join(work, 'tree');
  for (const [rel, data] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(tree, rel)), { recursive: true });
    writeFileSync(path.join(tree, rel), data);
  }
  run('mkfs.erofs', ['--quiet', path.join(work, 'fs.erofs'), tree]);
  run('mkfs.fat', ['-C', path.join(work, 'fs.fat'), '1024']);
  run('mcopy', [
    '-s',
    '-i',
    path.join(work, 'fs.fat'),
    path.join(tree, 'etc'),
    path.join(tree, 'bin'),
    '::/',
  ]);
  writeFileSync(
    path.join(work, 'fs.yaffs2'),
    yaffs2Image(Object.entries(files).map(([rel, data]) => ({ path: rel, data }))),
  );
  // unblob 26.6.4 sizes an lz4 frame wrongly when a block is stored uncompressed: the lz4 stream
  // carries text, the others random bytes.
  const payload = path.join(work, 'payload.bin');
  const text = path.join(work, 'payload.txt');
  writeFileSync(payload, streamPayload.noise);
  writeFileSync(text, streamPayload.text);
  const lzipInput = path.join(work, 'payload-lzip.bin');
  writeFileSync(lzipInput, streamPayload.lzip);
  run('zstd', ['-q', '-f', payload, '-o', path.join(work, 'payload.zst')]);
  run('lz4', ['-q', '-f', text, path.join(work, 'payload.lz4')]);
  // unblob's lzip handler finds a member's end only at an even offset: payloads until the member is even.
  for (;;) {
    run('lzip', ['-k', '-f', '-o', path.join(work, 'payload.lz'), lzipInput]);
    if (readFileSync(path.join(work, 'payload.lz')).length % 2 === 0) break;
    streamPayload.lzip = randomBytes(40_000);
    writeFileSync(lzipInput, streamPayload.lzip);
  }
  run('lzop', ['-f', '-o', path.join(work, 'payload.lzo'), payload]);
  const kernel = execFileSync('gzip', ['-9c'], { input: Buffer.alloc(20_000, 'kernel ') });
  writeFileSync(path.join(work, 'kernel.gz'), kernel);
  writeFileSync(path.join(work, 'vendor.trx'), trx([kernel, readFileSync(path.join(work, 'fs.erofs'))]));
  t = await startTestStack({ env: { DOSSIER_ALLOWED_ROOTS: `/usr/bin:${work}` } });
  client = await t.connect();
}, 120_000);
afterAll(async () => {
  await t?.stop(true);
});

async function register(file: string): Promise<string> {
  const registered = await call(client, 'register_artifact', { path: file });
  expect(registered.error).toBeUndefined();
  return registered.artifact.digest;
}

const extract = async (file: string, extra: Record<string, unknown> = {}, tool = 'extract_artifact') =>
  call(client, tool, {
    artifact: await register(file),
    detail: 'summary',
    idempotency_key: `breadth-${++n}`,
    ...extra,
  });

const writtenFiles = (rows: Reply[]) => rows.filter((r) => r.status === 'written' && r.type === 'file');
const bySha = (rows: Reply[], data: Buffer) => writtenFiles(rows).filter((r) => r.sha256 === sha(data));

function nothingOutside() {
  expect(readdirSync(outside)).toEqual([]);
}

describe('the format list', () => {
  it('lists exactly the handlers of the provisioned unblob', () => {
    const env = cachedUnblob(process.env.DOSSIER_ANALYSIS_PYTHON ?? '/usr/bin/python3')!;
    const generated = execFileSync(env.python, ['scripts/unblob-handlers.py']).toString();
    const committed = readFileSync('src/tools/unblobHandlers.ts', 'utf8');
    const handlers = (text: string) =>
      [...text.matchAll(/handler: '([^']+)'|"handler": "([^"]+)"/g)].map((m) => m[1] ?? m[2]);
    expect(handlers(committed)).toEqual(handlers(generated));
    expect(handlers(committed).length).toBeGreaterThan(80);
  });
});

describe('formats only unblob reads, each unpacked with its contents', () => {
  it.each([
    ['fs.erofs', 'erofs'],
    ['fs.fat', 'fat'],
    ['fs.yaffs2', 'yaffs'],
  ])('%s (%s): every file of the tree, by digest', async (name, handler) => {
    const reply = await extract(path.join(work, name));
    expect(reply.status, JSON.stringify(reply.error)).toBe('succeeded');
    expect(reply.summary.format).toBe('unblob');
    expect(reply.summary.unblob.handlers).toEqual({ [handler]: 1 });
    const rows = await allRows(client, reply.evidence_id);
    for (const [rel, data] of Object.entries(files)) {
      const row = bySha(rows, data)[0];
      expect(row?.path.toLowerCase(), rel).toMatch(new RegExp(`${rel}$`, 'i'));
      expect(readFileSync(path.join(t.home, reply.summary.output, row!.path)).equals(data)).toBe(true);
    }
    const chunks = await allRows(client, reply.evidence_id, 'chunks');
    expect(chunks[0]).toMatchObject({
      path: '',
      depth: 0,
      start: 0,
      handler,
      unknown: false,
      extracted: true,
    });
  });

  it.each([
    ['payload.zst', 'zstd', 'noise'],
    ['payload.lz4', 'lz4_default', 'text'],
    ['payload.lz', 'lzip', 'lzip'],
    ['payload.lzo', 'lzo', 'noise'],
  ] as const)('%s (%s): the stream decompressed to the exact bytes', async (name, handler, data) => {
    const reply = await extract(path.join(work, name));
    expect(reply.status, JSON.stringify(reply.error)).toBe('succeeded');
    expect(Object.keys(reply.summary.unblob.handlers)).toEqual([handler]);
    expect(bySha(await allRows(client, reply.evidence_id), streamPayload[data])).toHaveLength(1);
  });

  it('a TRX image built to its layout: its partitions carved and unpacked, each entry at its depth', async () => {
    const reply = await extract(path.join(work, 'vendor.trx'), { recursive: true });
    expect(reply.status, JSON.stringify(reply.error)).toBe('succeeded');
    expect(reply.summary.unblob.handlers).toMatchObject({ trx_v1: 1, erofs: 1, gzip: 1 });
    const rows = await allRows(client, reply.evidence_id);
    const motd = bySha(rows, files['etc/motd']!)[0];
    expect(motd!.path).toBe('part1_extract/etc/motd');
    expect(motd!.depth).toBe(1);
    expect(rows.find((r) => r.path === 'part1')).toMatchObject({ extracted_to: 'part1_extract' });
    const tree = await allRows(client, reply.evidence_id, 'archives');
    expect(tree.find((a) => a.path === 'part1')).toMatchObject({
      reader: 'unblob',
      format: 'erofs',
      depth: 1,
    });
  });

  it('bytes no reader knows are refused as unsupported, after unblob looked', async () => {
    writeFileSync(path.join(work, 'noise.bin'), randomBytes(64 * 1024));
    const reply = await extract(path.join(work, 'noise.bin'));
    expect(reply.status).toBe('failed');
    expect(reply.error.code).toBe('unsupported_target');
    expect(reply.error.message).toMatch(/Neither dossier nor unblob/);
  });
});

describe('extract_firmware carves with unblob', () => {
  it('a vendor header, a kernel, an erofs and a random blob: all carved and unpacked, the blob an unknown chunk with its entropy', async () => {
    const blob = randomBytes(48 * 1024);
    const image = path.join(work, 'router-fw.bin');
    const vendor = readFileSync(path.join(work, 'vendor.trx'));
    writeFileSync(image, Buffer.concat([vendor, blob]));
    const reply = await extract(image, {}, 'extract_firmware');
    expect(reply.status, JSON.stringify(reply.error)).toBe('succeeded');
    expect(reply.summary.handlers).toMatchObject({ trx_v1: 1, erofs: 1, gzip: 1 });

    const chunks = await allRows(client, reply.evidence_id, 'chunks');
    const top = chunks.filter((c) => c.depth === 0);
    expect(top.map((c) => [c.start, c.end, c.handler])).toEqual([
      [0, vendor.length, 'trx_v1'],
      [vendor.length, vendor.length + blob.length, 'unknown'],
    ]);
    // Its entropy, computed in unblob's processes as the chunk is carved, is the blob's own.
    expect(top[1]!.entropy).toBeCloseTo(shannon(blob), 3);
    expect(top[1]!.entropy_sampled).toBe(false);
    expect(top[1]!.carved_to).toBe(`carved/0x${vendor.length.toString(16)}.unknown`);

    const rows = await allRows(client, reply.evidence_id);
    const byPath = Object.fromEntries(writtenFiles(rows).map((r) => [r.path, r]));
    // The image's own chunks are carved by dossier from the image while unblob works, and left out of
    // unblob's tar: each once, nothing refused as a duplicate.
    expect(
      rows
        .filter((r) => r.path.startsWith('carved/'))
        .map((r) => r.path)
        .sort(),
    ).toEqual(['carved/0x0.trx', `carved/0x${vendor.length.toString(16)}.unknown`].sort());
    expect(rows.filter((r) => r.status === 'refused')).toEqual([]);
    expect(byPath['carved/0x0.trx']?.sha256).toBe(sha(vendor));
    expect(byPath[`carved/0x${vendor.length.toString(16)}.unknown`]?.sha256).toBe(sha(blob));
    expect(byPath['trx-0x0/part1_extract/etc/motd']?.sha256).toBe(sha(files['etc/motd']!));
    expect(byPath['trx-0x0/part1_extract/bin/httpd']?.sha256).toBe(sha(files['bin/httpd']!));
    const kernel = readFileSync(path.join(work, 'kernel.gz'));
    expect(
      writtenFiles(rows).some((r) => r.sha256 === sha(execFileSync('gunzip', ['-c'], { input: kernel }))),
    ).toBe(true);

    // The high-entropy blob is a residual unknown of the Evidence.
    const unknowns = await call(client, 'list_unknowns', {});
    expect(JSON.stringify(unknowns)).toMatch(/encrypted or compressed with an unknown scheme\?/);
  });
});

describe("unblob's hooks in the wrapper", () => {
  it('tell the image chunks before unblob extracts them, and each unknown chunk entropy as it is carved', async () => {
    const env = cachedUnblob(process.env.DOSSIER_ANALYSIS_PYTHON ?? '/usr/bin/python3')!;
    const vendor = readFileSync(path.join(work, 'vendor.trx'));
    const blob = randomBytes(24 * 1024);
    const image = path.join(work, 'told-fw.bin');
    writeFileSync(image, Buffer.concat([vendor, blob]));
    const out = path.join(work, 'told-out');
    // The wrapper's `unblob` mode, on the host: unblob's command line, telling fd 3 what it finds.
    const child = spawn(
      env.python,
      [
        path.join(env.scripts, 'unpack_unblob.py'),
        'unblob',
        '3',
        '-e',
        out,
        '-n',
        '0',
        '-d',
        '3',
        '-k',
        image,
      ],
      { stdio: ['ignore', 'ignore', 'ignore', 'pipe'] },
    );
    const exited = new Promise((resolve) => child.once('exit', resolve));
    const told: Record<string, unknown>[] = [];
    for await (const line of createInterface({ input: child.stdio[3] as Readable }))
      told.push(JSON.parse(line));
    expect(await exited).toBe(0);

    // The chunks first, as the facts will list them, each with the kind its carved/ file is named by;
    // then the unknown chunk's entropy, of its carved bytes.
    expect(told[0]).toEqual({
      top: {
        chunks: [
          {
            path: '',
            depth: 0,
            start: 0,
            end: vendor.length,
            size: vendor.length,
            unknown: false,
            kind: 'trx',
          },
          {
            path: '',
            depth: 0,
            start: vendor.length,
            end: vendor.length + blob.length,
            size: blob.length,
            unknown: true,
            kind: 'unknown',
          },
        ],
        whole_file: null,
      },
    });
    const entropies = told.filter((m) => 'entropy' in m).map((m) => m.entropy as [string, number, boolean]);
    expect(entropies).toHaveLength(1);
    const [carved, bits, sampled] = entropies[0]!;
    expect(carved).toBe(`${out}/told-fw.bin_extract/${vendor.length}-${vendor.length + blob.length}.unknown`);
    expect(readFileSync(carved).equals(blob)).toBe(true);
    expect(bits).toBeCloseTo(shannon(blob), 3);
    expect(sampled).toBe(false);
  });
});

describe("binwalk's listing of regions", () => {
  /** binwalk's `DECIMAL 0xHEX DESCRIPTION` lines as [offset, description], the spaces folded. */
  const named = (text: string) =>
    text
      .split('\n')
      .map((l) => /^(\d+)\s+0x[0-9A-F]+\s+(.*)$/.exec(l.trim()))
      .filter((m): m is RegExpExecArray => m !== null)
      .map((m) => [Number(m[1]), m[2]!.split(/\s+/).join(' ')] as const);

  it('names what the binwalk command names, region by region, Intel HEX and S-Records included', () => {
    // Bytes that look random, the same on every run: a false signature in them is the same for both.
    const noise = (seed: string, size: number) => {
      const parts: Buffer[] = [];
      for (let i = 0; parts.length * 32 < size; i++)
        parts.push(createHash('sha256').update(`${seed}${i}`).digest());
      return Buffer.concat(parts).subarray(0, size);
    };
    const ihex = Buffer.from(
      ':10010000214601360121470136007EFE09D2190140\n:100110002146017E17C20001FF5F16002148011928\n:00000001FF\n',
    );
    const srec = Buffer.from(
      'S00F000068656C6C6F202020202000003C\nS11F00007C0802A6900100049421FFF07C6C1B787C8C23783C6000003863000026\nS9030000FC\n',
    );
    const parts = [noise('a', 65_536), ihex, ihex, noise('b', 30_000), srec, noise('c', 10_000)];
    const file = path.join(work, 'records.bin');
    writeFileSync(file, Buffer.concat(parts));
    const size = parts.reduce((n, p) => n + p.length, 0);
    const hexAt = 65_536;
    const srecAt = 65_536 + 2 * ihex.length + 30_000;
    const mid = srecAt - 15_000;
    const cli = named(run('binwalk', [file]).toString());
    const ours = run('/usr/bin/python3', [
      path.resolve('src/activities/extraction/binwalk_regions.py'),
      file,
      `0:${mid}`,
      `${mid}:${size - mid}`,
    ]).toString();
    const regions = ours.split(/^region /m).filter(Boolean);
    expect(regions.map((r) => r.split('\n')[0])).toEqual([`0 ${mid}`, `${mid} ${size}`]);
    expect(named(regions[0]!)).toEqual(cli.filter(([at]) => at < mid));
    expect(named(regions[1]!)).toEqual(cli.filter(([at]) => at >= mid));
    expect(cli).toContainEqual([hexAt, expect.stringMatching(/^Intel HEX data/)]);
    expect(cli).toContainEqual([srecAt, expect.stringMatching(/^Motorola S-Record/)]);
  });

  // The listing finds binwalk's literal signatures in one pass of its own instead of one finditer per
  // signature; these two hold it to what re and the binwalk command find.
  const BINWALK_REGIONS = path.resolve('src/activities/extraction/binwalk_regions.py');
  const signatures = `import random, sys
sys.path.insert(0, ${JSON.stringify(path.dirname(BINWALK_REGIONS))})
import binwalk.core.magic as magic, binwalk.core.settings as settings
import binwalk_regions
loaded = magic.Magic()
for f in settings.Settings().system.magic:
    loaded.load(f)
rng = random.Random(int(sys.argv[1]))
noise = lambda n: bytes(rng.getrandbits(8) for _ in range(n))
`;
  // A block of every literal signature: alone, repeated, after a prefix of itself, cut short.
  const crowded = `def crowded(keys, count):
    parts = []
    for _ in range(count):
        key, r = rng.choice(keys), rng.random()
        parts.append(key * rng.randint(2, 4) if r < 0.3 else key[: rng.randint(1, len(key))] + key if r < 0.5 else key[:-1] if r < 0.6 else key)
        parts.append(noise(rng.randint(0, 48)))
    return b"".join(parts)
`;

  it("finds each literal signature where re's finditer does, in noise, in runs and in crowds", () => {
    const out = execFileSync(
      '/usr/bin/python3',
      [
        '-c',
        `${signatures}${crowded}
literals = binwalk_regions.Literals()
pairs = []
for signature in loaded.signatures:
    key = binwalk_regions.literal_bytes(signature.regex)
    if key is not None:
        pairs.append((signature.regex, binwalk_regions.Literal(literals, key), key))
keys = [key for _, _, key in pairs]
blocks = [noise(300_000), b"\\0" * 70_000 + b"\\xff" * 70_000, b"ab", b""] + [crowded(keys, 3_000) for _ in range(3)]
matches = 0
for block in blocks:
    text = block.decode("latin-1")
    for regex, literal, key in pairs:
        want = [m.start() for m in regex.finditer(text)]
        got = [m.start() for m in literal.finditer(text)]
        assert want == got, (key, want[:8], got[:8])
        matches += len(want)
print(len(loaded.signatures), len(pairs), matches)`,
        '7',
      ],
      { encoding: 'utf8' },
    );
    const [all, literal, matches] = out.trim().split(' ').map(Number);
    expect(literal).toBeGreaterThan(0.9 * all!); // most of binwalk's signatures are literal
    expect(matches).toBeGreaterThan(10_000);
  });

  it('lists what the binwalk command lists over a file crowded with signatures and zeros', () => {
    const file = path.join(work, 'crowded.bin');
    execFileSync('/usr/bin/python3', [
      '-c',
      `${signatures}${crowded}
keys = [k for k in (binwalk_regions.literal_bytes(s.regex) for s in loaded.signatures) if k]
open(sys.argv[2], "wb").write(crowded(keys, 4_000) + bytes(300_000) + b"\\xff" * 10_000)`,
      '3',
      file,
    ]);
    const size = readFileSync(file).length;
    const cli = named(run('binwalk', [file]).toString());
    const mid = Math.floor(size / 2);
    const ours = named(
      run('/usr/bin/python3', [BINWALK_REGIONS, file, `0:${mid}`, `${mid}:${size - mid}`]).toString(),
    );
    expect(cli.length).toBeGreaterThan(1_000);
    expect(ours).toEqual(cli);
  });
});

describe('hostile input through unblob is contained', () => {
  it('traversal names inside a zstd stream are refused by the writer, nothing lands outside', async () => {
    execFileSync('python3', [
      '-c',
      `import io,sys,tarfile
with tarfile.open(sys.argv[1], 'w') as t:
  for name in ['good.txt', '../../escape.txt', '/etc/evil', ${JSON.stringify(`../../../../../../..${outside}/slipped.txt`)}]:
    data = b'x'
    info = tarfile.TarInfo(name); info.size = 1
    t.addfile(info, io.BytesIO(data))`,
      path.join(work, 'slip.tar'),
    ]);
    run('zstd', ['-q', '-f', 'slip.tar', '-o', 'slip.tar.zst']);
    const reply = await extract(path.join(work, 'slip.tar.zst'), { recursive: true });
    expect(reply.status, JSON.stringify(reply.error)).toBe('succeeded');
    const rows = await allRows(client, reply.evidence_id);
    expect(rows.filter((r) => r.status === 'written').every((r) => !r.path.includes('..'))).toBe(true);
    nothingOutside();
    expect(existsSync(path.join(t.home, 'extractions', 'escape.txt'))).toBe(false);
  });

  it('a link out of an erofs is recorded or dropped, never created', async () => {
    const tree = path.join(work, 'linktree');
    mkdirSync(tree);
    writeFileSync(path.join(tree, 'ok.txt'), 'ok\n');
    symlinkSync('/etc/shadow', path.join(tree, 'shadow'));
    symlinkSync(`../../../..${outside}`, path.join(tree, 'out'));
    run('mkfs.erofs', ['--quiet', path.join(work, 'links.erofs'), tree]);
    const reply = await extract(path.join(work, 'links.erofs'));
    expect(reply.status, JSON.stringify(reply.error)).toBe('succeeded');
    const rows = await allRows(client, reply.evidence_id);
    for (const r of rows.filter((r) => r.type === 'symlink')) expect(r.status).toBe('recorded');
    const output = path.join(t.home, reply.summary.output as string);
    expect(existsSync(path.join(output, 'shadow'))).toBe(false);
    expect(existsSync(path.join(output, 'out'))).toBe(false);
    nothingOutside();
  });

  it("a folder named like unblob's beside an archive is no stand-in for its contents", async () => {
    // unblob skips a file whose `…_extract/` folder exists: the input's own folder must not pass
    // for what the file holds, so dossier opens the zip itself.
    const tree = path.join(work, 'decoy');
    mkdirSync(path.join(tree, 'fw.zip_extract'), { recursive: true });
    writeFileSync(path.join(tree, 'payload.txt'), 'the real payload\n');
    run('zip', ['-q', path.join(tree, 'fw.zip'), 'payload.txt'], tree);
    writeFileSync(path.join(tree, 'fw.zip_extract', 'payload.txt'), 'a decoy\n');
    run('tar', ['-cf', path.join(work, 'decoy.tar'), '-C', tree, 'fw.zip', 'fw.zip_extract']);
    run('zstd', ['-q', '-f', 'decoy.tar', '-o', 'decoy.tar.zst']);
    const reply = await extract(path.join(work, 'decoy.tar.zst'), { recursive: true });
    expect(reply.status, JSON.stringify(reply.error)).toBe('succeeded');
    const rows = await allRows(client, reply.evidence_id);
    const real = bySha(rows, Buffer.from('the real payload\n'));
    expect(real, JSON.stringify(rows.map((r) => r.path))).toHaveLength(1);
    const zip = rows.find((r) => r.path.endsWith('fw.zip') && r.type === 'file');
    expect(zip?.extracted_to ?? null).not.toMatch(/fw\.zip_extract$/);
  });

  it("a folder named like a nested archive's output, held by the archive around it, is no stand-in for it", async () => {
    // dossier writes a nested archive's entries to `<its path>.extracted/`: the outer archive's own
    // entries there must not pass for the nested archive's, so that one is not opened at all.
    const tree = path.join(work, 'prefilled');
    mkdirSync(path.join(tree, 'dir', 'x.tar.extracted'), { recursive: true });
    writeFileSync(path.join(tree, 'evil'), 'what x.tar holds\n');
    run('tar', ['-cf', path.join(tree, 'dir', 'x.tar'), 'evil'], tree);
    writeFileSync(path.join(tree, 'dir', 'x.tar.extracted', 'evil'), 'planted by the outer archive\n');
    run('tar', [
      '-cf',
      path.join(work, 'prefilled.tar'),
      '-C',
      tree,
      'dir/x.tar.extracted/evil',
      'dir/x.tar',
    ]);
    const reply = await extract(path.join(work, 'prefilled.tar'), { recursive: true });
    expect(reply.status, JSON.stringify(reply.error)).toBe('succeeded');
    const rows = await allRows(client, reply.evidence_id);
    expect(rows.filter((r) => r.path === 'dir/x.tar.extracted/evil')).toEqual([
      expect.objectContaining({ depth: 0, status: 'written' }),
    ]);
    expect(bySha(rows, Buffer.from('what x.tar holds\n'))).toEqual([]);
    const inner = rows.find((r) => r.path === 'dir/x.tar');
    expect(inner).toMatchObject({
      extracted_to: null,
      reason: expect.stringMatching(/holds entries of the archive around it/),
    });
  });

  it('a tree 1,100 folders deep neither stops the entry bound nor fails the carving', async () => {
    // A cpio image carved by unblob (extract_firmware): its tree, 1,100 folders deep, is listed by
    // dossier's wrapper inside the sandbox (once with a recursive walk that died at ~1,000 levels).
    const tree = path.join(work, 'deeptree');
    const deep = path.join(tree, ...Array<string>(1_100).fill('a'));
    mkdirSync(deep, { recursive: true });
    writeFileSync(path.join(deep, 'end.txt'), 'x');
    mkdirSync(path.join(tree, 'many'));
    for (let i = 0; i < 400; i++) writeFileSync(path.join(tree, 'many', `f${i}`), `file ${i}`);
    const list = execFileSync('find', ['.'], { cwd: tree, maxBuffer: 64 << 20 });
    writeFileSync(
      path.join(work, 'deep.cpio'),
      execFileSync('cpio', ['-o', '-H', 'newc', '--quiet'], { cwd: tree, input: list, maxBuffer: 64 << 20 }),
    );
    const image = path.join(work, 'deep.cpio');
    const bounded = await extract(image, { limits: { max_entries: 200 } }, 'extract_firmware');
    expect(bounded.status).toBe('failed');
    expect(bounded.error.code, JSON.stringify(bounded.error)).toBe('resource_constraint');
    const whole = await extract(image, { wait_ms: 100_000 }, 'extract_firmware');
    expect(whole.status, JSON.stringify(whole.error)).toBe('succeeded');
    const rows = await allRows(client, whole.evidence_id);
    expect(rows.filter((r) => /\/many\/f\d+$/.test(r.path) && r.status === 'written')).toHaveLength(400);
    // The deep file is refused by the writer's depth bound, by name, not lost.
    const end = rows.find((r) => r.path.endsWith('end.txt'));
    expect(end?.status).toBe('refused');
  });

  it('a file named like a folder an earlier entry made is refused as a duplicate, and the rest is written', async () => {
    execFileSync('python3', [
      '-c',
      `import io,sys,tarfile
with tarfile.open(sys.argv[1], 'w') as t:
  for name, data in [('a/b', b'inner'), ('a', b'clash'), ('c', b'after')]:
    info = tarfile.TarInfo(name); info.size = len(data)
    t.addfile(info, io.BytesIO(data))`,
      path.join(work, 'clash.tar'),
    ]);
    const reply = await extract(path.join(work, 'clash.tar'));
    expect(reply.status, JSON.stringify(reply.error)).toBe('succeeded');
    const rows = await allRows(client, reply.evidence_id);
    expect(rows.find((r) => r.path === 'a')).toMatchObject({ status: 'refused', reason: 'duplicate path' });
    expect(rows.find((r) => r.path === 'c')?.status).toBe('written');
  });

  it('a zstd bomb stops at the ratio bound: rolled back, no output', async () => {
    const zeros = path.join(work, 'zeros.bin');
    writeFileSync(zeros, Buffer.alloc(256 * 1024 * 1024));
    run('zstd', ['-q', '-19', '-f', zeros, '-o', 'bomb.zst']);
    const reply = await extract(path.join(work, 'bomb.zst'));
    expect(reply.status).toBe('failed');
    expect(reply.error.code).toBe('resource_constraint');
    expect(reply.summary.cleanup.output).toBeNull();
  });

  it('more entries than max_entries stop unblob: rolled back', async () => {
    const reply = await extract(path.join(work, 'fs.erofs'), { limits: { max_entries: 2 } });
    expect(reply.status).toBe('failed');
    expect(reply.error.code).toBe('resource_constraint');
    expect(reply.summary.cleanup.output).toBeNull();
  });
});
