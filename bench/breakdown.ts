// Where a fresh launch's time goes: the gateway's side (HTTP, validation, the
// claim, the start RPC) up to the workflow's start, then each step of the
// workflow history (task waits and runs, the activity), then the way back
// (the result long-poll, the store read, the reply). Times of history events
// come from the Temporal server, on the same machine's clock.
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { Client as TemporalClient, Connection } from '@temporalio/client';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import proto from '@temporalio/proto';
import type { DevJson } from '../src/dev/devJson.ts';
import { spawnDossier } from '../tests/helpers/processes.ts';
import { benchEnv, callTool, connect, cpu, median, ms, percentile, threadSplit, threadTimes } from './lib.ts';

/** A running `dossier start`, as its own process (as users run it), and the Temporal server it started. */
export interface Running {
  devJson: DevJson;
  /** The environment it runs with (DOSSIER_HOME and the rest), for processes that join it. */
  env: Record<string, string>;
  pid: number;
  temporalPid: number | undefined;
  stop(): Promise<void>;
}

export async function startProduct(
  extra: Record<string, string> = {},
  nodeArgs: string[] = [],
  /** A Temporal server of the bench's own (DOSSIER_TEMPORAL_ADDRESS in `extra`): its process. */
  server?: { pid: number | undefined },
): Promise<Running> {
  const env = await benchEnv(extra);
  const product = await spawnDossier('start', env, 'dossier is ready', [], nodeArgs);
  const devJson = JSON.parse(readFileSync(path.join(env.DOSSIER_HOME!, 'dev.json'), 'utf8')) as DevJson;
  const pid = product.child.pid!;
  const children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/);
  const temporalPid =
    server?.pid ??
    children.map(Number).find((c) => readFileSync(`/proc/${c}/cmdline`, 'utf8').includes('start-dev'));
  // On a Temporal of its own, `dossier start` makes no local token: the bench makes an operator's.
  devJson.token ||= execFileSync(
    process.execPath,
    ['bin/dossier.js', 'token', 'create', '--principal', 'bench', '--team', 'bench', '--role', 'operator'],
    { env: { ...process.env, ...env }, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] },
  ).trim();
  return { devJson, env, pid, temporalPid, stop: () => product.kill('SIGINT') };
}

/** The proto enum's names by value, for histories decoded with numeric event types. */
const EVENT_NAMES = proto.temporal.api.enums.v1.EventType as unknown as Record<number, string>;

export interface Sample {
  key: string;
  /** Wall-clock ms (with sub-ms precision) when the call was sent and when its reply arrived. */
  sent: number;
  answered: number;
}

export const wallNow = () => performance.timeOrigin + performance.now();

type Phase = [name: string, from: string, to: string];
const PHASES: Phase[] = [
  [
    'gateway: call to workflow started (HTTP, validation, claim, start RPC)',
    'sent',
    'WORKFLOW_EXECUTION_STARTED',
  ],
  ['workflow task 1: waiting for a poller', 'WORKFLOW_TASK_SCHEDULED', 'WORKFLOW_TASK_STARTED'],
  ['workflow task 1: run (schedules the effect)', 'WORKFLOW_TASK_STARTED', 'WORKFLOW_TASK_COMPLETED'],
  ['effect activity: waiting for a poller', 'ACTIVITY_TASK_SCHEDULED', 'ACTIVITY_TASK_STARTED'],
  [
    'effect activity: run (workspace, journal, sandboxed process, Evidence, outcome)',
    'ACTIVITY_TASK_STARTED',
    'ACTIVITY_TASK_COMPLETED',
  ],
  [
    'effect activity started to reply received (the effect, its outcome written, the store read, the reply)',
    'ACTIVITY_TASK_STARTED',
    'answered',
  ],
  // Since the call answers when the outcome is in the store, the workflow's last task runs beside the reply.
  [
    'workflow task 2: wait and run (settle; beside the reply)',
    'ACTIVITY_TASK_COMPLETED',
    'WORKFLOW_EXECUTION_COMPLETED',
  ],
];

function eventMs(t: { seconds?: unknown; nanos?: number | null } | null | undefined): number {
  return Number(t?.seconds ?? 0) * 1000 + (t?.nanos ?? 0) / 1e6;
}

/** Median of each phase over the samples, as table rows. */
export async function breakdown(stack: Running, samples: Sample[]): Promise<string[]> {
  const connection = await Connection.connect({ address: stack.devJson.temporal_address });
  const client = new TemporalClient({ connection, namespace: stack.devJson.namespace });
  const phases = PHASES.map(() => [] as number[]);
  try {
    for (const s of samples) {
      const workflowId = `launch/local/local/${s.key}`;
      const history = await client.workflow.getHandle(workflowId).fetchHistory();
      const at: Record<string, number> = { sent: s.sent, answered: s.answered };
      let tasks = 0;
      for (const e of history.events ?? []) {
        const type = String(typeof e.eventType === 'number' ? EVENT_NAMES[e.eventType] : e.eventType).replace(
          /^EVENT_TYPE_/,
          '',
        );
        // The first of each kind, except the workflow task events, which the two tasks share.
        const name = type.startsWith('WORKFLOW_TASK_') && tasks >= 3 ? `${type}#2` : type;
        if (type.startsWith('WORKFLOW_TASK_')) tasks++;
        at[name] ??= eventMs(e.eventTime as never);
      }
      PHASES.forEach(([, from, to], i) => {
        if (at[from] !== undefined && at[to] !== undefined) phases[i]!.push(at[to]! - at[from]!);
      });
    }
  } finally {
    await connection.close();
  }
  return PHASES.map(([name], i) => `| ${name} | ${ms(median(phases[i]!))} |`);
}

/** Fresh launches of /usr/bin/true, one at a time, with where their time goes. */
export async function freshLaunches(stack: Running, prefix: string, runs: number) {
  const client = await connect(stack);
  const samples: Sample[] = [];
  const times: number[] = [];
  try {
    for (let i = 0; i < runs; i++) {
      const key = `${prefix}-${i}`;
      const sent = wallNow();
      const r = await callTool(client, 'capture_process_scenario', {
        executable: '/usr/bin/true',
        idempotency_key: key,
      });
      const answered = wallNow();
      if (r.status !== 'succeeded') throw new Error(`launch ${key} ended ${r.status}`);
      samples.push({ key, sent, answered });
      times.push(answered - sent);
    }
  } finally {
    await client.close();
  }
  return { times, samples };
}

/** Resident memory of a process, MiB: what every spawn() it makes has to fork. */
export function residentMiB(pid: number): number {
  const kib = /^VmRSS:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  return Number(kib ?? NaN) / 1024;
}

/** The sandbox launcher forked by a dossier process, if it has started one. */
function launcherOf(pid: number): number | undefined {
  const children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/);
  return children
    .map(Number)
    .find((c) => c && readFileSync(`/proc/${c}/cmdline`, 'utf8').includes('launcher.mjs'));
}

/** `callers` clients launching back to back for `seconds`; throughput, latency and CPU per launch. */
export async function sustained(stack: Running, callers: number, seconds: number, prefix: string) {
  const clients = await Promise.all(Array.from({ length: callers }, () => connect(stack)));
  return sustainedOn(clients, seconds, prefix, { pid: stack.pid, temporalPid: stack.temporalPid });
}

/** Launches of /usr/bin/true back to back from each of `clients` for `seconds`; with `pids`, CPU per launch. */
export async function sustainedOn(
  clients: Client[],
  seconds: number,
  prefix: string,
  pids?: { pid: number; temporalPid: number | undefined },
) {
  const latencies: number[] = [];
  let n = 0;
  const pid = pids?.pid ?? process.pid;
  const temporalPid = pids?.temporalPid;
  // The sandbox's launcher (a child of the dossier process) starts the programs: its own CPU is
  // dossier's, its reaped children are the programs.
  const launcher = launcherOf(pid);
  const both = () => {
    const self = cpu(pid);
    const extra = launcher ? cpu(launcher) : { own: 0, children: 0 };
    return { own: self.own + extra.own, children: self.children + extra.children };
  };
  // The callers are MCP clients in this process, sharing the machine's cores with what they measure
  // (the bare floor's callers are in its own process, counted there).
  const reading = () => ({
    self: both(),
    temporal: temporalPid ? cpu(temporalPid) : undefined,
    callers: cpu('self'),
    threads: threadTimes(pid),
    own: cpu(pid).own,
  });
  const before = reading();
  const t0 = performance.now();
  const deadline = t0 + seconds * 1000;
  await Promise.all(
    clients.map(async (c) => {
      while (performance.now() < deadline) {
        const key = `${prefix}-${n++}`;
        const s = performance.now();
        const r = await callTool(c, 'capture_process_scenario', {
          executable: '/usr/bin/true',
          idempotency_key: key,
        });
        if (r.status !== 'succeeded') throw new Error(`launch ${key} ended ${r.status}`);
        latencies.push(performance.now() - s);
      }
    }),
  );
  const elapsed = (performance.now() - t0) / 1000;
  const after = reading();
  await Promise.all(clients.map((c) => c.close()));
  const per = (x: number) => x / latencies.length;
  return {
    rate: latencies.length / elapsed,
    p50: median(latencies),
    p99: percentile(latencies, 99),
    cpuMs: {
      dossier: per(after.self.own - before.self.own),
      programs: per(after.self.children - before.self.children),
      temporal: before.temporal ? per(after.temporal!.own - before.temporal.own) : NaN,
      // Where the pid measured is this process (dossier in it), its figure already holds them.
      ...(pid === process.pid ? {} : { callers: per(after.callers.own - before.callers.own) }),
    },
    // The dossier process's share by thread (its launcher, counted above, is a process of its own).
    threadMs: Object.fromEntries(
      Object.entries(threadSplit(pid, before.threads, after.threads, after.own - before.own)).map(
        ([k, v]) => [k, per(v)],
      ),
    ),
  };
}

/** `npm run bench -- overhead`: the fresh-launch breakdown alone, for profiling. */
export async function benchOverhead(): Promise<string[]> {
  const stack = await startProduct();
  try {
    await freshLaunches(stack, 'warm', 5);
    const { times, samples } = await freshLaunches(stack, 'fresh', 20);
    const load = await sustained(stack, 8, 15, 'load');
    const rss = residentMiB(stack.pid);
    // A second worker process on the same Temporal, namespace and store, as a cluster adds one.
    const second = await spawnDossier(
      'worker',
      {
        ...stack.env,
        DOSSIER_TEMPORAL_ADDRESS: stack.devJson.temporal_address,
        DOSSIER_NAMESPACE: stack.devJson.namespace,
      },
      'worker ready',
    );
    const two = await sustained(stack, 8, 15, 'load2').finally(() => second.kill('SIGINT'));
    return [
      '| phase (median of 20 fresh launches of /usr/bin/true) | time |',
      '|---|---|',
      `| whole call | ${ms(median(times))} |`,
      ...(await breakdown(stack, samples)),
      `| 8 callers for 15 s | ${load.rate.toFixed(1)}/s, p50 ${ms(load.p50)}, p99 ${ms(load.p99)} |`,
      `| CPU per launch under that load: dossier process / sandboxed programs / Temporal server | ${ms(load.cpuMs.dossier)} / ${ms(load.cpuMs.programs)} / ${ms(load.cpuMs.temporal)} |`,
      `| resident memory of the dossier process after that load (a spawn forks it) | ${rss.toFixed(0)} MiB |`,
      `| 8 callers for 15 s, a second worker process added (same 2 cores) | ${two.rate.toFixed(1)}/s, p50 ${ms(two.p50)}, p99 ${ms(two.p99)} |`,
    ];
  } finally {
    await stack.stop();
  }
}
