// "Nothing runs twice" when the parts around a launch fail: a dropped client
// connection, a restarted gateway, a worker killed with SIGKILL, a restarted
// Temporal server. Workers run as separate processes so they can really die.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it, inject } from 'vitest';
import { signalGroup } from '../../src/sandbox/processes.ts';
import { payloadKeys } from '../../src/temporal/codec.ts';
import { dataConverter } from '../../src/temporal/dataConverter.ts';
import { startDevServer, type DevServer } from '../../src/dev/devServer.ts';
import { CreateTaskResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { call, effectCounter, slowEffect, type Reply } from '../helpers/mcp.ts';
import { freePort } from '../helpers/ports.ts';
import { spawnDossier, type Proc } from '../helpers/processes.ts';
import { startTestStack, type TestStack } from '../helpers/stack.ts';
import { eventually, processesRunning } from '../helpers/wait.ts';

const dir = mkdtempSync(path.join(os.tmpdir(), 'dossier-failures-'));
let temporal: DevServer;
let temporalPort: number;
let uiPort: number;
let gateway: TestStack;
let worker: Proc;
let env: Record<string, string>;
const leftovers: number[] = [];

async function startTemporal() {
  temporal = await startDevServer({
    cli: { kind: 'path', path: inject('temporalCli'), source: 'env' },
    dbFile: path.join(dir, 'temporal.db'),
    port: temporalPort,
    uiPort,
    namespace: 'dossier',
  });
}

const startWorker = () => spawnDossier('worker', env, 'worker ready');

beforeAll(async () => {
  temporalPort = await freePort();
  uiPort = await freePort();
  await startTemporal();
  env = {
    DOSSIER_HOME: path.join(dir, 'home'),
    DOSSIER_TEMPORAL_ADDRESS: temporal.address,
    DOSSIER_UI_URL: temporal.uiUrl,
    DOSSIER_NAMESPACE: 'dossier',
    DOSSIER_SHUTDOWN_GRACE_MS: '1500',
  };
  gateway = await startTestStack({ env, parts: { workers: false } });
  worker = await startWorker();
});

afterAll(async () => {
  for (const pid of leftovers) signalGroup(pid, 'SIGKILL');
  await gateway?.stop();
  await worker?.kill();
  await temporal?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('a launch survives what fails around it', () => {
  it('the client’s HTTP connection is cut mid-wait; a new client retries with the key and gets the same launch', async () => {
    const effect = effectCounter(env.DOSSIER_HOME!);
    const args = { ...slowEffect(effect, 2), idempotency_key: 'cut-connection' };
    const first = await gateway.connect();
    const pending = call(first, 'capture_process_scenario', args).catch((err: Error) => err);
    await eventually('the effect to begin', () => effect.count() === 1);
    await first.close(); // drops the HTTP connection while the gateway waits
    expect(await pending).toBeInstanceOf(Error);

    const second = await gateway.connect();
    const retry = await call(second, 'capture_process_scenario', args);
    expect(retry).toMatchObject({ status: 'succeeded', launch: { attached: true } });
    expect(effect.count()).toBe(1);
  });

  it('the gateway process is restarted between a call and its retry: the retry attaches', async () => {
    const effect = effectCounter(env.DOSSIER_HOME!);
    const args = { ...slowEffect(effect, 3), idempotency_key: 'gateway-restart', wait_ms: 300 };
    const before = await call(await gateway.connect(), 'capture_process_scenario', args);
    expect(before.status).toBe('running');
    await gateway.restart();
    const retry = await call(await gateway.connect(), 'capture_process_scenario', {
      ...args,
      wait_ms: 20_000,
    });
    expect(retry).toMatchObject({
      status: 'succeeded',
      launch: { attached: true, run_id: before.launch.run_id },
    });
    expect(effect.count()).toBe(1);
  });

  it('a worker killed with SIGKILL mid-launch leaves it interrupted, never re-run; a new worker serves new launches', async () => {
    const client = await gateway.connect();
    const effect = effectCounter(env.DOSSIER_HOME!);
    const args = { ...slowEffect(effect, 120), idempotency_key: 'worker-killed', wait_ms: 0 };
    await call(client, 'capture_process_scenario', args);
    const pid = await eventually('the process to report its pid', async () => {
      const r = await call(client, 'get_launch', { idempotency_key: 'worker-killed' });
      return r.progress?.pid as number;
    });
    leftovers.push(pid); // cleaned up if it ever outlived its worker
    expect(effect.count()).toBe(1);
    expect(processesRunning(effect.marker).length).toBeGreaterThan(0);

    await worker.kill('SIGKILL');
    // The sandbox dies with the worker that supervised it: no unsupervised target runs on.
    await eventually('the target to end with its worker', () => processesRunning(effect.marker).length === 0);
    worker = await startWorker();
    const outcome = await call(client, 'await_launch', { idempotency_key: 'worker-killed', wait_ms: 60_000 });
    expect(outcome.status).toBe('interrupted');
    expect(outcome.error.code).toBe('interrupted');
    const retry = await call(client, 'capture_process_scenario', { ...args, wait_ms: 1_000 });
    expect(retry).toMatchObject({ status: 'interrupted', launch: { attached: true } });
    expect(effect.count()).toBe(1);

    const fresh = await call(client, 'capture_process_scenario', {
      executable: '/usr/bin/true',
      idempotency_key: 'after-worker-killed',
    });
    expect(fresh.status).toBe('succeeded');
  });

  it('the Temporal server is restarted on the same SQLite file mid-launch: no second effect, the outcome is retained', async () => {
    const client = await gateway.connect();
    const effect = effectCounter(env.DOSSIER_HOME!);
    const args = { ...slowEffect(effect, 4), idempotency_key: 'temporal-restart', wait_ms: 0 };
    await call(client, 'capture_process_scenario', args);
    await eventually('the effect to begin', () => effect.count() === 1);

    await temporal.stop();
    await startTemporal();

    let outcome = await call(client, 'await_launch', {
      idempotency_key: 'temporal-restart',
      wait_ms: 30_000,
    });
    for (let i = 0; i < 6 && outcome.status === 'running'; i++) {
      outcome = await call(client, 'await_launch', { idempotency_key: 'temporal-restart', wait_ms: 10_000 });
    }
    expect(outcome.status).toBe('succeeded');
    expect(outcome.evidence_id).toMatch(/^ev_/);
    const retry = await call(client, 'capture_process_scenario', args);
    expect(retry).toMatchObject({
      status: 'succeeded',
      evidence_id: outcome.evidence_id,
      launch: { attached: true },
    });
    expect(effect.count()).toBe(1);
  });

  it('a stopping worker waits its grace period, then records the launch interrupted (not cancelled); the audit says Failed', async () => {
    const client = await gateway.connect();
    const effect = effectCounter(env.DOSSIER_HOME!);
    const args = { ...slowEffect(effect, 60), idempotency_key: 'worker-stopped', wait_ms: 0 };
    await call(client, 'capture_process_scenario', args);
    await eventually('the effect to begin', () => effect.count() === 1);
    const t0 = Date.now();
    await worker.kill('SIGTERM'); // a graceful stop, as Ctrl-C or an orchestrator gives
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1_400); // it waited DOSSIER_SHUTDOWN_GRACE_MS
    worker = await startWorker();
    const outcome = await call(client, 'await_launch', {
      idempotency_key: 'worker-stopped',
      wait_ms: 30_000,
    });
    expect(outcome.status).toBe('interrupted');
    expect(outcome.error).toMatchObject({ code: 'interrupted', details: { reason: 'worker_shutdown' } });
    expect(outcome.evidence_id).toMatch(/^ev_/); // what was seen before it ended is retained
    expect(effect.count()).toBe(1);
    // The Evidence says the worker's stop ended it, not a cancel, and leaves the question open.
    const evidence = (await call(client, 'get_evidence', { evidence_id: outcome.evidence_id })).evidence;
    expect(evidence.summary.ended_by).toBe('shutdown');
    expect(evidence.limitations.join(' ')).toMatch(/worker was stopped/);
    expect(evidence.limitations.join(' ')).not.toMatch(/cancelled/);
    const unknowns = await call(client, 'list_unknowns', {});
    expect(JSON.stringify(unknowns)).toContain('had its worker not stopped');

    const connection = await Connection.connect({ address: temporal.address });
    const audit = new Client({
      connection,
      namespace: 'dossier',
      dataConverter: dataConverter(payloadKeys([], env.DOSSIER_HOME!)),
    });
    const handle = audit.workflow.getHandle(outcome.launch.workflow_id);
    await eventually(
      'the workflow to end Failed',
      async () => (await handle.describe()).status.name === 'FAILED',
    );
    const found = await eventually('the audit to list it by outcome', async () => {
      const ids: string[] = [];
      for await (const w of audit.workflow.list({
        query: `DossierOutcome = 'interrupted' AND DossierKey = 'worker-stopped'`,
      }))
        ids.push(w.workflowId);
      return ids.length ? ids : undefined;
    });
    expect(found).toEqual([outcome.launch.workflow_id]);
    await connection.close();
  });

  it('a launch claimed while Temporal is down says it is pending everywhere, starts by itself once Temporal is back, and runs once; cancel meanwhile answers provider_unavailable, never internal', async () => {
    const client = await gateway.connect();
    const effect = effectCounter(env.DOSSIER_HOME!);
    await temporal.stop();
    const args = { ...effect.launch(), idempotency_key: 'while-down', wait_ms: 1_000 };
    const isPending = (r: Reply) => {
      expect(r, JSON.stringify(r)).toMatchObject({
        status: 'running',
        launch: { run_id: null, phase: 'pending', idempotency_key: 'while-down' },
      });
      expect(r.message).toMatch(/Claimed but not started yet.*Temporal did not answer.*every 5 s/);
      expect(r.next).toMatch(/await_launch/);
      expect(Date.parse(r.launch.start_by) - Date.parse(r.launch.started_at)).toBe(15 * 60_000);
    };
    // The call itself, and its retry, say what the launch is: claimed, not started, what comes next;
    // they answer about when their wait ends, not after the Temporal client's own retries (~20 s).
    let t0 = Date.now();
    const first = await call(client, 'capture_process_scenario', args);
    isPending(first);
    expect(first.launch.attached).toBe(false);
    expect(Date.now() - t0).toBeLessThan(8_000);
    t0 = Date.now();
    const retry = await call(client, 'capture_process_scenario', args);
    isPending(retry);
    expect(retry.launch.attached).toBe(true);
    expect(Date.now() - t0).toBeLessThan(8_000);
    isPending(await call(client, 'get_launch', { idempotency_key: 'while-down' }));
    // await_launch waits its wait_ms for the gateway to start it, then says the same.
    t0 = Date.now();
    isPending(await call(client, 'await_launch', { idempotency_key: 'while-down', wait_ms: 2_500 }));
    expect(Date.now() - t0).toBeGreaterThanOrEqual(2_000);
    const listed = await call(client, 'list_launches', { status: 'running' });
    isPending(listed.launches.find((l: Reply) => l.launch.idempotency_key === 'while-down'));
    // An MCP task of another launch claimed meanwhile says so in its status message.
    const tasked = effectCounter(env.DOSSIER_HOME!);
    const created = await client.request(
      {
        method: 'tools/call',
        params: {
          name: 'capture_process_scenario',
          arguments: { ...tasked.launch(), idempotency_key: 'task-while-down' },
          task: {},
        },
      },
      CreateTaskResultSchema,
    );
    expect(created.task.status).toBe('working');
    expect(created.task.statusMessage).toMatch(/^pending: Claimed but not started yet/);
    const cancel = await call(client, 'cancel_launch', { idempotency_key: 'while-down' });
    expect(cancel.error).toMatchObject({ code: 'provider_unavailable' });

    await startTemporal();
    // No retry: the gateway starts it when Temporal is back; a waiting await_launch attaches to it.
    const done = await call(client, 'await_launch', { idempotency_key: 'while-down', wait_ms: 60_000 });
    expect(done, JSON.stringify(done)).toMatchObject({ status: 'succeeded', launch: { phase: 'finished' } });
    expect(done.launch.run_id).toBeTruthy();
    expect(done.message).toBeUndefined();
    expect(effect.count()).toBe(1);
    const task = await eventually('the task to complete', async () => {
      const got = await client.experimental.tasks.getTask(created.task.taskId);
      return got.status === 'completed' ? got : undefined;
    });
    expect(task!.statusMessage).toBe('succeeded');
    expect(tasked.count()).toBe(1);
  }, 120_000);

  it('a launch Temporal could not start for more than 15 minutes is recorded as never started, not run late', async () => {
    const client = await gateway.connect();
    const effect = effectCounter(env.DOSSIER_HOME!);
    await gateway.stack.store.launches.claim({
      team: 'local',
      principal: 'local',
      key: 'stale-claim',
      tool: 'capture_process_scenario',
      bodyDigest: 'digest-of-a-stale-body',
      input: effect.launch(),
      workflowId: 'launch/local/local/stale-claim',
      investigation: null,
    });
    // Claimed 20 minutes ago, while Temporal was down, and never started since.
    const db = new Database(path.join(env.DOSSIER_HOME!, 'dossier.db'));
    db.prepare('UPDATE launches SET created_at = ? WHERE workflow_id = ?').run(
      new Date(Date.now() - 20 * 60_000).toISOString(),
      'launch/local/local/stale-claim',
    );
    db.close();
    const settled = await eventually('the gateway to settle it', async () => {
      const r = await call(client, 'get_launch', { idempotency_key: 'stale-claim' });
      return r.status === 'failed' ? r : undefined;
    });
    expect(settled!.error).toMatchObject({ code: 'provider_unavailable' });
    expect(settled!.error.message).toMatch(/never started and never will be/);
    expect(effect.count()).toBe(0);
  });

  it('cancel_launch of a launch whose workflow never started records it cancelled by that principal; nothing runs', async () => {
    const client = await gateway.connect();
    const effect = effectCounter(env.DOSSIER_HOME!);
    // The state a claim leaves when Temporal cannot be reached: the key is held, no workflow exists.
    const claimed = await gateway.stack.store.launches.claim({
      team: 'local',
      principal: 'local',
      key: 'never-started',
      tool: 'capture_process_scenario',
      bodyDigest: 'digest-of-a-body',
      input: effect.launch(),
      workflowId: 'launch/local/local/never-started',
      investigation: null,
    });
    expect(claimed.created).toBe(true);
    const cancelled = await call(client, 'cancel_launch', { idempotency_key: 'never-started' });
    expect(cancelled).toMatchObject({ status: 'cancelled', error: { code: 'cancelled' } });
    expect(cancelled.error.message).toMatch(/before its workflow started; nothing of it ran/);
    await new Promise((r) => setTimeout(r, 6_000)); // past the gateway's resume round
    expect((await call(client, 'get_launch', { idempotency_key: 'never-started' })).status).toBe('cancelled');
    expect(effect.count()).toBe(0);
  });
});
