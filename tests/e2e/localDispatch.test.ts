// DOSSIER_LAUNCH_DISPATCH=local: a launch's effect runs as a local activity of the workflow task
// that schedules it, on a worker that serves its capability. The key contract holds as with an
// activity; what differs is the audit's history (a marker, no activity task), and cancel_launch
// reaches the effect through the store while its worker holds the workflow task.
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex } from '../../src/domain/canonical.ts';
import { call, effectCounter, slowEffect } from '../helpers/mcp.ts';
import { spawnDossier, type Proc } from '../helpers/processes.ts';
import { asAuditor, startTestStack, type TestStack } from '../helpers/stack.ts';
import { eventually } from '../helpers/wait.ts';

let t: TestStack;
beforeAll(async () => {
  t = await startTestStack({ env: { DOSSIER_LAUNCH_DISPATCH: 'local' } });
});
afterAll(async () => {
  await t?.stop(true);
});

/** The launch workflow's history once it has closed. */
async function closedHistory(stack: TestStack, workflowId: string) {
  return asAuditor(stack, async (temporal) => {
    const handle = temporal.workflow.getHandle(workflowId);
    const events = await eventually('the launch workflow to close', async () => {
      const all = (await handle.fetchHistory()).events ?? [];
      const closed = all.some(
        (e) => e.workflowExecutionCompletedEventAttributes || e.workflowExecutionCanceledEventAttributes,
      );
      return closed ? all : undefined;
    });
    return { events: events!, description: await handle.describe() };
  });
}

describe('local dispatch', () => {
  it('20 identical calls: one effect, one run, one Evidence; the audit shows a local activity and no activity task', async () => {
    const effect = effectCounter(t.home);
    const clients = await Promise.all(Array.from({ length: 20 }, () => t.connect()));
    const args = { ...effect.launch(), idempotency_key: 'local-20' };
    const replies = await Promise.all(clients.map((c) => call(c, 'capture_process_scenario', args)));
    expect(replies.map((r) => r.status)).toEqual(Array(20).fill('succeeded'));
    expect(new Set(replies.map((r) => r.evidence_id)).size).toBe(1);
    expect(new Set(replies.map((r) => r.launch.run_id)).size).toBe(1);
    expect(replies.filter((r) => r.launch.attached === false)).toHaveLength(1);
    expect(effect.count()).toBe(1);

    const { events, description } = await closedHistory(t, replies[0]!.launch.workflow_id);
    expect(description.taskQueue).toBe('dossier-capture');
    expect(events.some((e) => e.activityTaskScheduledEventAttributes)).toBe(false);
    const marker = events.find((e) => e.markerRecordedEventAttributes)?.markerRecordedEventAttributes;
    expect(marker?.markerName).toMatch(/local_activity/);
    expect(description.searchAttributes).toMatchObject({ DossierOutcome: ['succeeded'] });
  });

  it('cancel_launch ends a running local effect within seconds and the workflow ends Canceled', async () => {
    const client = await t.connect();
    const effect = effectCounter(t.home);
    const args = { ...slowEffect(effect, 60), idempotency_key: 'local-cancel', wait_ms: 0 };
    await call(client, 'capture_process_scenario', args);
    await eventually('the effect to begin', () => effect.count() === 1);
    const t0 = Date.now();
    const cancelled = await call(client, 'cancel_launch', { idempotency_key: 'local-cancel' });
    // Through Temporal alone the cancel would wait for the held workflow task's renewal (8 s).
    expect(Date.now() - t0).toBeLessThan(6_000);
    expect(cancelled.status).toBe('cancelled');
    expect(cancelled.evidence_id).toMatch(/^ev_/);
    const { description } = await closedHistory(t, cancelled.launch.workflow_id);
    expect(description.status.name).toBe('CANCELLED');
    expect(description.searchAttributes).toMatchObject({ DossierOutcome: ['cancelled'] });
    const retry = await call(client, 'capture_process_scenario', args);
    expect(retry).toMatchObject({ status: 'cancelled', launch: { attached: true } });
    expect(effect.count()).toBe(1);
  });

  it('a worker that does not serve the capability passes the effect, untouched, to the capability’s queue', async () => {
    const only = await startTestStack({
      env: { DOSSIER_WORKER_CAPABILITIES: 'extract', DOSSIER_LAUNCH_DISPATCH: 'local' },
    });
    try {
      const client = await only.connect();
      const reply = await call(client, 'capture_process_scenario', {
        executable: '/usr/bin/true',
        idempotency_key: 'local-not-served',
        wait_ms: 500,
      });
      expect(reply.status).toBe('running');
      await asAuditor(only, async (temporal) => {
        const handle = temporal.workflow.getHandle(reply.launch.workflow_id);
        const events = await eventually('the effect to wait on its queue', async () => {
          const all = (await handle.fetchHistory()).events ?? [];
          return all.some((e) => e.activityTaskScheduledEventAttributes) ? all : undefined;
        });
        const scheduled = events!.find((e) => e.activityTaskScheduledEventAttributes)!;
        expect(scheduled.activityTaskScheduledEventAttributes!.taskQueue!.name).toBe('dossier-capture');
        expect(events!.some((e) => e.activityTaskStartedEventAttributes)).toBe(false);
      });
      const cancelled = await call(client, 'cancel_launch', { idempotency_key: 'local-not-served' });
      expect(cancelled.status).toBe('cancelled');
    } finally {
      await only.stop(true);
    }
  });
});

describe('local dispatch, its worker in a process of its own', () => {
  let gateway: TestStack;
  let worker: Proc;
  const startWorker = () => spawnDossier('worker', gateway.env, 'worker ready');
  beforeAll(async () => {
    gateway = await startTestStack({
      env: { DOSSIER_LAUNCH_DISPATCH: 'local', DOSSIER_SHUTDOWN_GRACE_MS: '1500' },
      parts: { workers: false },
    });
    worker = await startWorker();
  });
  afterAll(async () => {
    await worker?.kill('SIGKILL');
    await gateway?.stop(true);
  });

  it('a worker killed mid-effect: the task run again finds the journal begun, and the launch ends interrupted, never re-run', async () => {
    const client = await gateway.connect();
    const effect = effectCounter(gateway.home);
    const args = { ...slowEffect(effect, 120), idempotency_key: 'local-killed', wait_ms: 0 };
    await call(client, 'capture_process_scenario', args);
    await eventually('the effect to begin', () => effect.count() === 1);
    await worker.kill('SIGKILL');
    worker = await startWorker();
    // The lost worker's workflow task times out (10 s) before another worker runs it again.
    const outcome = await call(client, 'await_launch', { idempotency_key: 'local-killed', wait_ms: 60_000 });
    expect(outcome).toMatchObject({ status: 'interrupted', error: { code: 'interrupted' } });
    const retry = await call(client, 'capture_process_scenario', { ...args, wait_ms: 1_000 });
    expect(retry).toMatchObject({ status: 'interrupted', launch: { attached: true } });
    expect(effect.count()).toBe(1);
    // The run again prepared nothing: the lost worker's workspace is the launch's only one.
    const workspaces = path.join(
      gateway.home,
      'workspaces',
      sha256Hex(outcome.launch.workflow_id).slice(0, 24),
    );
    expect(readdirSync(workspaces).filter((name) => !name.endsWith('.made'))).toHaveLength(1);
  }, 90_000);

  it('a stopping worker ends its local effect at its grace period: interrupted, reason worker_shutdown', async () => {
    const client = await gateway.connect();
    const effect = effectCounter(gateway.home);
    const args = { ...slowEffect(effect, 60), idempotency_key: 'local-stopped', wait_ms: 0 };
    await call(client, 'capture_process_scenario', args);
    await eventually('the effect to begin', () => effect.count() === 1);
    const t0 = Date.now();
    await worker.kill('SIGTERM');
    // It waited DOSSIER_SHUTDOWN_GRACE_MS, and not the effect's 60 s.
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1_400);
    expect(Date.now() - t0).toBeLessThan(30_000);
    worker = await startWorker();
    const outcome = await call(client, 'await_launch', { idempotency_key: 'local-stopped', wait_ms: 30_000 });
    expect(outcome).toMatchObject({
      status: 'interrupted',
      error: { code: 'interrupted', details: { reason: 'worker_shutdown' } },
    });
    expect(effect.count()).toBe(1);
  }, 90_000);
});
