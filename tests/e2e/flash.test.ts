// Flash file systems made here with mtd-utils (mkfs.jffs2, mkfs.ubifs,
// ubinize) and extracted through the gateway by the real unpackers
// (jefferson, ubi_reader) in the sandbox: every file with its digest, links
// recorded, device nodes refused as special files, a UBI image's volumes
// (UBIFS as folders, a raw squashfs volume opened recursively), the scratch
// space bound, and images that are not what they claim.
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allRows, registerAndExtract, type Reply } from '../helpers/mcp.ts';
import { startTestStack, type TestStack } from '../helpers/stack.ts';
import { scratchDir } from '../helpers/scratch.ts';

const work = scratchDir('flash');
const tree = path.join(work, 'tree');
const devices = path.join(work, 'devices.txt');
let t: TestStack;
let client: Client;
let n = 0;

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const run = (cmd: string, args: string[]) => execFileSync(cmd, args, { cwd: work, stdio: 'pipe' });
const files: Record<string, Buffer> = {
  'etc/issue': Buffer.from('firmware 1.0\n'),
  'bin/busybox': randomBytes(300_000),
  'lib/modules/deep/driver.ko': randomBytes(5_000),
};

/** A UBI image of the given volumes (ubinize's ini sections), 2 KiB pages and 128 KiB erase blocks. */
function ubinize(out: string, volumes: { name: string; image: string; type: 'dynamic' | 'static' }[]) {
  const ini = path.join(work, `${path.basename(out)}.ini`);
  writeFileSync(
    ini,
    volumes
      .map((v, id) =>
        [
          `[${v.name}]`,
          'mode=ubi',
          `image=${v.image}`,
          `vol_id=${id}`,
          `vol_type=${v.type}`,
          `vol_name=${v.name}`,
        ]
          .concat(v.type === 'dynamic' ? ['vol_size=8MiB'] : [])
          .join('\n'),
      )
      .join('\n\n'),
  );
  run('ubinize', ['-o', out, '-m', '2048', '-p', '128KiB', ini]);
}

const ubifs = (out: string, root: string) =>
  run('mkfs.ubifs', ['-r', root, '-m', '2048', '-e', '126976', '-c', '200', '-D', devices, '-o', out]);

beforeAll(async () => {
  for (const [rel, data] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(tree, rel)), { recursive: true });
    writeFileSync(path.join(tree, rel), data);
  }
  mkdirSync(path.join(tree, 'dev'));
  symlinkSync('../etc/issue', path.join(tree, 'bin', 'issue-link'));
  // A console device node, as firmware root file systems carry: made by the image tools, not by mknod.
  writeFileSync(devices, '/dev/console c 600 0 0 5 1 0 0 -\n');
  t = await startTestStack({ env: { DOSSIER_ALLOWED_ROOTS: `/usr/bin:${work}` } });
  client = await t.connect();
}, 120_000);
afterAll(async () => {
  await t?.stop(true);
});

const extract = (file: string, extra: Record<string, unknown> = {}) =>
  registerAndExtract(client, file, `flash-${++n}`, extra);

const entries = (evidenceId: string) => allRows(client, evidenceId);

/** Every fixture file under `prefix` written with its digest, the link recorded, the device refused. */
function holdsRootfs(rows: Reply[], prefix = '') {
  const byPath = new Map(rows.map((r) => [r.path, r]));
  for (const [rel, data] of Object.entries(files)) {
    expect(byPath.get(`${prefix}${rel}`), rel).toMatchObject({ status: 'written', sha256: sha(data) });
  }
  expect(byPath.get(`${prefix}bin/issue-link`)).toMatchObject({
    type: 'symlink',
    status: 'recorded',
    link_target: '../etc/issue',
  });
  expect(byPath.get(`${prefix}dev/console`)).toMatchObject({ type: 'other', status: 'refused' });
  expect(byPath.get(`${prefix}dev/console`)?.reason).toMatch(/CharacterDevice/);
}

describe('flash file systems', () => {
  it('JFFS2, little- and big-endian: every file with its digest, the link recorded, the device refused', async () => {
    for (const endian of ['-l', '-b']) {
      const image = path.join(work, `rootfs${endian}.jffs2`);
      run('mkfs.jffs2', ['-r', tree, '-o', image, '-e', '128KiB', endian, '-n', '-D', devices]);
      const reply = await extract(image);
      expect(reply.status, JSON.stringify(reply.error)).toBe('succeeded');
      expect(reply.summary.format).toBe('jffs2');
      expect(reply.summary.flash.counts).toMatchObject({ files: 3, special: 1 });
      holdsRootfs(await entries(reply.evidence_id));
    }
  });

  it('bare UBIFS: the whole tree', async () => {
    const image = path.join(work, 'rootfs.ubifs');
    ubifs(image, tree);
    const reply = await extract(image);
    expect(reply.status, JSON.stringify(reply.error)).toBe('succeeded');
    expect(reply.summary.format).toBe('ubifs');
    expect(reply.summary.flash.leb_size).toBe(126976);
    holdsRootfs(await entries(reply.evidence_id));
  });

  it('UBI: a UBIFS volume is a folder, a raw squashfs volume an image that recursion opens', async () => {
    const fs = path.join(work, 'ubi-rootfs.ubifs');
    ubifs(fs, tree);
    const squash = path.join(work, 'extra.sqfs');
    run('mksquashfs', [path.join(tree, 'lib'), squash, '-quiet', '-noappend']);
    const image = path.join(work, 'nand.ubi');
    ubinize(image, [
      { name: 'rootfs', image: fs, type: 'dynamic' },
      { name: 'extra', image: squash, type: 'static' },
    ]);
    const reply = await extract(image, { recursive: true });
    expect(reply.status, JSON.stringify(reply.error)).toBe('succeeded');
    expect(reply.summary.format).toBe('ubi');
    expect(reply.summary.flash.volumes).toEqual([
      expect.objectContaining({ name: 'extra', content: 'raw', path: 'extra.img' }),
      expect.objectContaining({ name: 'rootfs', content: 'ubifs' }),
    ]);
    const rows = await entries(reply.evidence_id);
    holdsRootfs(rows, 'rootfs/');
    // The static volume is the squashfs byte for byte, and recursion opened it.
    const raw = rows.find((r) => r.path === 'extra.img');
    expect(raw).toMatchObject({ sha256: sha(readFileSync(squash)), detected_type: 'squashfs' });
    const nested = rows.find((r) => r.depth === 1 && r.inner_path.endsWith('deep/driver.ko'));
    expect(nested).toMatchObject({
      depth: 1,
      parent: 'extra.img',
      sha256: sha(files['lib/modules/deep/driver.ko']!),
    });
  });

  it('the scratch space is the bytes left to the extraction: a larger file system is refused and rolled back', async () => {
    const big = path.join(work, 'big');
    mkdirSync(big);
    writeFileSync(path.join(big, 'a.bin'), randomBytes(3 * 1024 * 1024));
    writeFileSync(path.join(big, 'b.bin'), randomBytes(3 * 1024 * 1024));
    const image = path.join(work, 'big.ubifs');
    ubifs(image, big);
    const reply = await extract(image, { limits: { max_total_bytes: 4 * 1024 * 1024 } });
    expect(reply.status).toBe('failed');
    expect(reply.error.code).toBe('resource_constraint');
    expect(reply.error.message).toMatch(/scratch space/);
    expect(reply.error.remediation).toMatch(/max_total_bytes/);
    expect(reply.summary.bytes_written).toBe(0);
  });

  it('an image that only starts like one fails as unreadable, saying what the unpacker found', async () => {
    const fake = path.join(work, 'fake.ubi');
    writeFileSync(fake, Buffer.concat([Buffer.from('UBI#'), randomBytes(256 * 1024)]));
    const reply = await extract(fake);
    expect(reply.status).toBe('failed');
    expect(reply.error.code).toBe('unsupported_target');
    expect(reply.error.message).toMatch(/^The UBI file system could not be read: .+/);

    // A JFFS2 image cut short: the file whose data nodes are missing is written as far as it goes, and said so.
    const one = path.join(work, 'one');
    mkdirSync(path.join(one, 'bin'), { recursive: true });
    const big = randomBytes(300_000);
    writeFileSync(path.join(one, 'bin', 'big'), big);
    const jffs2 = path.join(work, 'cut.jffs2');
    run('mkfs.jffs2', ['-r', one, '-o', jffs2, '-e', '128KiB', '-l', '-n']);
    writeFileSync(jffs2, readFileSync(jffs2).subarray(0, 150_000));
    const cut = await extract(jffs2);
    expect(cut.status, JSON.stringify(cut.error)).toBe('succeeded');
    const [incomplete] = cut.summary.flash.incomplete;
    expect(incomplete).toMatchObject({ path: 'bin/big', size: 300_000 });
    expect(incomplete.covered).toBeLessThan(300_000);
    expect(cut.limitations.join('\n')).toMatch(/1 files in the artifact lack data for part of their size/);
    const row = (await entries(cut.evidence_id)).find((r) => r.path === 'bin/big')!;
    expect(row.size).toBeLessThan(300_000);
    // What was written is the file's true beginning, not filler.
    expect(row.sha256).toBe(sha(big.subarray(0, row.size)));
  });

  it('JFFS2 as a mounted file system shows it: the newest entry per name, no deleted names, nothing through a link', async () => {
    const dir = path.join(work, 'hostile');
    mkdirSync(dir);
    run('python3', [path.resolve('tests/fixtures/hostile_jffs2.py'), dir]);
    const content = async (image: string) => {
      const reply = await extract(path.join(dir, image));
      expect(reply.status, JSON.stringify(reply.error)).toBe('succeeded');
      const rows = await entries(reply.evidence_id);
      const files = Object.fromEntries(
        rows
          .filter((r) => r.type === 'file')
          .map((r) => [r.path, readFileSync(path.join(t.home, reply.summary.output, r.path), 'utf8')]),
      );
      return { reply, rows, files };
    };
    // Replaced by rename, and a temporary name deleted.
    const renamed = await content('renamed.jffs2');
    expect(renamed.files).toEqual({ rcS: 'NEW\n' });
    expect(renamed.reply.summary.flash.dropped_deleted).toBe(1);
    // A file whose parent is the link evil -> etc never lands in etc/.
    const linked = await content('through-link.jffs2');
    expect(linked.files).toEqual({ 'etc/passwd': 'REAL\n' });
    expect(linked.rows.find((r) => r.path === 'evil')).toMatchObject({ type: 'symlink', status: 'recorded' });
    expect(linked.reply.summary.flash.dropped_unreachable).toBe(1);
    expect(linked.reply.limitations.join('\n'), JSON.stringify(linked.reply)).toMatch(
      /1 JFFS2 directory entries were not extracted/,
    );
    // Data that did not decode is written as the unpacker filled it, and said so.
    const undecodable = await content('undecodable.jffs2');
    expect(undecodable.reply.summary.flash.incomplete).toEqual([
      { path: 'kernel.bin', covered: 4096, size: 4096, damaged_nodes: true },
    ]);
    expect(undecodable.reply.summary.flash.warnings.join('\n')).toMatch(/Decompression error/);
    // A file name is not a message: this one is an ordinary file, not a full scratch space.
    const named = await content('no-space-name.jffs2');
    expect(named.files).toEqual({ 'No space left on device': 'hi\n' });
  });
});
