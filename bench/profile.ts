// Where a launch's CPU goes in the dossier process (issue 35): `dossier start`
// under V8's sampling profiler while 8 callers launch /usr/bin/true back to back
// for 15 s; the main thread's samples of those seconds are grouped by the part
// of dossier (or the library) on their stack and divided by the launches made,
// and the workflow threads' busy time likewise.
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freshLaunches, startProduct, sustained } from './breakdown.ts';

const SECONDS = 15;
const CALLERS = 8;

interface CpuProfile {
  nodes: { id: number; callFrame: { functionName: string; url: string }; children?: number[] }[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** The part of the process a stack belongs to: the innermost dossier module on it, else its leaf's library. */
const PARTS: [RegExp, string][] = [
  [/\/(mcp|gateway)\//, 'gateway and MCP handling (dossier code)'],
  [/\/store\//, 'store (SQLite statements)'],
  [/\/temporal\/codec/, 'payload codec (sealing and opening payloads)'],
  [/\/sandbox\//, 'sandbox spawn and supervision'],
  [/\/activities\/workspaces\//, 'workspaces'],
  [/\/(activities|workflows|launches)\//, 'effect activity, journal, Evidence (dossier code)'],
  [/\/metrics\//, 'metrics'],
];

function partOf(url: string, fn: string): string | undefined {
  if (fn === '(garbage collector)') return 'garbage collection';
  if (fn === '(program)') return 'V8 and native, unattributed';
  if (!/\/(dist|src)\//.test(url) || url.includes('node_modules')) return undefined;
  return PARTS.find(([re]) => re.test(url))?.[1] ?? 'other dossier code';
}

function leafPart(url: string, fn: string): string {
  if (url.includes('@temporalio') || url.includes('node_modules/rxjs'))
    return 'Temporal SDK (no dossier frame)';
  if (url.includes('@modelcontextprotocol') || url.includes('node_modules/zod'))
    return 'MCP SDK (no dossier frame)';
  if (fn === 'postMessage') return 'messages to worker threads';
  return 'Node runtime (streams, HTTP, timers)';
}

/** Busy milliseconds by part over the window [end - SECONDS - 1.5 s, end - 1.5 s] (the load, before the stop). */
function attribute(profile: CpuProfile): { parts: Map<string, number>; busy: number } {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const times: number[] = [];
  let t = profile.startTime;
  for (const d of profile.timeDeltas) times.push((t += d));
  const end = times[times.length - 1]! - 1.5e6;
  const parts = new Map<string, number>();
  let busy = 0;
  for (let i = 1; i < times.length; i++) {
    if (times[i]! > end || times[i]! < end - SECONDS * 1e6) continue;
    const leaf = byId.get(profile.samples[i]!)!;
    if (leaf.callFrame.functionName === '(idle)') continue;
    const ms = (times[i]! - times[i - 1]!) / 1000;
    busy += ms;
    let part: string | undefined;
    for (let id: number | undefined = leaf.id; id !== undefined && !part; id = parent.get(id)) {
      const n = byId.get(id)!;
      part = partOf(n.callFrame.url, n.callFrame.functionName);
    }
    part ??= leafPart(leaf.callFrame.url, leaf.callFrame.functionName);
    parts.set(part, (parts.get(part) ?? 0) + ms);
  }
  return { parts, busy };
}

export async function benchProfile(): Promise<string[]> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'dossier-bench-profile-'));
  // The profiles are written when the process exits (stop: SIGINT, then its end).
  const stack = await startProduct({}, ['--cpu-prof', `--cpu-prof-dir=${dir}`, '--cpu-prof-interval', '500']);
  await freshLaunches(stack, 'warm', 10);
  const load = await sustained(stack, CALLERS, SECONDS, 'load');
  await stack.stop();
  const launches = load.rate * SECONDS;
  // The main thread's profile is the largest; the others are worker threads (workflows, extraction).
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.cpuprofile'))
    .map((f) => path.join(dir, f));
  const profiles = files.map((f) => JSON.parse(readFileSync(f, 'utf8')) as CpuProfile);
  profiles.sort((a, b) => b.samples.length - a.samples.length);
  const main = attribute(profiles[0]!);
  const threads = profiles.slice(1).reduce((sum, p) => sum + attribute(p).busy, 0);
  const per = (ms: number) => `${(ms / launches).toFixed(1)} ms`;
  return [
    `| ${CALLERS} callers for ${SECONDS} s under the profiler | ${load.rate.toFixed(1)}/s, p50 ${load.p50.toFixed(0)} ms |`,
    '|---|---|',
    `| **main thread, CPU per launch** | **${per(main.busy)}** |`,
    ...[...main.parts.entries()].sort((a, b) => b[1] - a[1]).map(([part, ms]) => `| ${part} | ${per(ms)} |`),
    `| **workflow and extraction threads, CPU per launch** | **${per(threads)}** |`,
  ];
}
