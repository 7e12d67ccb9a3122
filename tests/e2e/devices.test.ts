// Device operations as keyed launches, on real parts started here: an OpenSSH
// server on 127.0.0.1 is the SSH device, an armhf busybox in a squashfs is
// the emulated device (qemu-user), and Debian's adb server with no phone
// attached stands for an unreachable adb device. The worker runs as its own
// process so it can really die while it holds a device.
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import {
  appendFileSync,
  existsSync,
  mkdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex } from '../../src/domain/canonical.ts';
import { freshStoreLocation } from '../helpers/backends.ts';
import { call, type Reply } from '../helpers/mcp.ts';
import { spawnDossier, type Proc } from '../helpers/processes.ts';
import { DEVICE_HOME, startSshd, type TestSshd } from '../helpers/sshd.ts';
import { startTestStack, type TestStack } from '../helpers/stack.ts';
import { eventually } from '../helpers/wait.ts';
import { scratchDir } from '../helpers/scratch.ts';

const isRoot = process.getuid?.() === 0;
const work = scratchDir('devices');
const roots = path.join(work, 'roots');
const TURN_MS = 4_000;
let t: TestStack;
let worker: Proc;
let sshd: TestSshd;
let alice: Client;
const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');
const startWorker = () => spawnDossier('worker', t.env, 'worker ready');

async function lines(client: Client, evidenceId: string, collection: string): Promise<string[]> {
  const page = await call(client, 'inspect_analysis_view', {
    evidence_id: evidenceId,
    view: { kind: 'page', collection, offset: 0, limit: 256 },
  });
  return page.rows.map((r: Reply) => r.row.text as string);
}

const ssh = (over: Record<string, unknown> = {}) => ({
  host: '127.0.0.1',
  port: sshd.port,
  user: 'dossier-device',
  host_key: sshd.hostKey,
  private_key: sshd.privateKey,
  reboot_command: ['/bin/echo', 'rebooting'],
  ...over,
});

beforeAll(async () => {
  if (!isRoot) return;
  mkdirSync(roots);
  sshd = await startSshd();
  rmSync(path.join(DEVICE_HOME, 'work'), { recursive: true, force: true });
  execFileSync('install', ['-d', '-o', 'dossier-device', path.join(DEVICE_HOME, 'work')]);
  t = await startTestStack({
    env: { DOSSIER_ALLOWED_ROOTS: `/usr/bin:${roots}`, DOSSIER_DEVICE_TURN_MS: String(TURN_MS) },
    parts: { workers: false },
  });
  worker = await startWorker();
  alice = await t.connect();
  const registered = await call(alice, 'register_device', { device_id: 'bench-ssh', ssh: ssh() });
  expect(registered.error).toBeUndefined();
}, 120_000);
afterAll(async () => {
  await worker?.kill();
  await t?.stop(true);
  await sshd?.stop();
});

describe.skipIf(!isRoot)('SSH devices (needs root: an sshd, a device user)', () => {
  it('registers a device with a pinned host key and keeps its private key out of every reply', async () => {
    const device = (await call(alice, 'get_device', { device: 'bench-ssh' })).device;
    expect(device).toMatchObject({ kind: 'ssh', status: 'active', has_credential: true });
    expect(device.config.host_key_fingerprint).toMatch(/^SHA256:/);
    const listed = JSON.stringify(await call(alice, 'list_devices', {}));
    for (const secret of [sshd.privateKey.split('\n')[1]!, 'private_key'])
      expect(listed).not.toContain(secret);
    const again = await call(alice, 'register_device', { device_id: 'bench-ssh', ssh: ssh() });
    expect(again.created).toBe(false);
    const other = await call(alice, 'register_device', { device_id: 'bench-ssh', ssh: ssh({ port: 1 }) });
    expect(other.error.code).toBe('invalid_params');
  });

  it('runs argv with exactly the given environment; a retry attaches and never runs it twice', async () => {
    const args = {
      device: 'bench-ssh',
      argv: ['/bin/sh', '-c', 'echo "hello $WHO"; id -un; echo ran >> "$HOME/work/exec-count"'],
      env: { WHO: 'it’s me; $(rm -rf /)', PATH: '/usr/bin:/bin', HOME: DEVICE_HOME },
      idempotency_key: 'exec-1',
    };
    const first = await call(alice, 'device_exec', args);
    expect(first.status, JSON.stringify(first.error)).toBe('succeeded');
    expect(await lines(alice, first.evidence_id, 'stdout')).toEqual([
      'hello it’s me; $(rm -rf /)',
      'dossier-device',
    ]);
    const retry = await call(alice, 'device_exec', args);
    expect(retry).toMatchObject({
      status: 'succeeded',
      evidence_id: first.evidence_id,
      launch: { attached: true },
    });
    expect(readFileSync(path.join(DEVICE_HOME, 'work', 'exec-count'), 'utf8')).toBe('ran\n');
  });

  it('pushes an artifact with its mode, refuses to overwrite without overwrite, and pulls files and folders back as artifacts', async () => {
    const file = path.join(roots, 'payload.bin');
    writeFileSync(file, 'pushed content\n');
    const { artifact } = await call(alice, 'register_artifact', { path: file });
    const target = path.join(DEVICE_HOME, 'work', 'pushed.bin');
    const pushed = await call(alice, 'device_push', {
      device: 'bench-ssh',
      artifact: artifact.digest,
      path: target,
      mode: '0600',
      idempotency_key: 'push-1',
    });
    expect(pushed.status, JSON.stringify(pushed.error)).toBe('succeeded');
    expect(readFileSync(target, 'utf8')).toBe('pushed content\n');
    expect(statSync(target).mode & 0o777).toBe(0o600);

    writeFileSync(path.join(roots, 'other.bin'), 'must not land\n');
    const other = (await call(alice, 'register_artifact', { path: path.join(roots, 'other.bin') })).artifact;
    const refused = await call(alice, 'device_push', {
      device: 'bench-ssh',
      artifact: other.digest,
      path: target,
      idempotency_key: 'push-2',
    });
    expect(refused.status).toBe('failed');
    expect(refused.error.message).toMatch(/already exists/);
    expect(readFileSync(target, 'utf8')).toBe('pushed content\n');

    const made = path.join(DEVICE_HOME, 'work', 'made-on-device.txt');
    writeFileSync(made, `made on the device at ${Date.now()}\n`);
    const pulled = await call(alice, 'device_pull', {
      device: 'bench-ssh',
      path: made,
      idempotency_key: 'pull-1',
    });
    expect(pulled.summary).toMatchObject({ kind: 'file', artifact: `sha256:${sha(readFileSync(made))}` });
    const listed = await call(alice, 'list_artifacts', {});
    const origin = listed.artifacts.find((a: Reply) => a.digest === pulled.summary.artifact).origin;
    expect(origin).toBe(`device:bench-ssh:${made}`);
    const folder = await call(alice, 'device_pull', {
      device: 'bench-ssh',
      path: path.join(DEVICE_HOME, 'work'),
      idempotency_key: 'pull-dir',
    });
    expect(folder.summary).toMatchObject({ kind: 'dir', mime_type: 'application/x-tar' });
  });

  it('follows a log file that grows, keeping only the lines that match the filter', async () => {
    const log = path.join(DEVICE_HOME, 'work', 'app.log');
    writeFileSync(log, 'old line\n');
    const started = await call(alice, 'device_capture_logs', {
      device: 'bench-ssh',
      source: 'file',
      path: log,
      duration_ms: 10_000,
      filter: 'event',
      wait_ms: 0,
      idempotency_key: 'logs-1',
    });
    expect(started.status).toBe('running');
    // Lines written once the capture says it follows are all in it, however late the device got there.
    await eventually(
      'the capture to follow the file',
      async () => {
        const launch = await call(alice, 'get_launch', { idempotency_key: 'logs-1' });
        return launch.progress?.phase === 'following' || launch.status !== 'running';
      },
      30_000,
    );
    for (let i = 0; i < 5; i++) {
      await new Promise((r) => setTimeout(r, 300));
      appendFileSync(log, `event ${i}\nnoise ${i}\n`);
    }
    const done = await call(alice, 'await_launch', { idempotency_key: 'logs-1', wait_ms: 30_000 });
    expect(done.status, JSON.stringify(done.error)).toBe('succeeded');
    expect(await lines(alice, done.evidence_id, 'lines')).toEqual([
      'event 0',
      'event 1',
      'event 2',
      'event 3',
      'event 4',
    ]);
  });

  it('refuses a device whose host key changed, naming both fingerprints; an unreachable device is device_unavailable', async () => {
    await call(alice, 'register_device', { device_id: 'spoofed', ssh: ssh({ host_key: sshd.otherHostKey }) });
    const spoofed = await call(alice, 'device_exec', {
      device: 'spoofed',
      argv: ['/bin/true'],
      idempotency_key: 'spoof-1',
    });
    expect(spoofed.status).toBe('failed');
    expect(spoofed.error.code).toBe('policy_denied');
    expect(spoofed.error.details.offered).toMatch(/^SHA256:/);
    expect(spoofed.error.details.pinned).toMatch(/^SHA256:/);
    expect(spoofed.error.details.offered).not.toBe(spoofed.error.details.pinned);
    expect(spoofed.error.details.effect_began).toBe(false);

    await call(alice, 'register_device', { device_id: 'gone', ssh: ssh({ port: 1 }) });
    const gone = await call(alice, 'device_exec', {
      device: 'gone',
      argv: ['/bin/true'],
      idempotency_key: 'gone-1',
    });
    expect(gone.error.code).toBe('device_unavailable');
    expect(gone.error.remediation).toMatch(/reachable/);
  });

  it('reboots with the registered command; an SSH device installs no packages through dossier', async () => {
    const reboot = await call(alice, 'device_reboot', { device: 'bench-ssh', idempotency_key: 'reboot-1' });
    expect(reboot.status, JSON.stringify(reboot.error)).toBe('succeeded');
    expect(reboot.summary).toMatchObject({ exit_code: 0, output_head: 'rebooting\n' });
    const file = path.join(roots, 'app.apk');
    writeFileSync(file, 'not really an apk');
    const { artifact } = await call(alice, 'register_artifact', { path: file });
    const install = await call(alice, 'device_install_package', {
      device: 'bench-ssh',
      artifact: artifact.digest,
      idempotency_key: 'install-1',
    });
    expect(install.error.code).toBe('unsupported_target');
  });

  it('an ASCII apostrophe in argv, environment and a path reaches the device exactly as given', async () => {
    const pwned = path.join(DEVICE_HOME, 'work', 'pwned');
    const values = [
      "it's",
      "'",
      "''",
      "'\\''",
      "a'b'c",
      `'; touch ${pwned}; '`,
      '$(id)\'"`id`',
      "end'",
      "x\\'y",
    ];
    const env = { Q: `it's 'quoted' "twice" \\ $HOME \`id\` $(id) '`, PATH: '/usr/bin:/bin' };
    const reply = await call(alice, 'device_exec', {
      device: 'bench-ssh',
      argv: ['/bin/sh', '-c', 'printf "%s\\n" "$Q" "$@"', 'sh', ...values],
      env,
      idempotency_key: 'apostrophe-1',
    });
    expect(reply.status, JSON.stringify(reply.error)).toBe('succeeded');
    expect(await lines(alice, reply.evidence_id, 'stdout')).toEqual([env.Q, ...values]);
    expect(existsSync(pwned)).toBe(false);
    // A folder pulled whole goes through the device's shell too (tar -C <path>).
    const folder = path.join(DEVICE_HOME, 'work', "it's here");
    mkdirSync(folder, { recursive: true });
    writeFileSync(path.join(folder, "o'clock.txt"), 'five\n');
    const pulled = await call(alice, 'device_pull', {
      device: 'bench-ssh',
      path: folder,
      idempotency_key: 'apostrophe-pull',
    });
    expect(pulled.status, JSON.stringify(pulled.error)).toBe('succeeded');
    expect(pulled.summary).toMatchObject({ kind: 'dir', mime_type: 'application/x-tar' });
    const listed = (await call(alice, 'list_artifacts', {})).artifacts as Reply[];
    expect(listed.find((a) => a.digest === pulled.summary.artifact)!.origin).toBe(
      `device:bench-ssh:${folder}`,
    );
  });

  it('a retired device takes no new operation and says why, keeps its id, lists as retired; neither another team nor a viewer can retire it', async () => {
    expect(
      (await call(alice, 'register_device', { device_id: 'old-bench', ssh: ssh() })).error,
    ).toBeUndefined();
    const rival = await t.connect(await t.tokenFor('rival-retirer', 'rival-team'));
    expect((await call(rival, 'retire_device', { device: 'old-bench' })).error.code).toBe('not_found');
    const viewer = await t.connect(await t.tokenFor('watcher', 'local', 'viewer'));
    expect((await call(viewer, 'retire_device', { device: 'old-bench' })).error.code).toBe('forbidden');
    expect((await call(alice, 'get_device', { device: 'old-bench' })).device.status).toBe('active');
    const before = await call(alice, 'device_exec', {
      device: 'old-bench',
      argv: ['/bin/true'],
      idempotency_key: 'retire-before',
    });
    expect(before.status, JSON.stringify(before.error)).toBe('succeeded');

    const retired = await call(alice, 'retire_device', { device: 'old-bench' });
    expect(retired).toMatchObject({ retired: true, device: { status: 'retired', has_credential: false } });
    expect(Date.parse(retired.device.retired_at)).toBeGreaterThan(0);
    expect((await call(alice, 'retire_device', { device: 'old-bench' })).retired).toBe(false);
    expect(await t.stack.store.devices.credential('local', 'old-bench')).toBeNull();

    // No new operation, of any kind: a clear refusal, and nothing reaches the device.
    const marker = path.join(DEVICE_HOME, 'work', 'after-retire');
    const refused = await call(alice, 'device_exec', {
      device: 'old-bench',
      argv: ['/bin/sh', '-c', `echo ran > ${marker}`],
      env: { PATH: '/usr/bin:/bin' },
      idempotency_key: 'retire-after',
    });
    expect(refused.status).toBe('failed');
    expect(refused.error).toMatchObject({ code: 'invalid_params', details: { effect_began: false } });
    expect(refused.error.message).toMatch(/^Device old-bench was retired at .+: it takes no new operation/);
    expect(refused.error.remediation).toMatch(/new device_id/);
    const pull = await call(alice, 'device_pull', {
      device: 'old-bench',
      path: DEVICE_HOME,
      idempotency_key: 'retire-pull',
    });
    expect(pull.error.code).toBe('invalid_params');
    expect(existsSync(marker)).toBe(false);

    // Its id is never taken again, with the same configuration or another.
    for (const config of [ssh(), ssh({ port: 2 })]) {
      const again = await call(alice, 'register_device', { device_id: 'old-bench', ssh: config });
      expect(again.error.code).toBe('invalid_params');
      expect(again.error.message).toMatch(/was retired; its id is not reused/);
    }
    const ids = async (args: Record<string, unknown>) =>
      ((await call(alice, 'list_devices', args)).devices as Reply[]).map((d) => [d.device_id, d.status]);
    expect(await ids({})).not.toContainEqual(['old-bench', 'retired']);
    expect(await ids({ include_retired: true })).toContainEqual(['old-bench', 'retired']);
    expect((await call(rival, 'list_devices', { include_retired: true })).devices).toEqual([]);
    // What it did before stays.
    expect((await call(alice, 'get_launch', { idempotency_key: 'retire-before' })).status).toBe('succeeded');
  });

  it('another team sees nothing of the device', async () => {
    const rival = await t.connect(await t.tokenFor('rival', 'rival-team'));
    expect((await call(rival, 'get_device', { device: 'bench-ssh' })).error.code).toBe('not_found');
    expect((await call(rival, 'list_devices', {})).devices).toEqual([]);
    const exec = await call(rival, 'device_exec', {
      device: 'bench-ssh',
      argv: ['/bin/true'],
      idempotency_key: 'rival-1',
    });
    expect(exec.error.code).toBe('not_found');
  });

  it('8 concurrent operations on one device never overlap, and a waiting one reports its place in line', async () => {
    const intervals = path.join(DEVICE_HOME, 'work', 'intervals');
    const script = `echo "B $(date +%s%N)" >> ${intervals}; sleep 0.3; echo "E $(date +%s%N)" >> ${intervals}`;
    const starts = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        call(alice, 'device_exec', {
          device: 'bench-ssh',
          argv: ['/bin/sh', '-c', script],
          env: { PATH: '/usr/bin:/bin' },
          wait_ms: 0,
          idempotency_key: `line-${i}`,
        }),
      ),
    );
    expect(starts.every((s) => s.status === 'running' || s.status === 'succeeded')).toBe(true);
    const waiting = await eventually('a launch waiting for the device', async () => {
      for (let i = 7; i >= 0; i--) {
        const r = await call(alice, 'get_launch', { idempotency_key: `line-${i}` });
        if (r.progress?.phase === 'waiting_for_device') return r.progress;
      }
      return undefined;
    });
    expect(waiting.queue_position).toBeGreaterThanOrEqual(2);
    for (let i = 0; i < 8; i++) {
      const done = await call(alice, 'await_launch', { idempotency_key: `line-${i}`, wait_ms: 60_000 });
      expect(done.status, JSON.stringify(done.error)).toBe('succeeded');
    }
    const marks = readFileSync(intervals, 'utf8')
      .trim()
      .split('\n')
      .map((l) => l.split(' ')[0]);
    expect(marks).toEqual(Array.from({ length: 16 }, (_, i) => (i % 2 ? 'E' : 'B')));
  }, 120_000);

  it('a worker killed mid-operation leaves it interrupted, never re-run, an unknown on the device, and the device free within the turn’s lease; one still waiting in line is dispatched again and runs once', async () => {
    const counter = path.join(DEVICE_HOME, 'work', 'killed-count');
    const slow = await call(alice, 'device_exec', {
      device: 'bench-ssh',
      argv: ['/bin/sh', '-c', `echo started >> ${counter}; sleep 60`],
      env: { PATH: '/usr/bin:/bin' },
      wait_ms: 0,
      idempotency_key: 'killed-1',
    });
    expect(slow.status).toBe('running');
    await eventually(
      'the operation to be on the device',
      async () =>
        (await call(alice, 'get_launch', { idempotency_key: 'killed-1' })).progress?.phase === 'on_device',
    );
    // A second operation waits in line: its effect has not begun when the worker dies.
    const waiter = path.join(DEVICE_HOME, 'work', 'waiter-count');
    await call(alice, 'device_exec', {
      device: 'bench-ssh',
      argv: ['/bin/sh', '-c', `echo ran >> ${waiter}`],
      env: { PATH: '/usr/bin:/bin' },
      wait_ms: 0,
      idempotency_key: 'waiting-1',
    });
    await eventually(
      'the second operation to wait for the device',
      async () =>
        (await call(alice, 'get_launch', { idempotency_key: 'waiting-1' })).progress?.phase ===
        'waiting_for_device',
    );
    await worker.kill('SIGKILL');
    worker = await startWorker();
    const t0 = Date.now();
    const next = await call(alice, 'device_exec', {
      device: 'bench-ssh',
      argv: ['/bin/true'],
      wait_ms: 60_000,
      idempotency_key: 'after-kill',
    });
    expect(next.status, JSON.stringify(next.error)).toBe('succeeded');
    expect(Date.now() - t0).toBeLessThan(TURN_MS + 15_000);

    const outcome = await call(alice, 'await_launch', { idempotency_key: 'killed-1', wait_ms: 60_000 });
    expect(outcome.status).toBe('interrupted');
    expect(readFileSync(counter, 'utf8')).toBe('started\n');
    // The journal proved the waiter never began: it was dispatched again, to the new worker, and ran once.
    const waited = await call(alice, 'await_launch', { idempotency_key: 'waiting-1', wait_ms: 60_000 });
    expect(waited.status, JSON.stringify(waited.error)).toBe('succeeded');
    expect(readFileSync(waiter, 'utf8')).toBe('ran\n');
    const unknowns = await call(alice, 'list_unknowns', { status: 'open' });
    expect(unknowns.unknowns.map((u: Reply) => u.question).join('\n')).toMatch(
      /What state is device bench-ssh in after device_exec/,
    );
  }, 180_000);
});

describe.skipIf(!isRoot)('turns on PostgreSQL with two workers (needs root: an sshd, a device user)', () => {
  // Two worker processes, each with a DOSSIER_HOME of its own as on two hosts, one PostgreSQL store.
  let pgStack: TestStack;
  let bob: Client;
  let store: string;
  const hosts = ['host-a', 'host-b'].map((h) => path.join(work, h));
  const workers: Proc[] = [];
  beforeAll(async () => {
    store = (await freshStoreLocation('postgres')).location;
    pgStack = await startTestStack({
      env: {
        DOSSIER_STORE: store,
        DOSSIER_PAYLOAD_KEYS: `k1:${randomBytes(32).toString('base64')}`,
        DOSSIER_DEVICE_TURN_MS: String(TURN_MS),
      },
      parts: { workers: false },
    });
    for (const home of hosts)
      workers.push(await spawnDossier('worker', { ...pgStack.env, DOSSIER_HOME: home }, 'worker ready'));
    bob = await pgStack.connect();
    const registered = await call(bob, 'register_device', { device_id: 'bench-pg', ssh: ssh() });
    expect(registered.error).toBeUndefined();
  }, 120_000);
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.kill()));
    await pgStack?.stop(true);
  });

  it('12 concurrent operations on one device take turns in arrival order across both workers, never overlap, and each runs once', async () => {
    const intervals = path.join(DEVICE_HOME, 'work', 'pg-intervals');
    rmSync(intervals, { force: true });
    const script = `echo "B $1 $(date +%s%N)" >> ${intervals}; sleep 0.2; echo "E $1 $(date +%s%N)" >> ${intervals}`;
    const keys = Array.from({ length: 12 }, (_, i) => `pg-line-${i}`);
    const starts = await Promise.all(
      keys.map((key) =>
        call(bob, 'device_exec', {
          device: 'bench-pg',
          argv: ['/bin/sh', '-c', script, 'sh', key],
          env: { PATH: '/usr/bin:/bin' },
          wait_ms: 0,
          idempotency_key: key,
        }),
      ),
    );
    expect(starts.every((r) => r.status === 'running' || r.status === 'succeeded')).toBe(true);
    for (const key of keys) {
      const done = await call(bob, 'await_launch', { idempotency_key: key, wait_ms: 90_000 });
      expect(done.status, JSON.stringify(done.error)).toBe('succeeded');
    }

    // Never two at once, each once: B and E alternate, each pair names one launch, every launch one pair.
    const marks = readFileSync(intervals, 'utf8')
      .trim()
      .split('\n')
      .map((l) => l.split(' '));
    expect(marks.map((m) => m[0])).toEqual(keys.flatMap(() => ['B', 'E']));
    const ran = marks.filter((m) => m[0] === 'B').map((m) => m[1]);
    for (let i = 0; i < marks.length; i += 2) expect(marks[i + 1]![1]).toBe(marks[i]![1]);
    expect([...ran].sort()).toEqual([...keys].sort());

    // In arrival order: the device ran them as their turns arrived, fencing numbers rising.
    const db = new pg.Client({ connectionString: store });
    await db.connect();
    const turns = (
      await db.query(
        `SELECT launch, fencing FROM device_turns WHERE team = 'local' AND device_id = 'bench-pg' AND fencing IS NOT NULL
         ORDER BY arrived_at, turn_id`,
      )
    ).rows as { launch: string; fencing: number }[];
    await db.end();
    expect(turns.map((r) => r.launch.split('/').at(-1))).toEqual(ran);
    expect(turns.map((r) => Number(r.fencing))).toEqual(keys.map((_, i) => i + 1));

    // Both workers took part, and each launch ran on exactly one of them.
    const ranOn = keys.map((key) => {
      const ws = sha256Hex(`launch/local/local/${key}`).slice(0, 24);
      return hosts.filter((h) => existsSync(path.join(h, 'workspaces', ws)));
    });
    expect(
      ranOn.every((on) => on.length === 1),
      JSON.stringify(ranOn),
    ).toBe(true);
    expect(new Set(ranOn.flat()).size).toBe(2);
  }, 180_000);
});

describe.skipIf(!isRoot)('an emulated ARM device (qemu-user)', () => {
  it('runs an armhf busybox from a squashfs firmware image: uname -m says armv7l', async () => {
    const deb = path.join(os.homedir(), '.cache', 'dossier', 'fixtures', 'busybox-static-armhf.deb');
    expect(existsSync(deb), `${deb} is fetched by .ci/run (apt-get download busybox-static:armhf)`).toBe(
      true,
    );
    const fs = path.join(work, 'fs');
    execFileSync('dpkg-deb', ['-x', deb, path.join(work, 'deb')]);
    mkdirSync(path.join(fs, 'bin'), { recursive: true });
    execFileSync('cp', [path.join(work, 'deb', 'bin', 'busybox'), path.join(fs, 'bin', 'busybox')]);
    const image = path.join(roots, 'firmware.sqfs');
    execFileSync('mksquashfs', [fs, image, '-noappend', '-quiet']);
    const { artifact } = await call(alice, 'register_artifact', { path: image });
    const extracted = await call(alice, 'extract_firmware', {
      artifact: artifact.digest,
      idempotency_key: 'arm-fw',
    });
    expect(extracted.status, JSON.stringify(extracted.error)).toBe('succeeded');
    const registered = await call(alice, 'register_device', {
      device_id: 'arm-board',
      emulated: { evidence_id: extracted.evidence_id, prefix: 'squashfs-0x0/', arch: 'arm' },
    });
    expect(registered.error).toBeUndefined();
    expect(JSON.stringify(registered)).not.toContain(t.home);
    const uname = await call(alice, 'device_exec', {
      device: 'arm-board',
      argv: ['bin/busybox', 'uname', '-m'],
      idempotency_key: 'arm-uname',
    });
    expect(uname.status, JSON.stringify(uname.error)).toBe('succeeded');
    expect(await lines(alice, uname.evidence_id, 'stdout'), JSON.stringify(uname.summary)).toEqual([
      'armv7l',
    ]);
    const push = await call(alice, 'device_push', {
      device: 'arm-board',
      artifact: artifact.digest,
      path: '/tmp/x',
      idempotency_key: 'arm-push',
    });
    expect(push.error.code).toBe('unsupported_target');
  }, 120_000);
});

describe.skipIf(!isRoot)('adb devices', () => {
  beforeAll(() => {
    execFileSync('adb', ['start-server'], { stdio: 'ignore' });
  });
  afterAll(() => {
    execFileSync('adb', ['kill-server'], { stdio: 'ignore' });
  });

  it('a phone that is not attached is device_unavailable, with how to check', async () => {
    await call(alice, 'register_device', { device_id: 'pixel', adb: { serial: 'emulator-5554' } });
    const reply = await call(alice, 'device_exec', {
      device: 'pixel',
      argv: ['getprop', 'ro.product.model'],
      idempotency_key: 'adb-1',
    });
    expect(reply.status).toBe('failed');
    expect(reply.error.code).toBe('device_unavailable');
    expect(reply.error.remediation).toMatch(/adb devices/);
  });

  // A USB phone cannot be attached to a CI machine; set DOSSIER_TEST_ADB=<serial> where one is.
  it.skipIf(!process.env.DOSSIER_TEST_ADB)(
    'runs on a real attached device (DOSSIER_TEST_ADB names it; no device is attached in CI)',
    async () => {
      await call(alice, 'register_device', {
        device_id: 'real-phone',
        adb: { serial: process.env.DOSSIER_TEST_ADB! },
      });
      const reply = await call(alice, 'device_exec', {
        device: 'real-phone',
        argv: ['getprop', 'ro.product.model'],
        idempotency_key: 'adb-real',
      });
      expect(reply.status, JSON.stringify(reply.error)).toBe('succeeded');
      expect(reply.summary.exit_code).toBe(0);

      const file = path.join(roots, 'adb-payload.txt');
      writeFileSync(file, `pushed over adb ${Date.now()}\n`);
      const { artifact } = await call(alice, 'register_artifact', { path: file });
      const target = `/data/local/tmp/dossier-${Date.now()}.txt`;
      const push = (key: string, overwrite: boolean) =>
        call(alice, 'device_push', {
          device: 'real-phone',
          artifact: artifact.digest,
          path: target,
          mode: '0640',
          overwrite,
          idempotency_key: key,
        });
      expect((await push('adb-push-1', false)).status).toBe('succeeded');
      const again = await push('adb-push-2', false);
      expect(again.status).toBe('failed');
      expect(again.error.message).toMatch(/already exists/);
      expect((await push('adb-push-3', true)).status).toBe('succeeded');
      const read = await call(alice, 'device_exec', {
        device: 'real-phone',
        argv: ['stat', '-c', '%a', target],
        idempotency_key: 'adb-stat',
      });
      expect(await lines(alice, read.evidence_id, 'stdout')).toEqual(['640']);
    },
  );
});
