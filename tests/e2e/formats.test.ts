// What reverse engineers receive, made here with the real tools (dpkg-deb,
// cpio, rpmbuild, xorriso, img2simg, mkimage, mkfs.cramfs, mke2fs) plus a real
// Debian .deb, extracted through the gateway; recursive extraction with exact
// provenance; registering an extracted entry with no download and upload; and
// the intake routes (the team inbox, POST /artifacts, `dossier upload`,
// GET/POST /bundles).
import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import http from 'node:http';
import path from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canonicalJson } from '../../src/domain/canonical.ts';
import { buildEvidence } from '../../src/domain/evidence.ts';
import { allRows, call, type Reply } from '../helpers/mcp.ts';
import { startTestStack, type TestStack } from '../helpers/stack.ts';
import { scratchDir } from '../helpers/scratch.ts';

const work = scratchDir('formats');
const tree = path.join(work, 'tree');
let t: TestStack;
let client: Client;
let n = 0;

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const run = (cmd: string, args: string[], cwd = work) =>
  execFileSync(cmd, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
const files: Record<string, Buffer> = {
  'hello.txt': Buffer.from('hello\n'),
  'sub/blob.bin': randomBytes(70_000),
};

beforeAll(async () => {
  for (const [rel, data] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(tree, rel)), { recursive: true });
    writeFileSync(path.join(tree, rel), data);
  }
  symlinkSync('hello.txt', path.join(tree, 'link'));
  // A plain archive any test can extract, whatever ran before it.
  run('tar', ['-cf', path.join(work, 'tree.tar'), '-C', tree, '.']);
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

async function extract(file: string, extra: Record<string, unknown> = {}): Promise<Reply> {
  return call(client, 'extract_artifact', {
    artifact: await register(file),
    detail: 'summary',
    idempotency_key: `formats-${++n}`,
    ...extra,
  });
}

const page = (evidenceId: string, collection = 'entries') => allRows(client, evidenceId, collection);

const written = (rows: Reply[]) =>
  Object.fromEntries(rows.filter((r) => r.status === 'written' && r.type === 'file').map((r) => [r.path, r]));

/** The files of the fixture tree under `prefix` were written with their exact digests. */
function holdsTree(rows: Reply[], prefix = '') {
  const byPath = written(rows.map((r) => ({ ...r, path: r.path.replace(/^\.\//, '') })));
  for (const [rel, data] of Object.entries(files)) expect(byPath[`${prefix}${rel}`]?.sha256).toBe(sha(data));
  const link = rows.find((r) => r.path.replace(/^\.\//, '') === `${prefix}link`);
  expect(link).toMatchObject({ type: 'symlink', status: 'recorded', link_target: 'hello.txt' });
}

describe('formats detected by content', () => {
  it('cpio in newc and odc: every file with its digest, the link recorded', async () => {
    for (const format of ['newc', 'odc']) {
      const archive = path.join(work, `tree.${format}.cpio`);
      const list = execFileSync('find', ['.', '-mindepth', '1'], { cwd: tree });
      writeFileSync(
        archive,
        execFileSync('cpio', ['-o', '-H', format, '--quiet'], { cwd: tree, input: list }),
      );
      const reply = await extract(archive);
      expect(reply.status, JSON.stringify(reply.error)).toBe('succeeded');
      expect(reply.summary.format).toBe('cpio');
      holdsTree(await page(reply.evidence_id));
    }
  });

  it('ISO 9660 with Rock Ridge, rpm, cramfs and ext4', async () => {
    const iso = path.join(work, 'tree.iso');
    run('xorriso', ['-as', 'mkisofs', '-R', '-quiet', '-o', iso, tree]);
    const cramfs = path.join(work, 'tree.cramfs');
    run('mkfs.cramfs', [tree, cramfs]);
    const ext4 = path.join(work, 'tree.ext4');
    run('mke2fs', ['-q', '-t', 'ext4', '-d', tree, ext4, '8M']);
    for (const [file, format] of [
      [iso, 'iso9660'],
      [cramfs, 'cramfs'],
      [ext4, 'ext'],
    ] as const) {
      const reply = await extract(file);
      expect(reply.status, `${format}: ${JSON.stringify(reply.error)}`).toBe('succeeded');
      expect(reply.summary.format).toBe(format);
      holdsTree(await page(reply.evidence_id));
    }

    const top = path.join(work, 'rpm');
    mkdirSync(path.join(top, 'SPECS'), { recursive: true });
    writeFileSync(
      path.join(top, 'SPECS', 'probe.spec'),
      [
        'Name: probe',
        'Version: 1.0',
        'Release: 1',
        'Summary: a probe',
        'License: MIT',
        'BuildArch: noarch',
        '%description',
        'probe',
        '%install',
        'mkdir -p %{buildroot}/opt/probe',
        `cp ${path.join(tree, 'sub', 'blob.bin')} %{buildroot}/opt/probe/blob.bin`,
        '%files',
        '/opt/probe/blob.bin',
        '',
      ].join('\n'),
    );
    run('rpmbuild', ['--define', `_topdir ${top}`, '--quiet', '-bb', path.join(top, 'SPECS', 'probe.spec')]);
    const rpm = path.join(top, 'RPMS', 'noarch', 'probe-1.0-1.noarch.rpm');
    const reply = await extract(rpm);
    expect(reply.status, JSON.stringify(reply.error)).toBe('succeeded');
    expect(reply.summary.format).toBe('rpm');
    const rows = written(await page(reply.evidence_id));
    expect(rows['./opt/probe/blob.bin']?.sha256).toBe(sha(files['sub/blob.bin']!));
  });

  it("a 7z whose data 7-Zip cannot unpack fails with 7-Zip's own reason, not a short read", async () => {
    // Compressible and the same on every run, so the damage below stops 7-Zip's decoder half-way.
    const lines = Array.from({ length: 1_000 }, (_, i) => `line ${i}: ${sha(Buffer.from(`${i}`))}\n`);
    const blob = Buffer.from(lines.join(''));
    const dir = path.join(work, 'damaged');
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, 'blob.bin'), blob);
    const archive = path.join(work, 'damaged.7z');
    run('7zz', ['a', '-bd', '-ba', archive, 'blob.bin'], dir);
    const bytes = readFileSync(archive);
    // The middle of the archive is the blob's packed stream; its headers (at the end) stay readable.
    const middle = Math.floor(bytes.length / 2);
    bytes.fill(0, middle - 200, middle + 200);
    writeFileSync(archive, bytes);
    const reply = await extract(archive);
    expect(reply.status).toBe('failed');
    expect(reply.error).toMatchObject({ code: 'unsupported_target', details: { format: '7z' } });
    expect(reply.error.message).toBe(
      'The 7z archive could not be read: 7zz failed (exit 2): ERROR: Data Error : blob.bin. It may be truncated or corrupt.',
    );
  });

  it('a real Debian .deb: every member, control and data, not only data.tar', async () => {
    const cached = path.join(os.homedir(), '.cache/dossier/fixtures/busybox-static-armhf.deb');
    const deb = path.join(work, 'busybox.deb');
    if (existsSync(cached)) writeFileSync(deb, readFileSync(cached));
    else {
      // Outside CI (which caches busybox-static:armhf), any real package from the archive will do.
      run('apt-get', ['download', '-qq', 'hello']);
      const fetched = run('sh', ['-c', 'ls hello_*.deb']).toString().trim();
      writeFileSync(deb, readFileSync(path.join(work, fetched)));
    }
    const reply = await extract(deb);
    expect(reply.status, JSON.stringify(reply.error)).toBe('succeeded');
    expect(reply.summary.format).toBe('deb');
    const names = (await page(reply.evidence_id)).map((r) => r.path);
    expect(names[0]).toBe('debian-binary');
    expect(names.some((p) => /^control\.tar(\.\w+)?$/.test(p))).toBe(true);
    expect(names.some((p) => /^data\.tar(\.\w+)?$/.test(p))).toBe(true);
  });

  it('an Android sparse image becomes the exact raw image', async () => {
    const raw = Buffer.concat([randomBytes(300_000), Buffer.alloc(2 * 1024 * 1024), randomBytes(4096 * 3)]);
    const rawFile = path.join(work, 'system.raw');
    writeFileSync(rawFile, raw);
    const sparse = path.join(work, 'system.img');
    run('img2simg', [rawFile, sparse]);
    const reply = await extract(sparse);
    expect(reply.status, JSON.stringify(reply.error)).toBe('succeeded');
    expect(reply.summary).toMatchObject({ format: 'android-sparse', sparse: { block_size: 4096 } });
    const rows = written(await page(reply.evidence_id));
    const image = Object.values(rows)[0]!;
    // img2simg pads the image to whole blocks: the raw image is the original plus zeros.
    const padded = Buffer.concat([raw, Buffer.alloc((4096 - (raw.length % 4096)) % 4096)]);
    expect(image).toMatchObject({ size: padded.length, sha256: sha(padded) });
  });

  it('a uImage is its header and its whole payload, carved by the size the header states', async () => {
    const kernel = randomBytes(150_000);
    writeFileSync(path.join(work, 'kernel.bin'), kernel);
    const uimage = path.join(work, 'kernel.uimg');
    run('mkimage', [
      '-A',
      'arm',
      '-O',
      'linux',
      '-T',
      'kernel',
      '-C',
      'none',
      '-a',
      '0x8000',
      '-e',
      '0x8000',
      '-n',
      'probe-kernel',
      '-d',
      'kernel.bin',
      uimage,
    ]);
    const reply = await extract(uimage);
    expect(reply.status, JSON.stringify(reply.error)).toBe('succeeded');
    expect(reply.summary.uimage).toMatchObject({
      name: 'probe-kernel',
      os: 'linux',
      arch: 'arm',
      image_type: 'kernel',
      data_bytes: kernel.length,
      header_crc_ok: true,
      data_crc_ok: true,
      load_address: '0x00008000',
    });
    expect(written(await page(reply.evidence_id))['uimage-payload']).toMatchObject({ sha256: sha(kernel) });

    // extract_firmware carves the same region whole: header and payload, not 64 bytes.
    const firmware = Buffer.concat([randomBytes(4096), readFileSync(uimage), randomBytes(4096)]);
    writeFileSync(path.join(work, 'firmware.bin'), firmware);
    const carved = await call(client, 'extract_firmware', {
      artifact: await register(path.join(work, 'firmware.bin')),
      idempotency_key: `formats-${++n}`,
      detail: 'summary',
    });
    expect(carved.status, JSON.stringify(carved.error)).toBe('succeeded');
    const region = (await page(carved.evidence_id)).find((r) => r.path === 'carved/0x1000.uimage');
    expect(region).toMatchObject({ size: 64 + kernel.length, sha256: sha(readFileSync(uimage)) });
  });

  it("an APK lists its manifest and its signing block's schemes", async () => {
    const apk = path.join(work, 'app.apk');
    execFileSync('python3', [
      '-c',
      `
import struct, sys, zipfile
path = sys.argv[1]
with zipfile.ZipFile(path, 'w') as z:
    z.writestr('AndroidManifest.xml', b'\\x03\\x00\\x08\\x00' + b'\\x00' * 60)
    z.writestr('classes.dex', b'dex\\n035\\x00' + b'\\x00' * 100)
data = open(path, 'rb').read()
eocd = data.rindex(b'PK\\x05\\x06')
cd = struct.unpack('<I', data[eocd + 16:eocd + 20])[0]
pairs = b''.join(struct.pack('<QI', 4 + len(v), i) + v for i, v in [(0x7109871a, b'v2' * 50), (0xf05368c0, b'v3' * 25)])
size = len(pairs) + 8 + 16
block = struct.pack('<Q', size) + pairs + struct.pack('<Q', size) + b'APK Sig Block 42'
out = data[:cd] + block + data[cd:eocd + 16] + struct.pack('<I', cd + len(block)) + data[eocd + 20:]
open(path, 'wb').write(out)
`,
      apk,
    ]);
    const reply = await extract(apk);
    expect(reply.status, JSON.stringify(reply.error)).toBe('succeeded');
    expect(reply.summary.apk).toMatchObject({
      manifest: 'AndroidManifest.xml',
      signing_block: {
        present: true,
        blocks: [
          { id: '0x7109871a', scheme: 'APK Signature Scheme v2', bytes: 100 },
          { id: '0xf05368c0', scheme: 'APK Signature Scheme v3', bytes: 50 },
        ],
      },
    });
    expect(Object.keys(written(await page(reply.evidence_id)))).toEqual([
      'AndroidManifest.xml',
      'classes.dex',
    ]);
  });
});

describe('recursive extraction', () => {
  let deb: string;
  const changelog = Buffer.from('probe (1.0) unstable; urgency=low\n\n  * first\n'.repeat(50));
  beforeAll(() => {
    // A deb whose data.tar.xz holds a gzip'd changelog: deb → tar.xz → gzip.
    const pkg = path.join(work, 'pkg');
    mkdirSync(path.join(pkg, 'DEBIAN'), { recursive: true });
    mkdirSync(path.join(pkg, 'usr/share/doc/probe'), { recursive: true });
    writeFileSync(
      path.join(pkg, 'DEBIAN/control'),
      'Package: probe\nVersion: 1.0\nArchitecture: all\nMaintainer: t <t@example.org>\nDescription: probe\n',
    );
    writeFileSync(path.join(pkg, 'usr/share/doc/probe/changelog'), changelog);
    run('gzip', ['-9n', path.join(pkg, 'usr/share/doc/probe/changelog')]);
    deb = path.join(work, 'probe_1.0_all.deb');
    run('dpkg-deb', ['-Zxz', '--root-owner-group', '--build', pkg, deb]);
  });

  it('opens deb → data.tar.xz → changelog.gz in one launch, each entry with its exact provenance', async () => {
    const reply = await extract(deb, { recursive: true });
    expect(reply.status, JSON.stringify(reply.error)).toBe('succeeded');
    expect(reply.summary).toMatchObject({ format: 'deb', recursive: true, deepest: 2 });
    const rows = await page(reply.evidence_id);
    const deepest = rows.find((r) => r.depth === 2 && r.type === 'file');
    expect(deepest).toMatchObject({
      path: 'data.tar.xz.extracted/usr/share/doc/probe/changelog.gz.extracted/changelog',
      parent: 'data.tar.xz.extracted/usr/share/doc/probe/changelog.gz',
      inner_path: 'changelog',
      sha256: sha(changelog),
      status: 'written',
    });
    const gz = rows.find((r) => r.path === deepest!.parent);
    expect(gz).toMatchObject({
      depth: 1,
      parent: 'data.tar.xz',
      inner_path: './usr/share/doc/probe/changelog.gz',
    });
    expect(gz!.extracted_to).toBe(`${deepest!.parent}.extracted`);
    expect(rows.find((r) => r.path === 'data.tar.xz')).toMatchObject({
      depth: 0,
      parent: null,
      extracted_to: 'data.tar.xz.extracted',
    });
    const archives = await page(reply.evidence_id, 'archives');
    expect(archives.map((a) => [a.path, a.format, a.status])).toEqual(
      expect.arrayContaining([
        ['', 'deb', 'opened'],
        ['control.tar.xz', 'tar.xz', 'opened'],
        ['data.tar.xz', 'tar.xz', 'opened'],
        ['data.tar.xz.extracted/usr/share/doc/probe/changelog.gz', 'gzip', 'opened'],
      ]),
    );
    // The tree on disk is the manifest: the changelog is where its path says.
    const output = path.join(t.home, reply.summary.output as string);
    expect(sha(readFileSync(path.join(output, deepest!.path)))).toBe(sha(changelog));
  });

  it('stops at max_depth and says so; without recursive nothing nested is opened', async () => {
    const capped = await extract(deb, { recursive: true, max_depth: 1 });
    expect(capped.status).toBe('succeeded');
    const rows = await page(capped.evidence_id);
    expect(Math.max(...rows.map((r) => r.depth))).toBe(1);
    expect(rows.find((r) => r.path.endsWith('changelog.gz'))).toMatchObject({
      extracted_to: null,
      reason: 'nested archive not opened: max_depth=1 reached',
    });
    const flat = await extract(deb);
    expect(Math.max(...(await page(flat.evidence_id)).map((r) => r.depth))).toBe(0);
  });

  it('holds the global bounds across levels: a bomb two levels down rolls the whole extraction back', async () => {
    const bomb = path.join(work, 'bomb');
    mkdirSync(bomb);
    writeFileSync(path.join(bomb, 'zeros'), Buffer.alloc(64 * 1024 * 1024));
    run('gzip', ['-9', path.join(bomb, 'zeros')]);
    run('tar', ['-cf', path.join(work, 'bomb.tar'), '-C', bomb, 'zeros.gz']);
    const reply = await extract(path.join(work, 'bomb.tar'), { recursive: true, limits: { max_ratio: 100 } });
    expect(reply.status, JSON.stringify(reply)).toBe('failed');
    expect(reply.error.code).toBe('resource_constraint');
    expect(reply.summary.output).toBeNull();
  });

  it('registers an extracted entry by (evidence id, path), keeping its provenance, and extracts it again', async () => {
    const reply = await extract(deb, { recursive: true });
    const parent = reply.summary.artifact ?? reply.launch?.target?.digest;
    const registered = await call(client, 'register_artifact', {
      evidence_id: reply.evidence_id,
      entry: 'data.tar.xz',
    });
    expect(registered.error, JSON.stringify(registered.error)).toBeUndefined();
    const data = (await page(reply.evidence_id)).find((r) => r.path === 'data.tar.xz')!;
    expect(registered.artifact).toMatchObject({
      digest: `sha256:${data.sha256}`,
      name: 'data.tar.xz',
      provenance: { evidence_id: reply.evidence_id, path: 'data.tar.xz' },
    });
    expect(registered.artifact.provenance.parent_artifact).toMatch(/^sha256:/);
    if (parent) expect(registered.artifact.provenance.parent_artifact).toBe(parent);
    const again = await call(client, 'extract_artifact', {
      artifact: registered.artifact.digest,
      idempotency_key: `formats-${++n}`,
      detail: 'summary',
    });
    expect(again.status).toBe('succeeded');
    expect(again.summary.format).toBe('tar.xz');

    // Another team sees neither the Evidence nor its entries.
    const other = await t.connect(await t.tokenFor('mallory', 'other-team'));
    const refused = await call(other, 'register_artifact', {
      evidence_id: reply.evidence_id,
      entry: 'data.tar.xz',
    });
    expect(refused.error.code).toBe('not_found');
    // Only written files: a folder, a missing path and a non-extraction are refused with what to do.
    const dir = await call(client, 'register_artifact', { evidence_id: reply.evidence_id, entry: 'nope' });
    expect(dir.error).toMatchObject({ code: 'not_found' });
    expect(dir.error.remediation).toMatch(/entries collection/);
    const both = await call(client, 'register_artifact', {
      path: deb,
      evidence_id: reply.evidence_id,
      entry: 'x',
    });
    expect(both.error.code).toBe('invalid_params');
    await other.close();
  });

  it("refuses an imported record whose output points into another team's extractions", async () => {
    // The rival team extracts the deb; our team forges Evidence (a bundle anyone can write) whose
    // output climbs into the rival's folder and whose row claims the rival's file.
    const rival = await t.connect(await t.tokenFor('rita', 'rival'));
    const theirs = await call(rival, 'extract_artifact', {
      artifact: (await call(rival, 'register_artifact', { path: deb })).artifact.digest,
      idempotency_key: 'rival-deb',
      detail: 'summary',
    });
    expect(theirs.status).toBe('succeeded');
    const mine = await extract(deb);
    const exported = await call(client, 'export_evidence_bundle', {
      evidence_ids: [mine.evidence_id],
      idempotency_key: `formats-${++n}`,
    });
    const bundle = JSON.parse(readFileSync(exported.summary.path, 'utf8'));
    const entry = bundle.evidence[0];
    // Written out, not path.join'd: the ".." must stay in the recorded path.
    const rel = path.relative(path.join('extractions', 'rival'), theirs.summary.output);
    const climb = `${t.home}/extractions/local/../rival/${rel}`;
    const { evidence_id: _id, collections: info, document: _doc, ...record } = entry.record;
    record.summary = { ...record.summary, output: climb };
    const built = buildEvidence({
      record,
      document: { ...entry.document, output: climb },
      collections: { entries: entry.collections.entries },
      filterable: Object.fromEntries(Object.entries(info).map(([k, c]) => [k, (c as Reply).filterable])),
    });
    const forged = canonicalJson({
      format: 'dossier.evidence-bundle/1',
      evidence: [
        {
          record: built.record,
          document: JSON.parse(built.documentJson),
          collections: { entries: entry.collections.entries },
        },
      ],
    });
    const imported = await fetch(new URL('/bundles', t.url), {
      method: 'POST',
      headers: { Authorization: `Bearer ${t.token}` },
      body: forged,
    });
    expect(imported.status, await imported.clone().text()).toBe(200);
    const refused = await call(client, 'register_artifact', {
      evidence_id: built.record.evidence_id,
      entry: 'data.tar.xz',
    });
    expect(refused.error?.code).toBe('not_found');
    await rival.close();
  });
});

describe('hostile inputs to the new readers', () => {
  it('a sparse image whose derived name is refused ends cleanly, and the worker lives on', async () => {
    const raw = path.join(work, 'small.raw');
    writeFileSync(raw, randomBytes(3 * 4096));
    const sparse = path.join(work, 'small.simg');
    run('img2simg', [raw, sparse]);
    const uploaded = (await (
      await fetch(new URL('/artifacts?name=%2Fetc%2Fpasswd.img', t.url), {
        method: 'POST',
        headers: { Authorization: `Bearer ${t.token}` },
        body: new Uint8Array(readFileSync(sparse)),
      })
    ).json()) as Reply;
    const reply = await call(client, 'extract_artifact', {
      artifact: uploaded.artifact.digest,
      idempotency_key: `formats-${++n}`,
      detail: 'summary',
    });
    expect(reply.status, JSON.stringify(reply.error)).toBe('succeeded');
    expect((await page(reply.evidence_id))[0]).toMatchObject({ status: 'refused', reason: 'absolute path' });
    const after = await extract(path.join(work, 'tree.tar'));
    expect(after.status).toBe('succeeded');
  });

  it('a 40-byte sparse image that claims 4 billion empty chunks is refused at once', async () => {
    const header = Buffer.alloc(28);
    header.writeUInt32LE(0xed26ff3a, 0);
    header.writeUInt16LE(1, 4);
    header.writeUInt16LE(28, 8);
    header.writeUInt16LE(12, 10);
    header.writeUInt32LE(4096, 12);
    header.writeUInt32LE(0, 16);
    header.writeUInt32LE(0xffffffff, 20);
    const chunk = Buffer.alloc(12);
    chunk.writeUInt16LE(0xcac4, 0);
    const file = path.join(work, 'loop.simg');
    writeFileSync(file, Buffer.concat([header, chunk]));
    const reply = await extract(file, { timeout_ms: 60_000 });
    expect(reply.status).toBe('failed');
    expect(reply.error.code).toBe('unsupported_target');
    expect(reply.error.message).toMatch(/chunks/);
  });

  it("a zip's refused stored entry is read past, not mixed into the next entry's file", async () => {
    const file = path.join(work, 'refused.zip');
    const next = randomBytes(100_000);
    execFileSync('python3', [
      '-c',
      `
import sys, zipfile, os
with zipfile.ZipFile(sys.argv[1], 'w', zipfile.ZIP_STORED) as z:
    z.writestr('../escape.bin', os.urandom(3_000_000))
    z.writestr('next.bin', open(sys.argv[2], 'rb').read())
`,
      file,
      (writeFileSync(path.join(work, 'next.bin'), next), path.join(work, 'next.bin')),
    ]);
    const reply = await extract(file);
    expect(reply.status, JSON.stringify(reply.error)).toBe('succeeded');
    const rows = await page(reply.evidence_id);
    expect(rows[0]).toMatchObject({ path: '../escape.bin', status: 'refused' });
    expect(rows[1]).toMatchObject({ path: 'next.bin', status: 'written', sha256: sha(next) });
    const after = await extract(path.join(work, 'tree.tar'));
    expect(after.status).toBe('succeeded');
  });
});

describe('intake', () => {
  it("registers from the team's inbox, never from another team's", async () => {
    const me = await call(client, 'whoami');
    expect(me.inbox).toBe(path.join(t.home, 'inbox', 'local'));
    const file = path.join(me.inbox, 'dropped.bin');
    writeFileSync(file, randomBytes(1000));
    const registered = await call(client, 'register_artifact', { path: file });
    expect(registered.artifact.digest).toBe(`sha256:${sha(readFileSync(file))}`);

    const other = await t.connect(await t.tokenFor('eve', 'rivals'));
    const refused = await call(other, 'register_artifact', { path: file });
    expect(refused.error.code).toBe('policy_denied');
    expect(refused.error.remediation).toMatch(/inbox/);

    // A relative path is read in the caller's own inbox: the same file for its team, nothing for
    // another (its inbox has no such file), and never a way out of it.
    const relative = await call(client, 'register_artifact', { path: 'dropped.bin' });
    expect(relative.artifact.digest).toBe(registered.artifact.digest);
    const notTheirs = await call(other, 'register_artifact', { path: 'dropped.bin' });
    expect(notTheirs.error.code).toBe('not_found');
    for (const escape of ['../local/dropped.bin', 'a/../../local/dropped.bin', '..']) {
      const out = await call(other, 'register_artifact', { path: escape });
      expect(out.error.code, escape).toBe('invalid_params');
      expect(out.error.message).toMatch(/inbox/);
    }
    const nul = await call(client, 'register_artifact', { path: 'dropped.bin\0.txt' });
    expect(nul.error.code).toBe('invalid_params');
    expect(nul.error.message).toMatch(/NUL/);

    // A team's inbox swapped for a link to another's after its first use reads nothing through it.
    const theirs = (await call(other, 'whoami')).inbox as string;
    rmSync(theirs, { recursive: true });
    symlinkSync(me.inbox, theirs);
    try {
      for (const p of ['dropped.bin', path.join(theirs, 'dropped.bin')]) {
        const swapped = await call(other, 'register_artifact', { path: p });
        expect(swapped.error?.code, p).toMatch(/invalid_params|policy_denied/);
      }
    } finally {
      rmSync(theirs);
    }
    // Removed, it is made again when next read.
    expect((await call(other, 'register_artifact', { path: 'dropped.bin' })).error.code).toBe('not_found');
    expect(statSync(theirs).isDirectory()).toBe(true);
    await other.close();
  });

  it('`dossier upload FILE` posts to /artifacts and prints the record', async () => {
    const file = path.join(work, 'upload.bin');
    writeFileSync(file, randomBytes(5000));
    // Asynchronously: the gateway that answers runs in this process.
    const { stdout: out } = await promisify(execFile)(
      'node',
      [path.resolve('bin/dossier.js'), 'upload', file, '--name', 'firmware dump'],
      { env: { ...process.env, DOSSIER_HOME: t.home, DOSSIER_URL: t.url, DOSSIER_TOKEN: t.token } },
    );
    expect(JSON.parse(out).artifact).toMatchObject({
      digest: `sha256:${sha(readFileSync(file))}`,
      name: 'firmware dump',
      origin: 'upload',
    });
  });

  it("moves bundles over HTTP: GET lists and serves only your team's, POST imports", async () => {
    const reply = await extract(path.join(work, 'tree.tar'));
    const exported = await call(client, 'export_evidence_bundle', {
      evidence_ids: [reply.evidence_id],
      idempotency_key: `formats-${++n}`,
    });
    expect(exported.status, JSON.stringify(exported.error)).toBe('succeeded');
    const name = path.basename(exported.summary.path);
    const base = new URL('/', t.url);
    const get = (p: string, token = t.token) =>
      fetch(new URL(p, base), { headers: { Authorization: `Bearer ${token}` } });
    const listed = (await (await get('/bundles')).json()) as Reply;
    expect(listed.bundles.map((b: Reply) => b.name)).toContain(name);
    const body = Buffer.from(await (await get(`/bundles/${name}`)).arrayBuffer());
    expect(sha(body)).toBe(exported.summary.sha256);

    const rivals = await t.tokenFor('trent', 'rival-team');
    expect((await get(`/bundles/${name}`, rivals)).status).toBe(404);
    expect((await get('/bundles/..%2F..%2Fdossier.db', rivals)).status).toBe(404);
    const post = (token: string, data: Buffer) =>
      fetch(new URL('/bundles', base), {
        method: 'POST',
        headers: { Authorization: `Bearer ${token}` },
        body: new Uint8Array(data),
      });
    // Another team cannot import our Evidence; our own import is idempotent.
    expect((await post(rivals, body)).status).toBe(403);
    const imported = (await (await post(t.token, body)).json()) as Reply;
    expect(imported).toMatchObject({ imported: 0, already_present: 1, evidence_ids: [reply.evidence_id] });
    const tampered = Buffer.from(body.toString('utf8').replace('extract_artifact', 'extract_artifacT'));
    const bad = await post(t.token, tampered);
    expect(bad.status).toBeGreaterThanOrEqual(400);
  });

  it('answers every refusal of the HTTP routes in the error shape tools use: code, message, remediation', async () => {
    const base = new URL('/', t.url);
    const refusals: [string, Promise<Response>, number, string][] = [
      ['no token', fetch(new URL('/artifacts', base), { method: 'POST', body: 'x' }), 401, 'unauthorized'],
      [
        'a foreign Host',
        // fetch sends the URL's host whatever it is told: a raw request says another.
        new Promise<Response>((resolve, reject) =>
          http
            .get(
              new URL('/bundles', base),
              { headers: { Authorization: `Bearer ${t.token}`, Host: 'evil.example' } },
              (res) => {
                let text = '';
                res.on('data', (c: Buffer) => (text += c.toString()));
                res.on('end', () => resolve(new Response(text, { status: res.statusCode })));
              },
            )
            .on('error', reject),
        ),
        403,
        'forbidden',
      ],
      [
        'a method not served',
        fetch(new URL('/artifacts', base), { headers: { Authorization: `Bearer ${t.token}` } }),
        405,
        'invalid_params',
      ],
      [
        'a NUL in the name',
        fetch(new URL('/artifacts?name=a%00b', base), {
          method: 'POST',
          headers: { Authorization: `Bearer ${t.token}` },
          body: 'x',
        }),
        400,
        'invalid_params',
      ],
      [
        'a name over 256 characters',
        fetch(new URL(`/artifacts?name=${'n'.repeat(300)}`, base), {
          method: 'POST',
          headers: { Authorization: `Bearer ${t.token}` },
          body: 'never stored',
        }),
        400,
        'invalid_params',
      ],
      [
        'a multipart form instead of the file',
        fetch(new URL('/artifacts', base), {
          method: 'POST',
          headers: { Authorization: `Bearer ${t.token}` },
          body: (() => {
            const form = new FormData();
            form.append('file', new Blob(['never stored']), 'x.bin');
            return form;
          })(),
        }),
        415,
        'invalid_params',
      ],
      ['a path nothing serves', fetch(new URL('/artifacts/x', base)), 404, 'not_found'],
      [
        'a bundle name that is not percent-encoding',
        fetch(new URL('/bundles/%E0%A4%A', base), { headers: { Authorization: `Bearer ${t.token}` } }),
        404,
        'not_found',
      ],
    ];
    for (const [what, reply, status, code] of refusals) {
      const res = await reply;
      expect(res.status, what).toBe(status);
      const { error } = (await res.json()) as { error: Reply };
      expect(error, what).toMatchObject({
        code,
        message: expect.any(String),
        remediation: expect.any(String),
      });
    }
    // The over-long name stored nothing.
    const listed = await call(client, 'list_artifacts', {});
    expect(JSON.stringify(listed)).not.toContain('n'.repeat(300));
  });
});
