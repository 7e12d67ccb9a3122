// A worker SIGKILLed in every window between a launch's claim and the start of
// its effect. The journal proves the effect never began, so the launch is
// dispatched again and its program runs exactly once, as promptly as a launch
// whose worker died after the effect began ends interrupted (never re-run).
// Two worker processes serve the capability, as in a cluster: the one holding
// the launch is stopped (SIGSTOP) inside the window, checked there, then
// killed; the other carries on, so what is measured is how long the launch
// takes to notice its loss, not how long a replacement takes to start.
import { Client, Connection } from '@temporalio/client';
import { temporal as proto } from '@temporalio/proto';
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { sha256Hex } from '../../src/domain/canonical.ts';
import { payloadKeys } from '../../src/temporal/codec.ts';
import { dataConverter } from '../../src/temporal/dataConverter.ts';
import { call, effectCounter, slowEffect, type Reply } from '../helpers/mcp.ts';
import { spawnDossier, type Proc } from '../helpers/processes.ts';
import { startTestStack, type TestStack } from '../helpers/stack.ts';
import { eventually } from '../helpers/wait.ts';

/**
 * From the kill to the outcome, in every window: the 10 s heartbeat timeout, a few seconds on the
 * dead worker's sticky queue, the second run, and this machine's slack (measured: docs/architecture.md).
 */
const RECOVERY_BOUND_MS = 18_000;
/** The registered executable's size: its verification and private copy take a while to watch. */
const EXECUTABLE_BYTES = 150 * 1024 * 1024;
const WORKFLOW_TASK_STARTED = proto.api.enums.v1.PendingWorkflowTaskState.PENDING_WORKFLOW_TASK_STATE_STARTED;
const ACTIVITY_STARTED = proto.api.enums.v1.PendingActivityState.PENDING_ACTIVITY_STATE_STARTED;

let gateway: TestStack;
const workers: Proc[] = [];
let temporal: Client;
let connection: Connection;
let executable: string;
const recovered: Record<string, number> = {};

const startWorker = () => spawnDossier('worker', gateway.env, 'worker ready');

/** A shell script of EXECUTABLE_BYTES that writes the marker it is given into its workspace. */
function bigScript(): Buffer {
  const head = Buffer.from('#!/bin/sh\necho started > "$1"\nexit 0\n');
  const pad = Buffer.alloc(EXECUTABLE_BYTES - head.length, 0x23); // '#' lines: never read
  for (let i = 79; i < pad.length; i += 80) pad[i] = 0x0a;
  return Buffer.concat([head, pad]);
}

beforeAll(async () => {
  gateway = await startTestStack({ parts: { workers: false } });
  workers.push(...(await Promise.all([startWorker(), startWorker()])));
  connection = await Connection.connect({ address: inject('temporalAddress') });
  temporal = new Client({
    connection,
    namespace: gateway.namespace,
    dataConverter: dataConverter(payloadKeys([], gateway.home)),
  });
  const upload = await fetch(gateway.url.replace(/\/mcp$/, '/artifacts?name=big.sh'), {
    method: 'POST',
    headers: { Authorization: `Bearer ${gateway.token}` },
    body: new Uint8Array(bigScript()),
  });
  expect(upload.status).toBe(201);
  executable = ((await upload.json()) as Reply).artifact.digest;
});

afterAll(async () => {
  console.log('from the kill to the outcome (ms):', JSON.stringify(recovered));
  await Promise.all(workers.map((w) => w.kill('SIGKILL')));
  await connection?.close();
  await gateway?.stop(true);
});

const journal = async (workflowId: string) =>
  (await gateway.stack.store.launches.byWorkflowId(workflowId))?.effect;

/** The worker process behind a Temporal worker identity (`pid@host`). */
const byIdentity = (identity: string | null | undefined) =>
  workers.findIndex((w) => identity?.startsWith(`${w.child.pid}@`));

/** The local principal's launch of `key`, as the gateway names it. */
const launchId = (key: string) => `launch/local/local/${key}`;

/** Where a launch's workspaces (and the private copies of its executable) are made. */
const workspaceRoot = (workflowId: string) =>
  path.join(gateway.home, 'workspaces', sha256Hex(workflowId).slice(0, 24));

/** The private copy runEffect makes of the registered executable for this launch, once it exists. */
function privateCopy(workflowId: string): string | undefined {
  const root = workspaceRoot(workflowId);
  if (!existsSync(root)) return undefined;
  const bin = readdirSync(root).find((name) => name.endsWith('.bin'));
  const file = bin && readdirSync(path.join(root, bin))[0];
  return file ? path.join(root, bin, file) : undefined;
}

/** The worker running a launch's effect, once Temporal says one does. */
const effectWorker = async (workflowId: string): Promise<number> => {
  const identity = await eventually('a worker to be handed the effect', async () => {
    const pending = (await temporal.workflow.getHandle(workflowId).describe()).raw.pendingActivities?.[0];
    return pending?.state === ACTIVITY_STARTED ? pending.lastWorkerIdentity : undefined;
  });
  return byIdentity(identity);
};

/** Polls `probe` every few milliseconds (a window can be short), for at most a minute. */
async function promptly<T>(what: string, probe: () => T | undefined): Promise<T> {
  for (const deadline = Date.now() + 60_000; Date.now() < deadline;) {
    const value = probe();
    if (value) return value;
    await new Promise((r) => setTimeout(r, 2));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/**
 * A process that, once a private copy appears under `root`, takes the store's write lock (so
 * begin() cannot journal), waits until the copy is verified (made executable) and a little more,
 * stops every worker, then lets the lock go. Its own process, so nothing here can wait on it.
 */
async function holdStoreLock(dbFile: string, root: string) {
  const script = `
    import Database from 'better-sqlite3';
    import { existsSync, readdirSync, statSync } from 'node:fs';
    import path from 'node:path';
    const [dbFile, root, ...pids] = process.argv.slice(1);
    setTimeout(() => process.exit(2), 90_000).unref(); // never outlives a launch that went wrong
    const db = new Database(dbFile);
    const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
    const copy = () => {
      if (!existsSync(root)) return undefined;
      const bin = readdirSync(root).find((n) => n.endsWith('.bin'));
      const file = bin && readdirSync(path.join(root, bin))[0];
      return file && path.join(root, bin, file);
    };
    const verified = (file) => (statSync(file).mode & 0o777) === 0o555;
    console.log('ready');
    let file;
    while (!(file = copy())) await sleep(1);
    db.exec('BEGIN IMMEDIATE');
    const lockedBeforeVerified = !verified(file);
    while (!verified(file)) await sleep(1);
    await sleep(500);
    for (const pid of pids) process.kill(Number(pid), 'SIGSTOP');
    db.exec('ROLLBACK');
    console.log(JSON.stringify({ lockedBeforeVerified, stopped: true }));`;
  const child = spawn(
    process.execPath,
    ['--input-type=module', '-e', script, dbFile, root, ...workers.map((w) => String(w.child.pid))],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  await eventually('the lock holder to start', () => out.includes('ready') || child.exitCode !== null);
  return {
    done: exited.then((code) => {
      if (code !== 0) throw new Error(`the lock holder exited ${code}: ${out}`);
      return JSON.parse(out.trim().split('\n').pop()!) as Record<string, boolean>;
    }),
  };
}

/** How many times Temporal dispatched the effect of a launch. */
async function dispatches(workflowId: string): Promise<number> {
  const history = await temporal.workflow.getHandle(workflowId).fetchHistory();
  return (history.events ?? []).filter(
    (e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'runEffect',
  ).length;
}

/**
 * Launches; `hold` returns the index of the worker it stopped inside the
 * window. Checks that the effect had not begun, kills that worker, lets the
 * others go on, and returns the outcome and how long it took from the kill.
 */
async function killIn(
  key: string,
  launch: Record<string, unknown>,
  hold: (workflowId: string) => Promise<number>,
  opts: { via?: TestStack } = {},
): Promise<{ outcome: Reply; workflowId: string; ms: number }> {
  const client = await (opts.via ?? gateway).connect();
  const started = await call(client, 'capture_process_scenario', {
    ...launch,
    idempotency_key: key,
    wait_ms: 0,
  });
  const workflowId = started.launch.workflow_id as string;
  let victim = -1;
  let t0 = 0;
  try {
    victim = await hold(workflowId);
    expect(victim).toBeGreaterThanOrEqual(0);
    expect(await journal(workflowId)).toBe('not_started');
  } finally {
    // Killed whatever happened, and every other worker let go on, so a missed window strands nothing.
    t0 = Date.now();
    if (victim >= 0) await workers[victim]!.kill('SIGKILL');
    for (const w of workers) w.child.kill('SIGCONT');
  }
  const outcome = await call(client, 'await_launch', { idempotency_key: key, wait_ms: 90_000 });
  const ms = Date.now() - t0;
  recovered[key] = ms;
  workers[victim] = await startWorker(); // the next window starts with two workers again
  return { outcome, workflowId, ms };
}

/** Stops every worker, so the next task is handed to one that cannot run it. */
const stopAll = () => workers.forEach((w) => w.child.kill('SIGSTOP'));

describe('a worker killed before the effect begins: dispatched again, run once', () => {
  it('holding the launch’s first workflow task', async () => {
    const effect = effectCounter(gateway.home);
    stopAll();
    const { outcome, workflowId, ms } = await killIn('in-workflow-task', effect.launch(), async (id) => {
      const handle = temporal.workflow.getHandle(id);
      await eventually(
        'a stopped worker to be handed the workflow task',
        async () => (await handle.describe()).raw.pendingWorkflowTask?.state === WORKFLOW_TASK_STARTED,
      );
      const history = await handle.fetchHistory();
      const taken = history.events?.find((e) => e.workflowTaskStartedEventAttributes);
      const victim = byIdentity(taken?.workflowTaskStartedEventAttributes?.identity);
      workers.forEach((w, i) => i !== victim && w.child.kill('SIGCONT'));
      return victim;
    });
    expect(outcome.status).toBe('succeeded');
    expect(effect.count()).toBe(1);
    expect(await dispatches(workflowId)).toBe(1); // it was never dispatched to the dead worker
    expect(ms).toBeLessThan(RECOVERY_BOUND_MS);
  });

  it('with the effect handed to it, before runEffect did anything', async () => {
    // The workflow runs in a process that serves no capture and starts launches eagerly, so its
    // first workflow task is its own: the effect goes through the queue to a stopped worker.
    const host = await startTestStack({
      env: { ...gateway.env, DOSSIER_WORKER_CAPABILITIES: 'device' },
      home: gateway.home,
      namespace: gateway.namespace,
    });
    try {
      const effect = effectCounter(gateway.home);
      stopAll();
      const { outcome, workflowId, ms } = await killIn(
        'effect-handed-over',
        effect.launch(),
        async (id) => {
          const victim = await effectWorker(id);
          workers.forEach((w, i) => i !== victim && w.child.kill('SIGCONT'));
          return victim;
        },
        { via: host },
      );
      expect(outcome.status).toBe('succeeded');
      expect(effect.count()).toBe(1);
      expect(await dispatches(workflowId)).toBe(2);
      expect(ms).toBeLessThan(RECOVERY_BOUND_MS);
    } finally {
      await host.stop();
    }
  });

  it('while it verifies and copies a 150 MiB registered executable', async () => {
    const effect = effectCounter(gateway.home);
    const launch = { executable, args: [effect.marker], env: { PATH: '/usr/bin:/bin' } };
    const { outcome, workflowId, ms } = await killIn('verifying', launch, async (id) => {
      const copy = await promptly('the private copy to begin', () => privateCopy(id));
      stopAll();
      const { size, mode } = statSync(copy);
      // Part of it copied, not yet made executable: stopped mid-verification.
      expect(size).toBeLessThan(EXECUTABLE_BYTES);
      expect(mode & 0o777).toBe(0o700);
      return effectWorker(id);
    });
    expect(outcome).toMatchObject({ status: 'succeeded', summary: { exit_code: 0 } });
    expect(effect.count()).toBe(1);
    expect(await dispatches(workflowId)).toBe(2);
    expect(ms).toBeLessThan(RECOVERY_BOUND_MS);
  });

  it('about to journal that the effect begins, its executable verified', async () => {
    const effect = effectCounter(gateway.home);
    const launch = { executable, args: [effect.marker], env: { PATH: '/usr/bin:/bin' } };
    const key = 'about-to-begin';
    // Another process takes the store's write lock while the copy is made, so begin() waits for it,
    // and stops the workers once the copy is verified (this process's gateway may wait for it too).
    const holder = await holdStoreLock(path.join(gateway.home, 'dossier.db'), workspaceRoot(launchId(key)));
    const { outcome, workflowId, ms } = await killIn(key, launch, async (id) => {
      const held = await holder.done;
      expect(held).toEqual({ lockedBeforeVerified: true, stopped: true });
      return effectWorker(id);
    });
    expect(outcome).toMatchObject({ status: 'succeeded', summary: { exit_code: 0 } });
    expect(effect.count()).toBe(1);
    expect(await dispatches(workflowId)).toBe(2);
    expect(ms).toBeLessThan(RECOVERY_BOUND_MS);
  });
});

describe('a worker killed after the effect began', () => {
  it('ends the launch interrupted, never re-run, as promptly', async () => {
    const client = await gateway.connect();
    const effect = effectCounter(gateway.home);
    const key = 'after-begin';
    const started = await call(client, 'capture_process_scenario', {
      ...slowEffect(effect, 120),
      idempotency_key: key,
      wait_ms: 0,
    });
    const workflowId = started.launch.workflow_id as string;
    const victim = await effectWorker(workflowId);
    await eventually('the effect to begin', () => effect.count() === 1);
    expect(await journal(workflowId)).toBe('started');
    const t0 = Date.now();
    await workers[victim]!.kill('SIGKILL');
    const outcome = await call(client, 'await_launch', { idempotency_key: key, wait_ms: 90_000 });
    recovered[key] = Date.now() - t0;
    workers[victim] = await startWorker();
    expect(outcome).toMatchObject({ status: 'interrupted', error: { code: 'interrupted' } });
    expect(effect.count()).toBe(1);
    expect(await dispatches(workflowId)).toBe(1);
    expect(recovered[key]).toBeLessThan(RECOVERY_BOUND_MS);
  });
});
