// Per-principal rate limits that hold across gateway replicas: each principal
// has one token bucket in the store (`perMinute` calls a minute, bursts up to
// the same number). A replica leases calls from it in small batches and spends
// them locally, so a busy principal costs the store one transaction per batch,
// not per call; a replica can run ahead of the shared rate by at most one
// batch less one call. Low limits lease one call at a time, so they are exact.

export interface SharedBuckets {
  take(key: string, want: number, perMinute: number): Promise<{ granted: number; waitMs: number }>;
}

/** Calls leased per trip to the store: about half a second of the full rate, 1 to 50. */
export function leaseSize(perMinute: number): number {
  return Math.max(1, Math.min(50, Math.floor(perMinute / 120)));
}

export class RateLimiter {
  private readonly leased = new Map<string, number>();
  private readonly leasing = new Map<string, Promise<{ granted: number; waitMs: number }>>();
  private readonly batch: number;

  constructor(
    private readonly perMinute: number,
    private readonly shared: SharedBuckets,
  ) {
    this.batch = leaseSize(perMinute);
  }

  /** Takes one call of `key`; resolves 0 when allowed, else the ms to wait before the next one is. */
  async take(key: string): Promise<number> {
    for (;;) {
      const have = this.leased.get(key) ?? 0;
      if (have >= 1) {
        if (have === 1) this.leased.delete(key);
        else this.leased.set(key, have - 1);
        return 0;
      }
      // One lease in flight per key: concurrent calls wait for it instead of each asking the store.
      let lease = this.leasing.get(key);
      if (!lease) {
        lease = this.shared
          .take(key, this.batch, this.perMinute)
          .then((r) => {
            if (r.granted > 0) this.leased.set(key, (this.leased.get(key) ?? 0) + r.granted);
            return r;
          })
          .finally(() => this.leasing.delete(key));
        this.leasing.set(key, lease);
      }
      const { granted, waitMs } = await lease;
      if (granted === 0) return waitMs;
    }
  }
}
