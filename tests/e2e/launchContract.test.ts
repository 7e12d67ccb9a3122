// The key contract (docs/idempotency.md) under concurrency, waiting, cancellation and
// tenancy. The effect is counted by the launched process itself.
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { payloadKeys } from '../../src/temporal/codec.ts';
import { dataConverter } from '../../src/temporal/dataConverter.ts';
import { call, effectCounter, slowEffect } from '../helpers/mcp.ts';
import { startTestStack, type TestStack } from '../helpers/stack.ts';
import { eventually, groupAlive } from '../helpers/wait.ts';

let t: TestStack;
beforeAll(async () => {
  t = await startTestStack({ env: { DOSSIER_WORKER_CONCURRENCY: '64' } });
});
afterAll(async () => {
  await t?.stop(true);
});

describe('concurrent retries', () => {
  it('50 concurrent identical calls from separate MCP clients: exactly one effect, one evidence_id', async () => {
    const effect = effectCounter(t.home);
    const clients = await Promise.all(Array.from({ length: 50 }, () => t.connect()));
    const args = { ...effect.launch(), idempotency_key: 'concurrent-50' };
    const replies = await Promise.all(clients.map((c) => call(c, 'capture_process_scenario', args)));
    expect(replies.every((r) => r.status === 'succeeded')).toBe(true);
    expect(new Set(replies.map((r) => r.evidence_id)).size).toBe(1);
    expect(replies.filter((r) => r.launch.attached === false)).toHaveLength(1);
    expect(effect.count()).toBe(1);
    await Promise.all(clients.map((c) => c.close()));
  });

  it('concurrent calls with one key and different bodies: one effect, every other reply idempotency_key_reused', async () => {
    const effect = effectCounter(t.home);
    const clients = await Promise.all(Array.from({ length: 10 }, () => t.connect()));
    const replies = await Promise.all(
      clients.map((c, i) =>
        call(c, 'capture_process_scenario', {
          ...effect.launch({ stdin: `body ${i}\n` }),
          idempotency_key: 'concurrent-bodies',
        }),
      ),
    );
    const won = replies.filter((r) => r.status === 'succeeded');
    const refused = replies.filter((r) => r.error?.code === 'idempotency_key_reused');
    expect(won).toHaveLength(1);
    expect(refused).toHaveLength(9);
    expect(effect.count()).toBe(1);
    await Promise.all(clients.map((c) => c.close()));
  });
});

describe('waiting', () => {
  it('a 5-second launch called with wait_ms 500 answers running; the retry attaches; one effect in all', async () => {
    const client = await t.connect();
    const effect = effectCounter(t.home);
    const args = { ...slowEffect(effect, 5), idempotency_key: 'slow-5s', wait_ms: 500 };
    const started = Date.now();
    const first = await call(client, 'capture_process_scenario', args);
    expect(Date.now() - started).toBeLessThan(4_000);
    expect(first.status).toBe('running');
    expect(first.launch).toMatchObject({ attached: false, workflow_id: 'launch/local/local/slow-5s' });
    expect(first.evidence_id).toBeUndefined();

    const retry = await call(client, 'capture_process_scenario', { ...args, wait_ms: 20_000 });
    expect(retry.status).toBe('succeeded');
    expect(retry.launch.attached).toBe(true);
    expect(retry.launch.run_id).toBe(first.launch.run_id);
    expect(effect.count()).toBe(1);
  });

  it('sends MCP progress notifications while waiting when the client gives a progress token', async () => {
    const client = await t.connect();
    const effect = effectCounter(t.home);
    const progress: { progress: number; message?: string }[] = [];
    const result = await client.callTool(
      {
        name: 'capture_process_scenario',
        arguments: { ...slowEffect(effect, 3), idempotency_key: 'progress-3s' },
      },
      undefined,
      { onprogress: (p) => progress.push(p), timeout: 60_000 },
    );
    expect((result.structuredContent as { status: string }).status).toBe('succeeded');
    expect(progress.length).toBeGreaterThanOrEqual(2);
    expect(progress.some((p) => p.message?.includes('elapsed_ms'))).toBe(true);
    for (let i = 1; i < progress.length; i++)
      expect(progress[i]!.progress).toBeGreaterThan(progress[i - 1]!.progress);
  });

  it('get_launch and await_launch read a running launch without starting anything', async () => {
    const client = await t.connect();
    const effect = effectCounter(t.home);
    await call(client, 'capture_process_scenario', {
      ...slowEffect(effect, 2),
      idempotency_key: 'read-running',
      wait_ms: 0,
    });
    const running = await call(client, 'get_launch', { idempotency_key: 'read-running' });
    expect(running.status).toBe('running');
    const done = await call(client, 'await_launch', { idempotency_key: 'read-running', wait_ms: 20_000 });
    expect(done.status).toBe('succeeded');
    expect(done.evidence_id).toMatch(/^ev_/);
    expect(effect.count()).toBe(1);
    const missing = await call(client, 'get_launch', { idempotency_key: 'never-used' });
    expect(missing.error.code).toBe('not_found');
  });
});

describe('cancel_launch', () => {
  it('ends the process group, retains the outcome as cancelled, and a retry returns cancelled', async () => {
    const client = await t.connect();
    const effect = effectCounter(t.home);
    const args = { ...slowEffect(effect, 60), idempotency_key: 'cancel-me', wait_ms: 0 };
    await call(client, 'capture_process_scenario', args);
    const pid = await eventually('the process to report its pid', async () => {
      const r = await call(client, 'get_launch', { idempotency_key: 'cancel-me' });
      return r.progress?.pid as number;
    });
    expect(groupAlive(pid)).toBe(true);

    const cancelled = await call(client, 'cancel_launch', { idempotency_key: 'cancel-me' });
    expect(cancelled.status).toBe('cancelled');
    expect(cancelled.evidence_id).toMatch(/^ev_/);
    expect(groupAlive(pid)).toBe(false);

    const retry = await call(client, 'capture_process_scenario', { ...args, wait_ms: 1_000 });
    expect(retry).toMatchObject({
      status: 'cancelled',
      evidence_id: cancelled.evidence_id,
      launch: { attached: true },
    });
    expect(effect.count()).toBe(1);
    const evidence = await call(client, 'get_evidence', { evidence_id: cancelled.evidence_id });
    expect(evidence.evidence.limitations).toContain('the launch was cancelled; the process group was ended');

    // The audit names who cancelled: the principal, not the gateway process.
    const connection = await Connection.connect({ address: t.env.DOSSIER_TEMPORAL_ADDRESS! });
    const audit = new Client({
      connection,
      namespace: t.namespace,
      dataConverter: dataConverter(payloadKeys([], t.home)),
    });
    const history = await audit.workflow.getHandle(cancelled.launch.workflow_id).fetchHistory();
    const requested = history.events?.find((e) => e.workflowExecutionCancelRequestedEventAttributes);
    expect(requested?.workflowExecutionCancelRequestedEventAttributes).toMatchObject({
      identity: 'dossier principal local/local',
      cause: 'cancel_launch by local of team local',
    });
    await connection.close();
  });
});

describe('keys are scoped to the principal', () => {
  it('the same key from another principal is a separate launch, and neither can read the other’s', async () => {
    const alice = await t.connect(await t.tokenFor('alice', 're-team'));
    const bob = await t.connect(await t.tokenFor('bob', 're-team'));
    const effect = effectCounter(t.home);
    const args = { ...effect.launch(), idempotency_key: 'shared-key' };
    const a = await call(alice, 'capture_process_scenario', args);
    const b = await call(bob, 'capture_process_scenario', args);
    expect(a.launch.workflow_id).toBe('launch/re-team/alice/shared-key');
    expect(b.launch.workflow_id).toBe('launch/re-team/bob/shared-key');
    expect(b.launch.attached).toBe(false);
    expect(effect.count()).toBe(2);

    const carol = await t.connect(await t.tokenFor('carol', 're-team'));
    expect((await call(carol, 'get_launch', { idempotency_key: 'shared-key' })).error.code).toBe('not_found');
    expect((await call(carol, 'cancel_launch', { idempotency_key: 'shared-key' })).error.code).toBe(
      'not_found',
    );
    expect((await call(alice, 'get_launch', { idempotency_key: 'shared-key' })).launch.workflow_id).toBe(
      'launch/re-team/alice/shared-key',
    );
  });

  it('list_launches shows the team’s launches only, filtered and paged', async () => {
    const dave = await t.connect(await t.tokenFor('dave', 'list-team'));
    for (let i = 0; i < 3; i++) {
      await call(dave, 'capture_process_scenario', {
        executable: '/usr/bin/true',
        idempotency_key: `list-${i}`,
      });
    }
    await call(dave, 'capture_process_scenario', {
      executable: '/etc/hostname',
      idempotency_key: 'list-failed',
    });
    const page1 = await call(dave, 'list_launches', { limit: 2 });
    expect(page1.launches).toHaveLength(2);
    const page2 = await call(dave, 'list_launches', { limit: 2, cursor: page1.next_cursor });
    expect(page2.launches).toHaveLength(2);
    expect(page2.next_cursor).toBeNull();
    const failed = await call(dave, 'list_launches', { status: 'failed' });
    expect(
      failed.launches.map((l: { launch: { idempotency_key: string } }) => l.launch.idempotency_key),
    ).toEqual(['list-failed']);
    const outsider = await t.connect(await t.tokenFor('erin', 'elsewhere'));
    expect((await call(outsider, 'list_launches', {})).launches).toEqual([]);
    // A misspelt tool filter is said so, not answered with an empty list; so is another list's cursor.
    for (const [tool, args] of [
      ['list_launches', { tool: 'capture_proces_scenario' }],
      ['list_evidence', { tool: 'no_such_tool' }],
      ['list_launches', { status: 'failed', cursor: page1.next_cursor }],
    ] as const) {
      expect((await call(dave, tool, args)).error, `${tool} ${JSON.stringify(args)}`).toMatchObject({
        code: 'invalid_params',
      });
    }
  });
});
