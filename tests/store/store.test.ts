// The store's suite, run on SQLite and on PostgreSQL alike.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { EvidenceStore, NewLaunch } from '../../src/evidence/store.ts';
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
  let store: EvidenceStore;
  let close: () => Promise<void>;
  beforeEach(async () => {
    ({ store, close } = await freshStore(backend));
  });
  afterEach(async () => {
    await close();
  });

  it('claims a key once; a second claim returns the first record unchanged', async () => {
    const a = await store.claimLaunch(launch());
    const b = await store.claimLaunch(launch({ bodyDigest: 'd2' }));
    expect(a.created).toBe(true);
    expect(b.created).toBe(false);
    expect(b.record.bodyDigest).toBe('d1');
  });

  it('gives exactly one of many concurrent claims of a key the win', async () => {
    const claims = await Promise.all(
      Array.from({ length: 20 }, (_, i) => store.claimLaunch(launch({ bodyDigest: `d${i}` }))),
    );
    expect(claims.filter((c) => c.created)).toHaveLength(1);
    expect(new Set(claims.map((c) => c.record.bodyDigest)).size).toBe(1);
  });

  it('scopes keys to the principal', async () => {
    await store.claimLaunch(launch());
    const bob = await store.claimLaunch(launch({ principal: 'bob', workflowId: 'launch/t/bob/k1' }));
    expect(bob.created).toBe(true);
  });

  it('journals the effect as started exactly once', async () => {
    await store.claimLaunch(launch());
    expect(await store.journalEffectStarted('launch/t/alice/k1')).toBe(true);
    expect(await store.journalEffectStarted('launch/t/alice/k1')).toBe(false);
  });

  it('keeps the first recorded outcome', async () => {
    await store.claimLaunch(launch());
    await store.finishLaunch('launch/t/alice/k1', {
      status: 'succeeded',
      evidenceId: 'ev_1',
      summary: {},
      error: null,
    });
    const after = await store.finishLaunch('launch/t/alice/k1', {
      status: 'interrupted',
      evidenceId: null,
      summary: null,
      error: {},
    });
    expect(after).toMatchObject({ status: 'succeeded', evidenceId: 'ev_1' });
  });

  it('keeps tokens hashed and resolves only live ones', async () => {
    const token = await store.createToken({ principal: 'alice', team: 't', role: 'operator' });
    expect(token).toMatch(/^dsr_/);
    expect(await store.resolveToken(token)).toEqual({ principal: 'alice', team: 't', role: 'operator' });
    expect(await store.resolveToken(`${token}x`)).toBeUndefined();
  });

  it('pages launches newest first with an opaque cursor, team by team', async () => {
    for (let i = 0; i < 5; i++)
      await store.claimLaunch(launch({ key: `k${i}`, workflowId: `launch/t/alice/k${i}` }));
    await store.claimLaunch(launch({ team: 'u', key: 'other', workflowId: 'launch/u/alice/other' }));
    const first = await store.listLaunches('t', { limit: 3 });
    const second = await store.listLaunches('t', { limit: 3, cursor: first.nextCursor! });
    expect(first.items).toHaveLength(3);
    expect(second.items).toHaveLength(2);
    expect(second.nextCursor).toBeNull();
    const keys = [...first.items, ...second.items].map((r) => r.key);
    expect(new Set(keys).size).toBe(5);
    await expect(store.listLaunches('t', { limit: 3, cursor: 'garbage' })).rejects.toThrow(/cursor/);
  });
});
