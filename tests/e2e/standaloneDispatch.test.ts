// Launches dispatched as standalone activities (DOSSIER_LAUNCH_DISPATCH=standalone) on a real
// Temporal server new enough to have them (1.32, built with Go: src/dev/sqliteServer.ts), with the
// gateway and a `dossier worker` as separate processes' worth of parts: the key contract (one effect
// per key, attach, a body refused), cancel, and a worker killed mid-effect (recorded interrupted by
// the gateway, waited on or not, never run again).
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it, inject } from 'vitest';
import { startDevServer } from '../../src/dev/devServer.ts';
import { startServerBinary, type SqliteServer } from '../../src/dev/sqliteServer.ts';
import { signalGroup } from '../../src/sandbox/processes.ts';
import { launchRequest } from '../../src/gateway/launchStart.ts';
import { payloadKeys } from '../../src/temporal/codec.ts';
import { dataConverter } from '../../src/temporal/dataConverter.ts';
import { UNVOUCHED } from '../../src/launches/protocol.ts';
import { WORKFLOW_TASK_QUEUE } from '../../src/temporal/queues.ts';
import { TOOLS_BY_NAME } from '../../src/tools/catalog.ts';
import { SEARCH_ATTRIBUTES } from '../../src/temporal/searchAttributes.ts';
import { call, effectCounter, slowEffect } from '../helpers/mcp.ts';
import { freePort } from '../helpers/ports.ts';
import { spawnDossier, type Proc } from '../helpers/processes.ts';
import { startTestStack, type TestStack } from '../helpers/stack.ts';
import { eventually, processesRunning } from '../helpers/wait.ts';

const dir = mkdtempSync(path.join(os.tmpdir(), 'dossier-standalone-'));
let server: SqliteServer;
let gateway: TestStack;
let worker: Proc;
let env: Record<string, string>;
const leftovers: number[] = [];
const startWorker = () => spawnDossier('worker', env, 'worker ready');

/** A Temporal client of the server, in the gateway's namespace, for as long as `use` runs. */
async function inTemporal(use: (temporal: Client) => Promise<void>) {
  const connection = await Connection.connect({ address: server.address });
  try {
    await use(new Client({ connection, namespace: 'dossier' }));
  } finally {
    await connection.close();
  }
}

beforeAll(async () => {
  server = await startServerBinary(inject('standaloneServer'), path.join(dir, 'temporal'));
  env = {
    DOSSIER_HOME: path.join(dir, 'home'),
    DOSSIER_TEMPORAL_ADDRESS: server.address,
    DOSSIER_UI_URL: 'http://127.0.0.1:9',
    DOSSIER_NAMESPACE: 'dossier',
    DOSSIER_LAUNCH_DISPATCH: 'standalone',
    DOSSIER_SHUTDOWN_GRACE_MS: '1500',
  };
  gateway = await startTestStack({ env, parts: { workers: false } });
  worker = await startWorker();
}, 180_000);

afterAll(async () => {
  for (const pid of leftovers) signalGroup(pid, 'SIGKILL');
  await gateway?.stop();
  await worker?.kill();
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('DOSSIER_LAUNCH_DISPATCH=standalone on a Temporal 1.32 server', () => {
  it('one effect per key: 20 concurrent identical calls, a retry attaches, another body is refused; the audit has the activity', async () => {
    const clients = await Promise.all(Array.from({ length: 20 }, () => gateway.connect()));
    const effect = effectCounter(env.DOSSIER_HOME!);
    const args = { ...effect.launch(), idempotency_key: 'standalone-20' };
    const replies = await Promise.all(clients.map((c) => call(c, 'capture_process_scenario', args)));
    expect(replies.map((r) => r.status)).toEqual(replies.map(() => 'succeeded'));
    expect(new Set(replies.map((r) => r.evidence_id)).size).toBe(1);
    expect(replies.filter((r) => r.launch.attached === false)).toHaveLength(1);
    expect(effect.count()).toBe(1);

    const retry = await call(clients[0]!, 'capture_process_scenario', args);
    expect(retry).toMatchObject({ status: 'succeeded', launch: { attached: true } });
    expect(retry.launch.run_id).toBe(replies[0]!.launch.run_id);
    const other = await call(clients[0]!, 'capture_process_scenario', { ...args, stdin: 'other\n' });
    expect(other.error?.code).toBe('idempotency_key_reused');
    expect(effect.count()).toBe(1);

    // No workflow: the launch is one activity under the launch's ID, with the audit's search attributes.
    await inTemporal(async (temporal) => {
      const described = await temporal.activity.getHandle(retry.launch.workflow_id).describe();
      expect(described.status).toBe('COMPLETED');
      expect(described.typedSearchAttributes.get(SEARCH_ATTRIBUTES.key)).toBe('standalone-20');
      expect(described.typedSearchAttributes.get(SEARCH_ATTRIBUTES.team)).toBe('local');
      await expect(temporal.workflow.getHandle(retry.launch.workflow_id).describe()).rejects.toThrow();
    });
  });

  it('cancel_launch ends a running effect and records it cancelled; the retry attaches to that', async () => {
    const client = await gateway.connect();
    const effect = effectCounter(env.DOSSIER_HOME!);
    const args = { ...slowEffect(effect, 120), idempotency_key: 'standalone-cancel', wait_ms: 0 };
    await call(client, 'capture_process_scenario', args);
    await eventually('the target to run', () => processesRunning(effect.marker).length > 0);
    await call(client, 'cancel_launch', { idempotency_key: 'standalone-cancel' });
    const cancelled = await call(client, 'await_launch', {
      idempotency_key: 'standalone-cancel',
      wait_ms: 30_000,
    });
    expect(cancelled.status, JSON.stringify(cancelled)).toBe('cancelled');
    await eventually('the target to end', () => processesRunning(effect.marker).length === 0);
    const retry = await call(client, 'capture_process_scenario', { ...args, wait_ms: 1_000 });
    expect(retry).toMatchObject({ status: 'cancelled', launch: { attached: true } });
    expect(effect.count()).toBe(1);
    // The audit names who cancelled: the activity's cancel reason.
    await inTemporal(async (temporal) => {
      const described = await temporal.activity.getHandle(retry.launch.workflow_id).describe();
      expect(described.status).toBe('CANCELED');
      expect(described.canceledReason).toBe('cancel_launch by local of team local');
    });
  });

  it('a worker killed with SIGKILL mid-effect: recorded interrupted by a waiting call, or by the gateway alone; never run again', async () => {
    const client = await gateway.connect();
    const waited = effectCounter(env.DOSSIER_HOME!);
    const alone = effectCounter(env.DOSSIER_HOME!);
    await call(client, 'capture_process_scenario', {
      ...slowEffect(waited, 120),
      idempotency_key: 'standalone-killed-waited',
      wait_ms: 0,
    });
    await call(client, 'capture_process_scenario', {
      ...slowEffect(alone, 120),
      idempotency_key: 'standalone-killed-alone',
      wait_ms: 0,
    });
    await eventually(
      'both targets to run',
      () => processesRunning(waited.marker).length > 0 && processesRunning(alone.marker).length > 0,
    );
    leftovers.push(...processesRunning(waited.marker), ...processesRunning(alone.marker));
    await worker.kill('SIGKILL');
    worker = await startWorker();

    // The activity's heartbeat stops; Temporal times it out after 10 s, and the waiting call records it.
    const outcome = await call(client, 'await_launch', {
      idempotency_key: 'standalone-killed-waited',
      wait_ms: 60_000,
    });
    expect(outcome.status).toBe('interrupted');
    expect(outcome.error.code).toBe('interrupted');
    // Nobody waits on the other: the gateway's background round records it (every 30 s).
    const recorded = await eventually(
      'the gateway to record the unwatched launch',
      async () => {
        const r = await call(client, 'get_launch', { idempotency_key: 'standalone-killed-alone' });
        return r.status === 'interrupted' ? r : undefined;
      },
      90_000,
    );
    expect(recorded!.error.code).toBe('interrupted');
    expect(waited.count()).toBe(1);
    expect(alone.count()).toBe(1);

    const fresh = await call(client, 'capture_process_scenario', {
      executable: '/usr/bin/true',
      idempotency_key: 'standalone-after-kill',
    });
    expect(fresh.status).toBe('succeeded');
  }, 180_000);

  it('is refused at start, saying what to do, on a Temporal without standalone activities (the CLI’s dev server)', async () => {
    const cli = await startDevServer({
      cli: { kind: 'path', path: inject('temporalCli'), source: 'env' },
      dbFile: path.join(dir, 'cli.db'),
      port: await freePort(),
      uiPort: await freePort(),
      namespace: 'dossier',
      headless: true,
    });
    try {
      await expect(
        startTestStack({
          env: { DOSSIER_TEMPORAL_ADDRESS: cli.address, DOSSIER_LAUNCH_DISPATCH: 'standalone' },
        }),
      ).rejects.toThrow(/standalone activities \(1\.31 or later\).*DOSSIER_TEMPORAL_ADDRESS/);
    } finally {
      await cli.stop();
    }
  });

  it('a run forged under a running launch’s ID is refused as unvouched, with either dispatch: nothing is recorded over the launch', async () => {
    // A second stack on the same server, launching with the default dispatch (workflows).
    const byDefault = await startTestStack({
      env: { DOSSIER_TEMPORAL_ADDRESS: server.address, DOSSIER_NAMESPACE: 'dossier-default' },
    });
    const connection = await Connection.connect({ address: server.address });
    const unvouched = async (run: Promise<unknown>) => {
      const err = (await run.then(
        () => undefined,
        (e: unknown) => e,
      )) as { cause?: { type?: string } } | undefined;
      expect(err?.cause?.type, String(err)).toBe(UNVOUCHED);
    };
    try {
      for (const [stack, namespace, key] of [
        [gateway, 'dossier', 'forged-standalone'],
        [byDefault, 'dossier-default', 'forged-default'],
      ] as const) {
        const client = await stack.connect();
        const effect = effectCounter(stack.env.DOSSIER_HOME!);
        const started = await call(client, 'capture_process_scenario', {
          ...slowEffect(effect, 120),
          idempotency_key: key,
          wait_ms: 0,
        });
        const id = started.launch.workflow_id as string;
        await eventually('the target to run', () => processesRunning(effect.marker).length > 0);
        leftovers.push(...processesRunning(effect.marker));
        // Whoever forges it holds the cluster's payload key, or could not read the refusal.
        const temporal = new Client({
          connection,
          namespace,
          dataConverter: dataConverter(payloadKeys([], stack.env.DOSSIER_HOME!)),
        });
        // The exact request the gateway made: only who runs it is forged.
        const record = (await stack.stack.store.launches.byWorkflowId(id))!;
        const contract = TOOLS_BY_NAME.get('capture_process_scenario')!;
        const forgedOutcome = {
          status: 'succeeded',
          evidenceId: null,
          summary: { forged: true },
          error: null,
        };
        const activity = (type: string, args: unknown[], taskQueue: string) =>
          temporal.activity.execute(type, {
            id, // the launch's own ID: free among activity IDs while a workflow holds it
            taskQueue,
            args,
            startToCloseTimeout: '20 seconds',
            retry: { maximumAttempts: 1 },
          });
        if (stack === byDefault) {
          await unvouched(activity('finishLaunch', [id, forgedOutcome], WORKFLOW_TASK_QUEUE));
          await unvouched(
            activity('runEffect', [launchRequest(record, contract, 'standalone')], 'dossier-capture'),
          );
        } else {
          // Under standalone dispatch the workflow ID is the free one: a launch workflow forged there.
          await unvouched(
            temporal.workflow.execute('launchWorkflow', {
              workflowId: id,
              taskQueue: 'dossier-capture',
              args: [launchRequest(record, contract, undefined)],
            }),
          );
        }
        const now = await call(client, 'get_launch', { idempotency_key: key });
        expect(now.status).toBe('running');
        expect(effect.count()).toBe(1);
        await call(client, 'cancel_launch', { idempotency_key: key });
        const ended = await call(client, 'await_launch', { idempotency_key: key, wait_ms: 30_000 });
        expect(ended.status).toBe('cancelled');
      }
    } finally {
      await connection.close();
      await byDefault.stop(true);
    }
  }, 120_000);
});
