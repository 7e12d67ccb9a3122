// The store's suite, run on SQLite and on PostgreSQL alike.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { NewLaunch } from '../../src/store/launches.ts';
import type { Store } from '../../src/store/store.ts';
import { BACKENDS, freshStore } from '../helpers/backends.ts';

const launch = (over: Partial<NewLaunch> = {}): NewLaunch => ({
  team: 't',
  principal: 'alice',
  key: 'k1',
  tool: 'capture_process_scenario',
  bodyDigest: 'd1',
  input: { executable: '/usr/bin/true' },
  workflowId: 'launch/t/alice/k1',
  investigation: null,
  ...over,
});

describe.each(BACKENDS)('store on %s', (backend) => {
  let store: Store;
  let close: () => Promise<void>;
  beforeEach(async () => {
    ({ store, close } = await freshStore(backend));
  });
  afterEach(async () => {
    await close();
  });

  it('claims a key once; a second claim returns the first record unchanged', async () => {
    const a = await store.launches.claim(launch());
    const b = await store.launches.claim(launch({ bodyDigest: 'd2' }));
    expect(a.created).toBe(true);
    expect(b.created).toBe(false);
    expect(b.record.bodyDigest).toBe('d1');
  });

  it('gives exactly one of many concurrent claims of a key the win', async () => {
    const claims = await Promise.all(
      Array.from({ length: 20 }, (_, i) => store.launches.claim(launch({ bodyDigest: `d${i}` }))),
    );
    expect(claims.filter((c) => c.created)).toHaveLength(1);
    expect(new Set(claims.map((c) => c.record.bodyDigest)).size).toBe(1);
  });

  it('scopes keys to the principal', async () => {
    await store.launches.claim(launch());
    const bob = await store.launches.claim(launch({ principal: 'bob', workflowId: 'launch/t/bob/k1' }));
    expect(bob.created).toBe(true);
  });

  it('keeps one task per launch for its owner while its ttl lasts, then a new one', async () => {
    const t = {
      team: 't',
      principal: 'alice',
      workflow_id: 'launch/t/alice/k1',
      tool: 'capture_process_scenario',
      idempotency_key: 'k1',
      ttl_ms: 60_000,
      poll_interval_ms: 1_000,
    };
    const [a, b] = await Promise.all([store.tasks.forLaunch(t), store.tasks.forLaunch(t)]);
    expect(a.task_id).toMatch(/^tsk_[0-9a-f]{48}$/);
    expect(b.task_id).toBe(a.task_id);
    expect(await store.tasks.get('t', 'alice', a.task_id)).toMatchObject({ task_id: a.task_id });
    expect(await store.tasks.get('t', 'bob', a.task_id)).toBeUndefined();
    expect(await store.tasks.get('u', 'alice', a.task_id)).toBeUndefined();
    const later = Date.now() + 120_000;
    expect(await store.tasks.get('t', 'alice', a.task_id, later)).toBeUndefined();
    const renewed = await store.tasks.forLaunch(t, later);
    expect(renewed.task_id).not.toBe(a.task_id);
    expect((await store.tasks.list('t', 'alice', { limit: 10 })).items.map((x) => x.task_id)).toEqual([
      renewed.task_id,
    ]);
    // The hourly sweep forgets it once its ttl has passed, and nothing before.
    expect(await store.tasks.sweep(Date.now())).toBe(0);
    expect(await store.tasks.sweep(later + 120_000)).toBe(1);
    expect((await store.tasks.list('t', 'alice', { limit: 10 })).items).toEqual([]);
  });

  it('journals the effect as started exactly once', async () => {
    await store.launches.claim(launch());
    expect(await store.launches.journalStarted('launch/t/alice/k1')).toBe(true);
    expect(await store.launches.journalStarted('launch/t/alice/k1')).toBe(false);
  });

  it('keeps the run that ended a launch before its starter recorded it, and only that run', async () => {
    // The run can begin, and end, before the call that started it writes its run ID: a call that
    // attaches then reads a finished row, which must name the run every other reply names.
    await store.launches.claim(launch());
    expect(await store.launches.journalStarted('launch/t/alice/k1', undefined, 'run-1')).toBe(true);
    const ended = await store.launches.finish(
      'launch/t/alice/k1',
      { status: 'succeeded', evidenceId: 'ev_1', summary: {}, error: null },
      { runId: 'run-2' },
    );
    expect(ended).toMatchObject({ status: 'succeeded', runId: 'run-1' });
    await store.launches.markRunning('launch/t/alice/k1', 'run-3');
    expect(await store.launches.byWorkflowId('launch/t/alice/k1')).toMatchObject({ runId: 'run-1' });

    await store.launches.claim(launch({ key: 'k2', workflowId: 'launch/t/alice/k2' }));
    const cancelled = await store.launches.finish(
      'launch/t/alice/k2',
      { status: 'cancelled', evidenceId: null, summary: null, error: {} },
      { runId: 'run-4' },
    );
    expect(cancelled).toMatchObject({ status: 'cancelled', runId: 'run-4' });

    // An analysis too, from the run's first step.
    await store.analyses.claim({
      team: 't',
      key: 'scan:1',
      kind: 'query',
      tool: 'scan_with_rules',
      input: {},
      databaseKey: null,
      workflowId: 'analysis/t/scan:1',
      requestedBy: 'alice',
    });
    await store.analyses.started('analysis/t/scan:1', 'run-5');
    await store.analyses.finish(
      'analysis/t/scan:1',
      { status: 'succeeded', evidenceId: null, result: null, error: null },
      'run-6',
    );
    await store.analyses.markRunning('analysis/t/scan:1', 'run-7');
    expect(await store.analyses.byWorkflowId('analysis/t/scan:1')).toMatchObject({ runId: 'run-5' });
  });

  it('keeps the first recorded outcome', async () => {
    await store.launches.claim(launch());
    await store.launches.finish('launch/t/alice/k1', {
      status: 'succeeded',
      evidenceId: 'ev_1',
      summary: {},
      error: null,
    });
    const after = await store.launches.finish('launch/t/alice/k1', {
      status: 'interrupted',
      evidenceId: null,
      summary: null,
      error: {},
    });
    expect(after).toMatchObject({ status: 'succeeded', evidenceId: 'ev_1' });
  });

  it('keeps tokens hashed and resolves only live ones', async () => {
    const token = await store.tokens.create({ principal: 'alice', team: 't', role: 'operator' });
    expect(token).toMatch(/^dsr_/);
    expect(await store.tokens.resolve(token)).toEqual({ principal: 'alice', team: 't', role: 'operator' });
    expect(await store.tokens.resolve(`${token}x`)).toBeUndefined();
  });

  it('pages launches newest first with an opaque cursor, team by team', async () => {
    for (let i = 0; i < 5; i++)
      await store.launches.claim(launch({ key: `k${i}`, workflowId: `launch/t/alice/k${i}` }));
    await store.launches.claim(launch({ team: 'u', key: 'other', workflowId: 'launch/u/alice/other' }));
    const first = await store.launches.list('t', { limit: 3 });
    const second = await store.launches.list('t', { limit: 3, cursor: first.nextCursor! });
    expect(first.items).toHaveLength(3);
    expect(second.items).toHaveLength(2);
    expect(second.nextCursor).toBeNull();
    const keys = [...first.items, ...second.items].map((r) => r.key);
    expect(new Set(keys).size).toBe(5);
    await expect(store.launches.list('t', { limit: 3, cursor: 'garbage' })).rejects.toThrow(/cursor/);
  });
});
