import { liveGroupMembers } from '../../src/activities/processes.ts';

/** Polls `probe` until it returns a truthy value, or fails after `timeoutMs` with `what`. */
export async function eventually<T>(
  what: string,
  probe: () => T | Promise<T>,
  timeoutMs = 30_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** True while any process of the group `pgid` is alive (zombies do not count). */
export function groupAlive(pgid: number): boolean {
  return liveGroupMembers(pgid).length > 0;
}
