// Shared helpers for benchmarks: statistics, a real embedded stack, MCP clients.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../src/config.ts';
import { startStack, type Stack } from '../src/dev/stack.ts';
import { freePort } from '../tests/helpers/ports.ts';

export { freePort };

const scratch: string[] = [];
process.once('exit', () => {
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});

/** A folder `dossier-bench-<name>-…` for this run, removed when the benchmark process exits. */
export function benchDir(name?: string): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), name ? `dossier-bench-${name}-` : 'dossier-bench-'));
  scratch.push(dir);
  return dir;
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

export function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!;
}

export const ms = (x: number) => `${x.toFixed(x < 10 ? 2 : 1)} ms`;

/** One direct spawn of /usr/bin/true, to its exit: what a launch of it is measured over. */
export function spawnTrue(): Promise<number> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn('/usr/bin/true', [], { stdio: 'ignore' });
    child.once('error', reject);
    child.once('exit', () => resolve(performance.now() - t0));
  });
}

export async function timed<T>(fn: () => Promise<T>): Promise<[number, T]> {
  const t0 = performance.now();
  const value = await fn();
  return [performance.now() - t0, value];
}

export async function benchEnv(extra: Record<string, string> = {}): Promise<Record<string, string>> {
  return {
    DOSSIER_HOME: benchDir(),
    DOSSIER_PORT: String(await freePort()),
    DOSSIER_TEMPORAL_PORT: String(await freePort()),
    DOSSIER_UI_PORT: String(await freePort()),
    ...extra,
  };
}

/** The embedded stack exactly as `npm start` runs it, in this process. */
export async function benchStack(extra: Record<string, string> = {}): Promise<Stack> {
  return startStack(loadConfig(await benchEnv(extra)), { log: () => undefined });
}

export async function connect(stack: { devJson: Stack['devJson'] }): Promise<Client> {
  const client = new Client({ name: 'dossier-bench', version: '1' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(stack.devJson.mcp_url), {
      requestInit: { headers: { Authorization: `Bearer ${stack.devJson.token}` } },
    }),
  );
  return client;
}

export async function callTool(client: Client, name: string, args: Record<string, unknown>) {
  const r = await client.callTool({ name, arguments: args }, undefined, { timeout: 130_000 });
  return r.structuredContent as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
}

/** CPU time (ms) a process has used, and what its reaped children used, from /proc (USER_HZ 100). */
export function cpu(pid: number | 'self'): { own: number; children: number } {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  const n = (i: number) => Number(fields[i - 3]) * 10;
  return { own: n(14) + n(15), children: n(16) + n(17) };
}

/** CPU time (ms) of each thread of a process, by thread id, with its name (from /proc, USER_HZ 100). */
export function threadTimes(pid: number | 'self'): Map<number, { name: string; ms: number }> {
  const root = `/proc/${pid}/task`;
  const times = new Map<number, { name: string; ms: number }>();
  for (const tid of readdirSync(root)) {
    let stat: string;
    try {
      stat = readFileSync(`${root}/${tid}/stat`, 'utf8');
    } catch {
      continue; // the thread ended between the listing and the read
    }
    const fields = stat.slice(stat.lastIndexOf(') ') + 2).split(' ');
    const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(') '));
    times.set(Number(tid), { name, ms: (Number(fields[11]) + Number(fields[12])) * 10 });
  }
  return times;
}

/**
 * A process's CPU between two `threadTimes` readings, split by thread: its main thread; Temporal's
 * core (the SDK's Rust runtime: its tokio threads and the thread that hands out workflow
 * activations); the busiest other thread (in a worker process, the workflow sandbox's V8 thread);
 * the rest (V8's garbage-collection and compiler helpers, libuv's pool, other worker threads); and
 * threads that ended between the readings, which no listing shows: the process's own CPU over the
 * same time (`processMs`) less the others.
 */
export function threadSplit(
  pid: number,
  before: Map<number, { name: string; ms: number }>,
  after: Map<number, { name: string; ms: number }>,
  processMs: number,
): { main: number; temporalCore: number; busiestOther: number; rest: number; ended: number } {
  const split = { main: 0, temporalCore: 0, busiestOther: 0, rest: 0, ended: 0 };
  for (const [tid, { name, ms }] of after) {
    const used = ms - (before.get(tid)?.ms ?? 0);
    if (tid === pid) split.main += used;
    else if (/^(tokio-runtime|workflow-proces)/.test(name)) split.temporalCore += used;
    else if (used > split.busiestOther) {
      split.rest += split.busiestOther;
      split.busiestOther = used;
    } else split.rest += used;
  }
  split.ended = Math.max(0, processMs - split.main - split.temporalCore - split.busiestOther - split.rest);
  return split;
}
