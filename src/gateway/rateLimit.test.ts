import { describe, expect, it } from 'vitest';
import { RateLimiter } from './rateLimit.ts';

describe('RateLimiter', () => {
  it('allows a burst of perMinute calls, then says how long to wait, per key', () => {
    const limiter = new RateLimiter(60);
    for (let i = 0; i < 60; i++) expect(limiter.take('alice', 0)).toBe(0);
    expect(limiter.take('alice', 0)).toBe(1_000);
    expect(limiter.take('bob', 0)).toBe(0);
    expect(limiter.take('alice', 1_000)).toBe(0);
  });
});
