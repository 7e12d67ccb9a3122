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

  it('keeps a principal’s newest sessions up to the cap, closing the least recently seen', async () => {
    const t0 = 1_000_000;
    for (let i = 0; i < 3; i++) {
      const closed = await store.sessions.open({ ...alice, id: `s${i}`, init: '{}' }, 3, 0, t0 + i);
      expect(closed).toEqual([]);
    }
    expect(await store.sessions.touch('s0', alice, 0, t0 + 10)).toBe(true);
    expect(await store.sessions.get('s0', alice, 0)).toMatchObject({
      id: 's0',
      init: '{}',
      last_seen_at: t0 + 10,
    });
    // s1 is now the least recently seen: the fourth session closes it.
    expect(await store.sessions.open({ ...alice, id: 's3', init: '{}' }, 3, 0, t0 + 11)).toEqual(['s1']);
    expect(await store.sessions.touch('s1', alice, 0, t0 + 12)).toBe(false);
    // Another team's principal of the same name neither counts nor reaches alice's sessions.
    expect(await store.sessions.open({ ...mallory, id: 'm0', init: '{}' }, 3, 0, t0 + 13)).toEqual([]);
    expect(await store.sessions.touch('s0', mallory, 0, t0 + 14)).toBe(false);
    expect(await store.sessions.get('s0', mallory, 0)).toBeUndefined();
    expect(await store.sessions.touch('s0', alice, 0, t0 + 15)).toBe(true);
  });

  it('never closes the session it opens, whatever the replicas’ clocks say', async () => {
    const bob = { team: 't', principal: 'bob' };
    await store.sessions.open({ ...bob, id: 'b0', init: '{}' }, 2, 0, 9_000);
    await store.sessions.open({ ...bob, id: 'b1', init: '{}' }, 2, 0, 9_001);
    // A replica whose clock is behind opens the third: the least recently seen other one goes.
    expect(await store.sessions.open({ ...bob, id: 'b2', init: '{}' }, 2, 0, 8_000)).toEqual(['b0']);
    expect(await store.sessions.touch('b2', bob, 0, 8_001)).toBe(true);
  });

  it('treats sessions not seen within the idle time as gone, and sweeps them', async () => {
    await store.sessions.open({ ...alice, id: 'old', init: '{}' }, 100, 0, 5_000);
    expect(await store.sessions.touch('old', alice, 6_000, 7_000)).toBe(false);
    expect(await store.sessions.sweep(6_000)).toBeGreaterThanOrEqual(1);
    await store.sessions.close('s0');
    expect(await store.sessions.touch('s0', alice, 0)).toBe(false);
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
