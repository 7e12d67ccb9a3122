// The leasing limiter over the real store's buckets (a SQLite file): two
// limiters stand for two gateway replicas sharing one database.
import { describe, expect, it } from 'vitest';
import { scratchStore } from '../../tests/helpers/scratchStore.ts';
import { leaseSize, RateLimiter } from './rateLimit.ts';

const scratch = scratchStore('rate');
const store = () => scratch.store;

describe('RateLimiter', () => {
  it('allows a burst of perMinute calls per key across two replicas, then says how long to wait', async () => {
    const replicas = [new RateLimiter(60, store().rateBuckets), new RateLimiter(60, store().rateBuckets)];
    const waits = await Promise.all(
      Array.from({ length: 70 }, (_, i) => replicas[i % 2]!.take('team/alice')),
    );
    expect(waits.filter((w) => w === 0)).toHaveLength(60);
    const refused = waits.filter((w) => w > 0);
    expect(refused).toHaveLength(10);
    for (const w of refused) expect(w).toBeLessThanOrEqual(1_000);
    expect(await replicas[1]!.take('team/bob')).toBe(0);
  });

  it('leases in batches for high limits, so a replica runs ahead by less than one batch', async () => {
    expect(leaseSize(60)).toBe(1);
    expect(leaseSize(6_000)).toBe(50);
    const perMinute = 1_200; // batches of 10
    const replicas = [0, 1, 2].map(() => new RateLimiter(perMinute, store().rateBuckets));
    let allowed = 0;
    for (let i = 0; i < 1_500; i++) if ((await replicas[i % 3]!.take('team/carol')) === 0) allowed++;
    // The bucket grants exactly its burst; refill over the test's own run time adds a little.
    expect(allowed).toBeGreaterThanOrEqual(perMinute);
    expect(allowed).toBeLessThan(perMinute + 3 * leaseSize(perMinute) + 50);
  });
});
