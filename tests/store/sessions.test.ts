// What gateway replicas share, on both backends: sessions (resumable, capped
// per principal over every replica, never another principal's) and rate
// buckets (one per principal, refilled by time, exact under concurrency).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Store } from '../../src/store/store.ts';
import { BACKENDS, freshStore } from '../helpers/backends.ts';

const alice = { team: 't', principal: 'alice' };
const mallory = { team: 'other', principal: 'alice' };

describe.each(BACKENDS)('shared sessions and rate buckets on %s', (backend) => {
  let store: Store;
  let close: () => Promise<void>;
  beforeAll(async () => {
    ({ store, close } = await freshStore(backend));
  });
  afterAll(async () => {
    await close();
  });

  /** Marks `id` of `owner` seen at `at` (live if seen since `liveSince`); whether it is then a live session of `owner`. */
  async function seen(id: string, owner: typeof alice, liveSince: number, at = Date.now()) {
    await store.sessions.markSeen([{ ...owner, id, at }], at - liveSince);
    return store.sessions.isLive(id, owner, liveSince);
  }

  it('keeps a principal’s newest sessions up to the cap, closing the least recently seen', async () => {
    const t0 = 1_000_000;
    for (let i = 0; i < 3; i++) {
      const closed = await store.sessions.open({ ...alice, id: `s${i}`, init: '{}' }, 3, 0, t0 + i);
      expect(closed).toEqual([]);
    }
    expect(await seen('s0', alice, 0, t0 + 10)).toBe(true);
    expect(await store.sessions.get('s0', alice, 0)).toMatchObject({
      id: 's0',
      init: '{}',
      last_seen_at: t0 + 10,
    });
    // s1 is now the least recently seen: the fourth session closes it.
    expect(await store.sessions.open({ ...alice, id: 's3', init: '{}' }, 3, 0, t0 + 11)).toEqual(['s1']);
    expect(await seen('s1', alice, 0, t0 + 12)).toBe(false);
    // Another team's principal of the same name neither counts nor reaches alice's sessions.
    expect(await store.sessions.open({ ...mallory, id: 'm0', init: '{}' }, 3, 0, t0 + 13)).toEqual([]);
    expect(await seen('s0', mallory, 0, t0 + 14)).toBe(false);
    expect(await store.sessions.get('s0', mallory, 0)).toBeUndefined();
    expect(await seen('s0', alice, 0, t0 + 15)).toBe(true);
  });

  it('never closes the session it opens, whatever the replicas’ clocks say', async () => {
    const bob = { team: 't', principal: 'bob' };
    await store.sessions.open({ ...bob, id: 'b0', init: '{}' }, 2, 0, 9_000);
    await store.sessions.open({ ...bob, id: 'b1', init: '{}' }, 2, 0, 9_001);
    // A replica whose clock is behind opens the third: the least recently seen other one goes.
    expect(await store.sessions.open({ ...bob, id: 'b2', init: '{}' }, 2, 0, 8_000)).toEqual(['b0']);
    expect(await seen('b2', bob, 0, 8_001)).toBe(true);
  });

  it('treats sessions not seen within the idle time as gone, and sweeps them', async () => {
    await store.sessions.open({ ...alice, id: 'old', init: '{}' }, 100, 0, 5_000);
    expect(await seen('old', alice, 6_000, 7_000)).toBe(false);
    expect(await store.sessions.sweep(6_000)).toBeGreaterThanOrEqual(1);
    await store.sessions.close('s0');
    expect(await seen('s0', alice, 0)).toBe(false);
  });

  it('writes many last-seen times in one go, never moving one back or reviving a closed or expired session', async () => {
    const carol = { team: 't', principal: 'carol' };
    for (const [id, at] of [
      ['c0', 20_000],
      ['c1', 20_001],
      ['c2', 10_000],
    ] as const)
      await store.sessions.open({ ...carol, id, init: '{}' }, 10, 0, at);
    await store.sessions.close('c1');
    const idleMs = 6_000;
    await store.sessions.markSeen(
      [
        { ...carol, id: 'c0', at: 19_000 }, // older than what the store has: kept as it was
        { ...carol, id: 'c1', at: 21_000 }, // closed meanwhile: stays closed
        { ...carol, id: 'c2', at: 21_000 }, // idle 11 s when seen (over 6 s): stays expired
      ],
      idleMs,
    );
    expect((await store.sessions.get('c0', carol, 0))?.last_seen_at).toBe(20_000);
    expect(await store.sessions.get('c1', carol, 0)).toBeUndefined();
    expect((await store.sessions.get('c2', carol, 0))?.last_seen_at).toBe(10_000);
    expect(await store.sessions.isLive('c2', carol, 15_000)).toBe(false);
    await store.sessions.markSeen([{ ...carol, id: 'c0', at: 22_000 }], idleMs);
    expect((await store.sessions.get('c0', carol, 0))?.last_seen_at).toBe(22_000);
  });

  it('keeps a session that was live when it was seen, however late the time is written', async () => {
    const dave = { team: 't', principal: 'dave' };
    await store.sessions.open({ ...dave, id: 'd0', init: '{}' }, 10, 0, 30_000);
    // Seen at 34,900 with a 5 s idle time (live then); written when 35,000 has passed.
    await store.sessions.markSeen([{ ...dave, id: 'd0', at: 34_900 }], 5_000);
    expect(await store.sessions.isLive('d0', dave, 36_000 - 5_000)).toBe(true);
  });

  it('answers a session’s request with its token’s principal and the session’s liveness in one read', async () => {
    const erin = { team: 't', principal: 'erin', role: 'operator' as const };
    const token = await store.tokens.create(erin);
    const other = await store.tokens.create({ team: 'other', principal: 'erin', role: 'operator' });
    await store.sessions.open({ ...erin, id: 'e0', init: '{}' }, 10, 0, 40_000);
    await store.sessions.open({ ...erin, id: 'e1', init: '{}' }, 10, 0, 40_000);
    await store.sessions.close('e1');
    const ask = (t: string, id: string, liveSince = 39_000) =>
      store.tokens.resolveInSession(t, { id, liveSince });
    expect(await ask(token, 'e0')).toEqual({ principal: erin, sessionLive: true });
    // Expired, closed, unknown: the principal still, the session not.
    expect(await ask(token, 'e0', 41_000)).toEqual({ principal: erin, sessionLive: false });
    expect(await ask(token, 'e1')).toEqual({ principal: erin, sessionLive: false });
    expect(await ask(token, 'nope')).toEqual({ principal: erin, sessionLive: false });
    // The same principal's name in another team does not reach erin's session.
    expect(await ask(other, 'e0')).toMatchObject({ principal: { team: 'other' }, sessionLive: false });
    // A revoked or unknown token answers nothing, session or not.
    const [info] = (await store.tokens.list('t')).filter((i) => i.principal === 'erin');
    expect(await store.tokens.revoke(info!.id)).toBe(1);
    expect(await ask(token, 'e0')).toBeUndefined();
    expect(await ask('dsr_unknown', 'e0')).toBeUndefined();
  });

  it('keeps a token’s default toolsets and a session’s list, which the same read answers with its liveness', async () => {
    const fay = { team: 't', principal: 'fay', role: 'viewer' as const };
    const token = await store.tokens.create({ ...fay, toolsets: ['core', 'devices'] });
    expect(await store.tokens.resolve(token)).toEqual({ ...fay, toolsets: ['core', 'devices'] });
    expect((await store.tokens.list('t')).find((i) => i.principal === 'fay')).toMatchObject({
      toolsets: ['core', 'devices'],
    });
    await store.sessions.open(
      { ...fay, id: 'f0', init: '{}', toolsets: ['core', 'analysis'] },
      10,
      0,
      50_000,
    );
    const ask = () => store.tokens.resolveInSession(token, { id: 'f0', liveSince: 49_000 });
    expect(await ask()).toEqual({
      principal: { ...fay, toolsets: ['core', 'devices'] },
      sessionLive: true,
      sessionToolsets: ['core', 'analysis'],
    });
    // Enabled on one replica, read by every other with the session's next request, and kept to resume it.
    expect(await store.sessions.setToolsets('f0', fay, ['core', 'analysis', 'capture'])).toBe(true);
    expect((await ask())!.sessionToolsets).toEqual(['core', 'analysis', 'capture']);
    expect((await store.sessions.get('f0', fay, 0))!.toolsets).toBe('core,analysis,capture');
    // Never another principal's session, nor one that is gone.
    expect(await store.sessions.setToolsets('f0', { team: 'other', principal: 'fay' }, ['core'])).toBe(false);
    await store.sessions.close('f0');
    expect(await store.sessions.setToolsets('f0', fay, ['core'])).toBe(false);
    expect(await ask()).toEqual({ principal: { ...fay, toolsets: ['core', 'devices'] }, sessionLive: false });
  });

  it('lands two writes of the same sessions in opposite orders at once (two replicas)', async () => {
    const erin = { team: 't', principal: 'erin' };
    const ids = Array.from({ length: 300 }, (_, i) => `e${String(i).padStart(3, '0')}`);
    for (const id of ids) await store.sessions.open({ ...erin, id, init: '{}' }, 1e9, 0, 40_000);
    const marks = (at: number) => ids.map((id) => ({ ...erin, id, at }));
    await Promise.all([
      store.sessions.markSeen(marks(41_000), 60_000),
      store.sessions.markSeen(marks(41_001).reverse(), 60_000),
    ]);
    for (const id of [ids[0]!, ids[299]!])
      expect((await store.sessions.get(id, erin, 0))?.last_seen_at).toBe(41_001);
  });

  it('grants exactly the burst to concurrent takers, then the refill', async () => {
    const grants = await Promise.all(
      Array.from({ length: 30 }, () => store.rateBuckets.take('t/bob', 1, 20, 50_000)),
    );
    expect(grants.filter((g) => g.granted === 1)).toHaveLength(20);
    expect(Math.max(...grants.map((g) => g.waitMs))).toBe(3_000);
    // 20 a minute is one every 3 s: 3 s later, one call has come back.
    expect(await store.rateBuckets.take('t/bob', 5, 20, 53_000)).toEqual({ granted: 1, waitMs: 0 });
  });
});
