// extract_artifact on real archives made here with the real tools, and on
// hostile archives written the way an attacker would (tests/fixtures).
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allRows, call, registerAndExtract } from '../helpers/mcp.ts';
import { startTestStack, type TestStack } from '../helpers/stack.ts';
import { scratchDir } from '../helpers/scratch.ts';

const work = scratchDir('archives');
const outside = path.join(work, 'outside');
const hostile = path.join(work, 'hostile');
let t: TestStack;
let client: Client;
let n = 0;

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

beforeAll(async () => {
  mkdirSync(outside);
  mkdirSync(hostile);
  execFileSync('python3', [path.resolve('tests/fixtures/hostile_archives.py'), hostile, outside]);
  t = await startTestStack({ env: { DOSSIER_ALLOWED_ROOTS: `/usr/bin:${work}` } });
  client = await t.connect();
});
afterAll(async () => {
  await t?.stop(true);
});

const extract = (file: string, extra: Record<string, unknown> = {}) =>
  registerAndExtract(client, file, `extract-${++n}`, extra);

const entries = (evidenceId: string) => allRows(client, evidenceId);

const extractions = () => path.join(t.home, 'extractions', 'local');

function nothingOutside() {
  expect(readdirSync(outside)).toEqual([]);
  expect(existsSync(path.join(t.home, 'extractions', 'escape.txt'))).toBe(false);
}

describe('extract_artifact on real archives', () => {
  const tree = path.join(work, 'tree');
  const files: Record<string, Buffer> = {
    'README.txt': Buffer.from('hello\n'),
    'bin/payload.bin': randomBytes(200_000),
    'etc/config/app.conf': Buffer.from('key=value\n'),
  };
  beforeAll(() => {
    for (const [rel, data] of Object.entries(files)) {
      mkdirSync(path.dirname(path.join(tree, rel)), { recursive: true });
      writeFileSync(path.join(tree, rel), data);
    }
    mkdirSync(path.join(tree, 'empty'));
    execFileSync('zip', ['-qr', path.join(work, 'a.zip'), '.'], { cwd: tree });
    execFileSync('tar', ['-cf', path.join(work, 'a.tar'), '.'], { cwd: tree });
    execFileSync('tar', ['-czf', path.join(work, 'a.tar.gz'), '.'], { cwd: tree });
    execFileSync('tar', ['-cjf', path.join(work, 'a.tar.bz2'), '.'], { cwd: tree });
    execFileSync('tar', ['-cJf', path.join(work, 'a.tar.xz'), '.'], { cwd: tree });
    execFileSync('7zz', ['a', '-bd', path.join(work, 'a.7z'), '.'], { cwd: tree, stdio: 'ignore' });
    writeFileSync(
      path.join(work, 'payload.bin.gz'),
      execFileSync('gzip', ['-c', path.join(tree, 'bin/payload.bin')]),
    );
  });

  it.each(['a.zip', 'a.tar', 'a.tar.gz', 'a.tar.bz2', 'a.tar.xz', 'a.7z'])(
    '%s: every file lands in a new output directory with the digest it had',
    async (name) => {
      const reply = await extract(path.join(work, name));
      expect(reply.status, JSON.stringify(reply.error)).toBe('succeeded');
      const output = path.join(t.home, reply.summary.output as string);
      expect(output.startsWith(path.join(t.home, 'extractions'))).toBe(true);
      for (const [rel, data] of Object.entries(files)) {
        expect(sha(readFileSync(path.join(output, rel))), rel).toBe(sha(data));
      }
      expect(statSync(path.join(output, 'empty')).isDirectory()).toBe(true);
      const manifest = await entries(reply.evidence_id);
      const payload = manifest.find((e) => e.path.replace(/^\.\//, '') === 'bin/payload.bin');
      expect(payload).toMatchObject({
        status: 'written',
        size: 200_000,
        sha256: sha(files['bin/payload.bin']!),
      });
      expect(manifest.filter((e) => e.status === 'refused')).toEqual([]);
    },
  );

  it('gzip: a lone stream becomes one file; nested archives are listed, not opened', async () => {
    const reply = await extract(path.join(work, 'payload.bin.gz'));
    expect(reply.status).toBe('succeeded');
    const [entry] = await entries(reply.evidence_id);
    expect(entry).toMatchObject({ path: 'payload.bin', sha256: sha(files['bin/payload.bin']!) });

    const nested = path.join(work, 'nested.zip');
    execFileSync('zip', ['-qj', nested, path.join(work, 'a.tar.gz')]);
    const outer = await extract(nested);
    const rows = await entries(outer.evidence_id);
    expect(rows).toMatchObject([
      { path: 'a.tar.gz', detected_type: 'gzip', nested_archive: true, status: 'written' },
    ]);
    expect(readdirSync(path.join(t.home, outer.summary.output))).toEqual(['a.tar.gz']);
  });
});

describe('extract_artifact on hostile archives', () => {
  it('zip-slip: the climbing entries are refused and recorded, the good one written, nothing outside', async () => {
    const reply = await extract(path.join(hostile, 'zip-slip.zip'));
    expect(reply.status).toBe('succeeded');
    const rows = await entries(reply.evidence_id);
    expect(rows.filter((r) => r.status === 'refused').map((r) => r.reason)).toEqual([
      'path escapes the output directory (..)',
      'path escapes the output directory (..)',
    ]);
    expect(readdirSync(path.join(t.home, reply.summary.output))).toEqual(['good.txt']);
    nothingOutside();
  });

  it('absolute paths are refused and recorded', async () => {
    const reply = await extract(path.join(hostile, 'absolute.tar'));
    const rows = await entries(reply.evidence_id);
    expect(rows.find((r) => r.path.startsWith('/'))).toMatchObject({
      status: 'refused',
      reason: 'absolute path',
    });
    nothingOutside();
  });

  it('a symlink pointing outside is recorded, never created, and a file through it is refused', async () => {
    const reply = await extract(path.join(hostile, 'symlink-escape.tar'));
    const rows = await entries(reply.evidence_id);
    expect(rows[0]).toMatchObject({
      path: 'link',
      type: 'symlink',
      link_target: outside,
      status: 'recorded',
    });
    expect(rows[1]).toMatchObject({ path: 'link/through-link.txt', status: 'refused' });
    expect(rows[1]!.reason).toMatch(/through a symlink/);
    expect(readdirSync(path.join(t.home, reply.summary.output))).toEqual([]);
    nothingOutside();
  });

  it('a hardlink to a file outside is recorded and not created', async () => {
    const reply = await extract(path.join(hostile, 'hardlink.tar'));
    const rows = await entries(reply.evidence_id);
    expect(rows[0]).toMatchObject({ type: 'hardlink', link_target: '/etc/passwd', status: 'recorded' });
    expect(readdirSync(path.join(t.home, reply.summary.output))).toEqual(['ok.txt']);
  });

  it.each([
    ['bomb.tar.xz', /max_ratio=1000/],
    ['many.tar', /more than 10000 entries/],
  ])('%s fails with a clear error and leaves no partial tree', async (name, message) => {
    const outputs = () =>
      existsSync(extractions()) ? readdirSync(extractions(), { recursive: true }).sort() : [];
    const before = outputs();
    const reply = await extract(path.join(hostile, name));
    expect(reply.status).toBe('failed');
    // The same archive fails the same way again: not worth a retry.
    expect(reply.error).toMatchObject({ code: 'resource_constraint', retryable: false });
    expect(reply.error.message).toMatch(message);
    const evidence = await call(client, 'get_evidence', { evidence_id: reply.evidence_id });
    expect(evidence.evidence.summary.cleanup).toEqual({ staging_removed: true, output: null });
    expect(outputs()).toEqual(before);
    expect(
      readdirSync(path.join(t.home, 'workspaces'), { recursive: true }).filter((p) =>
        String(p).endsWith('/out'),
      ),
    ).toEqual([]);
  });

  it('deep nesting beyond max_depth is refused and recorded', async () => {
    const reply = await extract(path.join(hostile, 'deep.tar'));
    const rows = await entries(reply.evidence_id);
    expect(rows.map((r) => r.status)).toEqual(['written', 'refused']);
    expect(rows[1]!.reason).toBe('deeper than max_depth=32');
  });

  it('a truncated archive fails with a clear error and leaves no partial tree', async () => {
    const source = path.join(work, 'to-truncate');
    mkdirSync(source, { recursive: true });
    writeFileSync(path.join(source, 'random.bin'), randomBytes(100_000));
    const whole = execFileSync('tar', ['-cz', '-C', source, '.']);
    const cut = path.join(work, 'truncated.tar.gz');
    writeFileSync(cut, whole.subarray(0, Math.floor(whole.length / 2)));
    const reply = await extract(cut, { format: 'tar.gz' });
    expect(reply.status).toBe('failed');
    expect(reply.error.code).toBe('unsupported_target');
    expect(reply.error.message).toMatch(/truncated or corrupt/);
    expect(reply.summary.cleanup.output).toBeNull();
  });
});

describe('extract_firmware', () => {
  it('carves a squashfs and unpacks it, recording links without creating them; binwalk lists what unblob could not read', async () => {
    const root = path.join(work, 'rootfs');
    mkdirSync(path.join(root, 'etc'), { recursive: true });
    mkdirSync(path.join(root, 'bin'), { recursive: true });
    const busybox = randomBytes(50_000);
    writeFileSync(path.join(root, 'etc/passwd'), 'root:x:0:0:root:/root:/bin/sh\n');
    writeFileSync(path.join(root, 'bin/busybox'), busybox);
    execFileSync('ln', ['-s', '/etc/shadow', path.join(root, 'etc/shadow-link')]);
    const fs = path.join(work, 'rootfs.sqsh');
    execFileSync('mksquashfs', [root, fs, '-quiet', '-noappend', '-no-progress']);
    const header = Buffer.alloc(4096, 'FIRMWARE HEADER ');
    const image = path.join(work, 'router.bin');
    writeFileSync(image, Buffer.concat([header, readFileSync(fs), Buffer.alloc(2048)]));

    const registered = await call(client, 'register_artifact', { path: image });
    const reply = await call(client, 'extract_firmware', {
      artifact: registered.artifact.digest,
      detail: 'summary',
      idempotency_key: 'firmware-1',
    });
    expect(reply.status, JSON.stringify(reply.error)).toBe('succeeded');
    expect(reply.summary.filesystems).toEqual(['squashfs-0x1000']);

    // binwalk listed only what unblob could not read (the header): not the squashfs unblob carved.
    type Listed = { offset: number; kind: string };
    const listed = async (evidence_id: string): Promise<Listed[]> => {
      const page = await call(client, 'inspect_analysis_view', {
        evidence_id,
        view: { kind: 'page', collection: 'signatures', limit: 100 },
      });
      return page.rows.map((r: { row: Listed }) => r.row);
    };
    const chunks = await call(client, 'inspect_analysis_view', {
      evidence_id: reply.evidence_id,
      view: { kind: 'page', collection: 'chunks', where: { unknown: [true] } },
    });
    expect(chunks.rows.map((r: { row: { start: number } }) => r.row.start)).toContain(0);
    expect((await listed(reply.evidence_id)).every((s) => s.offset < 4096)).toBe(true);
    // Over the whole image, beside unblob, on request.
    const whole = await call(client, 'extract_firmware', {
      artifact: registered.artifact.digest,
      detail: 'summary',
      signature_scan: 'image',
      idempotency_key: 'firmware-whole-listing',
    });
    expect(whole.status, JSON.stringify(whole.error)).toBe('succeeded');
    expect(await listed(whole.evidence_id)).toContainEqual(
      expect.objectContaining({ offset: 4096, kind: 'squashfs' }),
    );

    const rows = await entries(reply.evidence_id);
    const byPath = Object.fromEntries(rows.map((r) => [r.path.replace(/\/$/, ''), r]));
    // The carve is the filesystem's stated size; mksquashfs pads the file it wrote to 4 KiB.
    const carved = byPath['carved/0x1000.squashfs']!;
    expect(carved).toMatchObject({ detected_type: 'squashfs', status: 'written' });
    expect(carved.sha256).toBe(sha(readFileSync(fs).subarray(0, carved.size)));
    expect(byPath['squashfs-0x1000/bin/busybox']).toMatchObject({ status: 'written', sha256: sha(busybox) });
    expect(byPath['squashfs-0x1000/etc/shadow-link']).toMatchObject({
      type: 'symlink',
      link_target: '/etc/shadow',
      status: 'recorded',
    });
    const output = path.join(t.home, reply.summary.output as string);
    expect(readFileSync(path.join(output, 'squashfs-0x1000/etc/passwd'), 'utf8')).toMatch(/^root:/);
    expect(existsSync(path.join(output, 'squashfs-0x1000/etc/shadow-link'))).toBe(false);
  });
});

describe('extraction runs in its own thread', () => {
  it('cancel_launch stops an extraction mid-write and leaves nothing; the next extraction runs', async () => {
    // 60,000 small files: seconds of creating files, so the cancel lands while the thread writes.
    const big = path.join(work, 'many.tar');
    execFileSync('python3', [
      '-c',
      'import io,sys,tarfile\nwith tarfile.open(sys.argv[1], "w") as t:\n  for i in range(60000):\n    data = b"x" * 100\n    info = tarfile.TarInfo(f"d{i % 100}/f{i}")\n    info.size = len(data)\n    t.addfile(info, io.BytesIO(data))',
      big,
    ]);
    const registered = await call(client, 'register_artifact', { path: big });
    const args = {
      artifact: registered.artifact.digest,
      detail: 'summary',
      limits: { max_entries: 100_000 },
      idempotency_key: 'cancel-mid-write',
      wait_ms: 0,
    };
    const before = existsSync(extractions()) ? readdirSync(extractions()) : [];
    const started = await call(client, 'extract_artifact', args);
    expect(started.status).toBe('running');
    // Wait until the thread has written something (progress comes from the thread through the activity).
    for (let i = 0; i < 100; i++) {
      const now = await call(client, 'get_launch', { idempotency_key: 'cancel-mid-write' });
      if ((now.progress?.bytes ?? 0) > 0) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    await call(client, 'cancel_launch', { idempotency_key: 'cancel-mid-write' });
    const cancelled = await call(client, 'await_launch', {
      idempotency_key: 'cancel-mid-write',
      wait_ms: 30_000,
    });
    expect(cancelled.status, JSON.stringify(cancelled)).toBe('cancelled');
    expect(cancelled.error?.code).toBe('cancelled');
    // Nothing of it was published.
    expect(existsSync(extractions()) ? readdirSync(extractions()) : []).toEqual(before);
    const small = path.join(work, 'after-cancel.tar');
    execFileSync('tar', ['-cf', small, '-C', '/usr/bin', 'true']);
    const again = await extract(small);
    expect(again.status, JSON.stringify(again.error)).toBe('succeeded');
  });
});
