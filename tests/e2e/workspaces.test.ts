// Launch workspaces are bounded on disk while the program runs, and reclaimed
// by the stated policy afterwards (docs/operations.md).
import { existsSync, mkdirSync, readdirSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sweepWorkspaces, workspaceUsage } from '../../src/activities/workspaces/workspaces.ts';
import { call } from '../helpers/mcp.ts';
import { startTestStack, type TestStack } from '../helpers/stack.ts';
import { scratchDir } from '../helpers/scratch.ts';

const MiB = 1024 * 1024;
let t: TestStack;
beforeAll(async () => {
  t = await startTestStack({
    env: { DOSSIER_WORKSPACE_BYTES: String(4 * MiB), DOSSIER_WORKSPACE_RETENTION_HOURS: '0' },
  });
});
afterAll(async () => {
  await t?.stop(true);
});

const workspaces = () => {
  const root = path.join(t.home, 'workspaces');
  return existsSync(root) ? readdirSync(root).flatMap((l) => readdirSync(path.join(root, l))) : [];
};

describe('workspace disk', () => {
  it('no file a program writes outgrows DOSSIER_WORKSPACE_BYTES', async () => {
    const reply = await call(await t.connect(), 'capture_process_scenario', {
      executable: '/usr/bin/python3',
      args: ['-c', 'f = open("big", "wb")\nfor i in range(64): f.write(b"x" * 1048576)\n'],
      idempotency_key: 'one-big-file',
    });
    expect(reply.status).toBe('succeeded');
    expect(reply.summary.exit_code).not.toBe(0); // the write past the bound failed (EFBIG / SIGXFSZ)
    const files = (
      await call(await t.connect(), 'inspect_analysis_view', {
        evidence_id: reply.evidence_id,
        view: { kind: 'page', collection: 'files', offset: 0, limit: 16 },
      })
    ).rows.map((r: { row: { path: string; size: number } }) => r.row);
    expect(files.find((f: { path: string }) => f.path === 'big').size).toBeLessThanOrEqual(4 * MiB);
  });

  it('a program whose workspace passes the bound is ended, and the Evidence says why', async () => {
    const reply = await call(await t.connect(), 'capture_process_scenario', {
      executable: '/usr/bin/python3',
      args: [
        '-c',
        'import time\nfor i in range(60):\n  open(f"part{i}", "wb").write(b"x" * 524288)\n  time.sleep(0.1)\n',
      ],
      timeout_ms: 60_000,
      idempotency_key: 'many-files',
    });
    expect(reply.status).toBe('succeeded');
    expect(reply.summary.ended_by).toBe('workspace_limit');
    expect(reply.summary.duration_ms).toBeLessThan(30_000);
    const evidence = (await call(await t.connect(), 'get_evidence', { evidence_id: reply.evidence_id }))
      .evidence;
    expect(evidence.limitations.join('\n')).toMatch(/the workspace passed DOSSIER_WORKSPACE_BYTES=4194304/);
  });

  it('files a program holds open after unlinking them still count', async () => {
    const reply = await call(await t.connect(), 'capture_process_scenario', {
      executable: '/usr/bin/python3',
      args: [
        '-c',
        [
          'import os, time',
          'held = []',
          'for i in range(10):',
          '  f = open(f"t{i}", "wb"); os.unlink(f"t{i}"); f.write(b"x" * 3145728); f.flush(); held.append(f)',
          '  time.sleep(0.3)',
          'time.sleep(30)',
        ].join('\n'),
      ],
      timeout_ms: 60_000,
      idempotency_key: 'unlinked-files',
    });
    expect(reply.summary.ended_by).toBe('workspace_limit');
    expect(reply.summary.duration_ms).toBeLessThan(20_000);
  });

  it('files a program maps, then closes and unlinks, still count (a mapping keeps no descriptor)', async () => {
    const reply = await call(await t.connect(), 'capture_process_scenario', {
      executable: '/usr/bin/python3',
      args: [
        '-c',
        [
          'import ctypes, os, time',
          'libc = ctypes.CDLL(None, use_errno=True)',
          'libc.mmap.restype = ctypes.c_void_p',
          'libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]',
          'for i in range(10):',
          '  fd = os.open(f"m{i}", os.O_RDWR | os.O_CREAT, 0o600); os.posix_fallocate(fd, 0, 3145728)',
          '  assert libc.mmap(None, 4096, 1, 1, fd, 0) not in (None, ctypes.c_void_p(-1).value)',
          '  os.close(fd); os.unlink(f"m{i}")',
          '  time.sleep(0.3)',
          'time.sleep(30)',
        ].join('\n'),
      ],
      timeout_ms: 60_000,
      idempotency_key: 'unlinked-mapped-files',
    });
    expect(reply.summary.ended_by).toBe('workspace_limit');
    expect(reply.summary.duration_ms).toBeLessThan(20_000);
  });

  it('with DOSSIER_WORKSPACE_RETENTION_HOURS=0 a finished launch leaves no workspace behind', async () => {
    // A registered executable runs from a private copy beside the workspace: it goes too.
    const client = await t.connect();
    const { artifact } = await call(client, 'register_artifact', { path: '/usr/bin/true' });
    const reply = await call(client, 'capture_process_scenario', {
      executable: artifact.digest,
      idempotency_key: 'registered-executable',
    });
    expect(reply.status, JSON.stringify(reply.error)).toBe('succeeded');
    expect(workspaces()).toEqual([]);
  });
});

describe('measuring a workspace', () => {
  const scratch = scratchDir('measure');

  it('a workspace du cannot measure in time counts as over the bound, with why; an absent tracer folder counts nothing', async () => {
    const ws = path.join(scratch, 'many');
    mkdirSync(ws);
    for (let d = 0; d < 40; d++) {
      mkdirSync(path.join(ws, String(d)));
      for (let f = 0; f < 500; f++) writeFileSync(path.join(ws, String(d), String(f)), 'x');
    }
    // No .trace folder beside it (an untraced capture): that is 0, not a failure.
    const measured = await workspaceUsage(ws, [], 1024 * MiB);
    expect(measured).toEqual({ bytes: expect.any(Number), entries: 20_041, over: false });
    // du given 1 ms for 20,000 entries is killed before it answers: that says nothing of the disk.
    const unmeasured = await workspaceUsage(ws, [], 1024 * MiB, 200_000, 1);
    expect(unmeasured.over).toBe(true);
    expect(unmeasured.unmeasured).toBe('du did not finish within 1 ms');
  });
});

describe('the sweep', () => {
  const scratch = scratchDir('sweep');

  it('removes finished workspaces past retention and week-old orphans by their stamps; keeps the rest', async () => {
    const home = scratch;
    const dir = path.join(home, 'workspaces', 'abc');
    mkdirSync(dir, { recursive: true });
    const ago = (hours: number) => (Date.now() - hours * 3_600_000) / 1000;
    const make = (name: string, madeHoursAgo: number, doneHoursAgo?: number) => {
      const ws = path.join(dir, name);
      mkdirSync(ws);
      writeFileSync(path.join(ws, 'file'), 'x');
      mkdirSync(`${ws}.trace`);
      writeFileSync(`${ws}.made`, '');
      utimesSync(`${ws}.made`, ago(madeHoursAgo), ago(madeHoursAgo));
      if (doneHoursAgo !== undefined) {
        writeFileSync(`${ws}.done`, '');
        utimesSync(`${ws}.done`, ago(doneHoursAgo), ago(doneHoursAgo));
      }
    };
    make('old-finished', 31, 30);
    make('new-finished', 3, 2);
    make('running-for-a-day', 25);
    make('orphan', 8 * 24);
    // A registered executable's copy beside a workspace goes with it (it is no workspace of its own).
    for (const name of ['new-finished', 'orphan']) mkdirSync(path.join(dir, `${name}.bin`));
    // A running program can age its own folder; the sweep goes by the stamp beside it, which it cannot touch.
    make('program-aged-its-folder', 1);
    utimesSync(path.join(dir, 'program-aged-its-folder'), 0, 0);
    expect(await sweepWorkspaces(home, 24 * 3_600_000)).toBe(2);
    expect(readdirSync(dir).sort()).toEqual([
      'new-finished',
      'new-finished.bin',
      'new-finished.done',
      'new-finished.made',
      'new-finished.trace',
      'program-aged-its-folder',
      'program-aged-its-folder.made',
      'program-aged-its-folder.trace',
      'running-for-a-day',
      'running-for-a-day.made',
      'running-for-a-day.trace',
    ]);
    expect(statSync(path.join(dir, 'new-finished', 'file')).size).toBe(1);
  });
});
