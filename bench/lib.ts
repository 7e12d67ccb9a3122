// Shared helpers for benchmarks: statistics, a real embedded stack, MCP clients.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
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
