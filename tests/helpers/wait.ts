import { readdirSync, readFileSync } from 'node:fs';
import { liveGroupMembers } from '../../src/sandbox/processes.ts';

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

/** PIDs of live processes whose command line contains `text` (for targets whose supervisor is gone). */
export function processesRunning(text: string): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')) continue;
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(text)) found.push(Number(entry));
    } catch {
      // ended while we looked
    }
  }
  return found;
}
