// What a team's finished launches keep on a worker's disk is bounded
// (DOSSIER_TEAM_WORKSPACE_BYTES): past it the team's oldest workspaces and
// extraction outputs are reclaimed, never another team's or a running
// launch's, and the Evidence of what was reclaimed stays whole.
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, readdirSync, statSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allRows, call, type Reply } from '../helpers/mcp.ts';
import { scratchDir } from '../helpers/scratch.ts';
import { startTestStack, type TestStack } from '../helpers/stack.ts';
import { eventually } from '../helpers/wait.ts';

const MiB = 1024 * 1024;
const roots = scratchDir('team-disk');
let t: TestStack;
let alice: Client; // team a
let bob: Client; // team b
beforeAll(async () => {
  t = await startTestStack({
    env: {
      DOSSIER_ALLOWED_ROOTS: `/usr/bin:${roots}`,
      DOSSIER_WORKSPACE_BYTES: String(4 * MiB),
      // Three finished 3 MiB launches fit; a fourth reclaims the oldest.
      DOSSIER_TEAM_WORKSPACE_BYTES: String(10 * MiB),
    },
  });
  alice = await t.connect(await t.tokenFor('alice', 'a'));
  bob = await t.connect(await t.tokenFor('bob', 'b'));
}, 60_000);
afterAll(async () => {
  await t?.stop(true);
});

/** A capture that leaves a 3 MiB file, `blob`, in its workspace. */
async function leave3MiB(client: Client, key: string): Promise<Reply> {
  const reply = await call(client, 'capture_process_scenario', {
    executable: '/usr/bin/dd',
    args: ['if=/dev/zero', 'of=blob', 'bs=1048576', 'count=3'],
    idempotency_key: key,
  });
  expect(reply.status, JSON.stringify(reply.error)).toBe('succeeded');
  expect(reply.summary.exit_code).toBe(0);
  return reply;
}

/** The host folder of a launch's one dispatch (Evidence names it `/workspace`, as the program saw it). */
function workspaceOf(reply: Reply): string {
  const folder = path.join(
    t.home,
    'workspaces',
    createHash('sha256').update(reply.launch.workflow_id).digest('hex').slice(0, 24),
  );
  const dispatches = readdirSync(folder).filter((n) => !n.includes('.'));
  expect(dispatches).toHaveLength(1);
  return path.join(folder, dispatches[0]!);
}

const kept = (folder: string) => existsSync(folder);
const zeros3MiB = createHash('sha256')
  .update(Buffer.alloc(3 * MiB))
  .digest('hex');

describe('a team bound on retained disk', () => {
  const a: { reply: Reply; workspace: string; files: Reply[] }[] = [];
  let b: { workspace: string };

  it("past the bound, the team's oldest finished workspace is reclaimed; its Evidence still pages its files", async () => {
    const bReply = await leave3MiB(bob, 'b-1');
    b = { workspace: workspaceOf(bReply) };
    for (const key of ['a-1', 'a-2', 'a-3']) {
      const reply = await leave3MiB(alice, key);
      a.push({
        reply,
        workspace: workspaceOf(reply),
        files: await allRows(alice, reply.evidence_id, 'files'),
      });
    }
    expect(a.map((x) => kept(x.workspace))).toEqual([true, true, true]);
    expect(statSync(path.join(a[0]!.workspace, 'blob')).size).toBe(3 * MiB);

    const fourth = await leave3MiB(alice, 'a-4');
    a.push({ reply: fourth, workspace: workspaceOf(fourth), files: [] });
    expect(a.map((x) => kept(x.workspace))).toEqual([false, true, true, true]);
    // Nothing beside it is left either: its tracer's folder, its stamps.
    const launchFolder = path.dirname(a[0]!.workspace);
    expect(readdirSync(launchFolder)).toEqual([]);

    const files = await allRows(alice, a[0]!.reply.evidence_id, 'files');
    expect(files).toEqual(a[0]!.files);
    expect(files.find((f) => f.path === 'blob')).toMatchObject({ size: 3 * MiB, sha256: zeros3MiB });

    const fifth = await leave3MiB(alice, 'a-5');
    a.push({ reply: fifth, workspace: workspaceOf(fifth), files: [] });
    expect(a.map((x) => kept(x.workspace))).toEqual([false, false, true, true, true]);
  });

  it("another team's launches never reclaim a team's workspaces", async () => {
    // a passed its bound twice (a-1 and a-2 went); b's workspace, older than all of a's, stayed.
    expect(a.slice(0, 2).map((x) => kept(x.workspace))).toEqual([false, false]);
    expect(kept(b.workspace)).toBe(true);
    expect(statSync(path.join(b.workspace, 'blob')).size).toBe(3 * MiB);
    // And b's own launches, well under its bound, reclaim nothing of a's.
    await leave3MiB(bob, 'b-2');
    expect(a.slice(2).map((x) => kept(x.workspace))).toEqual([true, true, true]);
  });

  it("a running launch's workspace is never reclaimed; finished, it is the newest and stays", async () => {
    const running = await call(alice, 'capture_process_scenario', {
      executable: '/usr/bin/python3',
      args: ['-c', 'import time\nopen("blob", "wb").write(b"\\0" * 3145728)\ntime.sleep(15)\n'],
      timeout_ms: 60_000,
      wait_ms: 1_000,
      idempotency_key: 'a-running',
    });
    expect(running.status).toBe('running');
    const folder = path.join(
      t.home,
      'workspaces',
      createHash('sha256').update(running.launch.workflow_id).digest('hex').slice(0, 24),
    );
    const workspace = await eventually('the running capture to write its file', () => {
      const made = existsSync(folder) ? readdirSync(folder).find((n) => !n.includes('.')) : undefined;
      if (!made) return '';
      const file = path.join(folder, made, 'blob');
      return existsSync(file) && statSync(file).size === 3 * MiB ? path.join(folder, made) : '';
    });
    // Three more finished launches push a over its bound three times while it runs.
    for (const key of ['a-6', 'a-7', 'a-8']) await leave3MiB(alice, key);
    // The three finished before them went; the running one, older than all three, did not.
    expect(a.slice(2).map((x) => kept(x.workspace))).toEqual([false, false, false]);
    expect(statSync(path.join(workspace, 'blob')).size).toBe(3 * MiB);

    const done = await call(alice, 'await_launch', { idempotency_key: 'a-running', wait_ms: 60_000 });
    expect(done.status).toBe('succeeded');
    expect(kept(workspace)).toBe(true);
    expect((await allRows(alice, done.evidence_id, 'files')).find((f) => f.path === 'blob')).toMatchObject({
      size: 3 * MiB,
      sha256: zeros3MiB,
    });
  });
});

describe('extraction outputs count too', () => {
  let archive: string;
  beforeAll(() => {
    const dir = path.join(roots, 'tree');
    mkdirSync(dir);
    execFileSync(
      '/usr/bin/dd',
      ['if=/dev/urandom', `of=${path.join(dir, 'payload.bin')}`, 'bs=1048576', 'count=3'],
      {
        stdio: 'ignore',
      },
    );
    archive = path.join(roots, 'three-mib.tar');
    execFileSync('/usr/bin/tar', ['-cf', archive, '-C', dir, 'payload.bin']);
  });

  it('a reclaimed output answers register_artifact and register_device with what happened; its Evidence still lists its entries', async () => {
    const { artifact } = await call(alice, 'register_artifact', { path: archive });
    const extracted = await call(alice, 'extract_artifact', {
      artifact: artifact.digest,
      idempotency_key: 'x-1',
    });
    expect(extracted.status, JSON.stringify(extracted.error)).toBe('succeeded');
    // Evidence names an output relative to DOSSIER_HOME.
    const output = path.resolve(t.home, extracted.summary.output as string);
    expect(output.startsWith(path.join(t.home, 'extractions', 'a'))).toBe(true);
    const entries = await allRows(alice, extracted.evidence_id);
    for (const key of ['x-2', 'x-3', 'x-4']) await leave3MiB(alice, key);
    expect(kept(output)).toBe(false);

    const registered = await call(alice, 'register_artifact', {
      evidence_id: extracted.evidence_id,
      entry: 'payload.bin',
    });
    expect(registered.error).toMatchObject({
      code: 'not_found',
      details: { evidence_id: extracted.evidence_id, reason: 'reclaimed' },
    });
    expect(registered.error.message).toMatch(
      /was reclaimed at .*DOSSIER_TEAM_WORKSPACE_BYTES.*still lists every entry with its size and SHA-256/,
    );
    const device = await call(alice, 'register_device', {
      device_id: 'on-reclaimed',
      emulated: { evidence_id: extracted.evidence_id, prefix: '', arch: 'arm' },
    });
    expect(device.error).toMatchObject({ code: 'not_found', details: { reason: 'reclaimed' } });
    expect(await allRows(alice, extracted.evidence_id)).toEqual(entries);
    expect(entries.find((e) => e.path === 'payload.bin')).toMatchObject({ size: 3 * MiB, status: 'written' });
  });

  it('the rootfs of an active emulated device is kept; retired, it is reclaimed like the rest', async () => {
    const { artifact } = await call(alice, 'register_artifact', { path: archive });
    const extracted = await call(alice, 'extract_artifact', {
      artifact: artifact.digest,
      idempotency_key: 'x-5',
    });
    // Evidence names an output relative to DOSSIER_HOME.
    const output = path.resolve(t.home, extracted.summary.output as string);
    const device = await call(alice, 'register_device', {
      device_id: 'arm-board',
      emulated: { evidence_id: extracted.evidence_id, prefix: '', arch: 'arm' },
    });
    expect(device.error).toBeUndefined();
    const after = [];
    for (const key of ['x-6', 'x-7', 'x-8', 'x-9']) after.push(workspaceOf(await leave3MiB(alice, key)));
    expect(kept(output)).toBe(true);
    expect(after.map(kept)).toEqual([false, false, true, true]);

    await call(alice, 'retire_device', { device: 'arm-board' });
    await leave3MiB(alice, 'x-10');
    expect(kept(output)).toBe(false);
  });

  it('one extraction may not keep more than the whole team may: it is refused and leaves nothing', async () => {
    const dir = path.join(roots, 'big');
    mkdirSync(dir);
    execFileSync(
      '/usr/bin/dd',
      ['if=/dev/urandom', `of=${path.join(dir, 'big.bin')}`, 'bs=1048576', 'count=11'],
      {
        stdio: 'ignore',
      },
    );
    const big = path.join(roots, 'eleven-mib.tar');
    execFileSync('/usr/bin/tar', ['-cf', big, '-C', dir, 'big.bin']);
    const { artifact } = await call(alice, 'register_artifact', { path: big });
    const reply = await call(alice, 'extract_artifact', {
      artifact: artifact.digest,
      idempotency_key: 'x-big',
    });
    expect(reply.status).toBe('failed');
    expect(reply.error).toMatchObject({
      code: 'resource_constraint',
      details: { team_workspace_bytes: 10 * MiB },
    });
    expect(reply.error.message).toMatch(/DOSSIER_TEAM_WORKSPACE_BYTES/);
    expect(reply.summary.output).toBeNull();
  });
});

describe("a registered executable's private copy", () => {
  it('goes when its launch ends: the artifact store keeps its bytes', async () => {
    const program = path.join(roots, 'true-copy');
    copyFileSync('/usr/bin/true', program);
    const { artifact } = await call(alice, 'register_artifact', { path: program });
    const reply = await call(alice, 'capture_process_scenario', {
      executable: artifact.digest,
      idempotency_key: 'bin-1',
    });
    expect(reply.status, JSON.stringify(reply.error)).toBe('succeeded');
    const workspace = workspaceOf(reply);
    expect(kept(workspace)).toBe(true);
    expect(kept(`${workspace}.bin`)).toBe(false);
  });
});
