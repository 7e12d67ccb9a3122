// Prometheus metrics of this process (a gateway, a worker, or both in the
// embedded stack): what the cluster does, never who does it. No label names a
// team, a principal, a key or a target, so a scrape shows one team nothing of
// another's work beyond the cluster's totals (and a scrape needs the
// operator's DOSSIER_METRICS_TOKEN, not a team token).
import { isMainThread } from 'node:worker_threads';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

export const registry = new Registry();
// The process's own metrics belong to its main thread (a worker thread's would never be scraped).
if (isMainThread) collectDefaultMetrics({ register: registry });

const SECONDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];

/** Every tool call the gateway answered, by tool and outcome (`ok` or the error code). */
export const toolCalls = new Counter({
  name: 'dossier_tool_calls_total',
  help: 'Tool calls answered by the gateway, by tool and outcome (ok or the error code).',
  labelNames: ['tool', 'outcome'] as const,
  registers: [registry],
});

/** Launch calls: a new key started, a retry attached, or a key reused with another body. */
export const launchCalls = new Counter({
  name: 'dossier_launch_calls_total',
  help: 'Calls of effectful tools: kind is new (a launch started), attached (a retry of a held key) or key_reused (refused).',
  labelNames: ['tool', 'kind'] as const,
  registers: [registry],
});

export const launchWaitSeconds = new Histogram({
  name: 'dossier_launch_wait_seconds',
  help: 'How long a call waited for its launch within wait_ms, by tool and whether the launch ended in that time.',
  labelNames: ['tool', 'ended'] as const,
  buckets: SECONDS,
  registers: [registry],
});

/** Launches a worker finished, by tool and status, and how long their effect ran. */
export const effectSeconds = new Histogram({
  name: 'dossier_effect_seconds',
  help: 'Effects run by this worker, by tool and final status (succeeded, failed, cancelled, interrupted).',
  labelNames: ['tool', 'status'] as const,
  buckets: SECONDS,
  registers: [registry],
});

export const storeSeconds = new Histogram({
  name: 'dossier_store_query_seconds',
  help: 'Store statements, by backend (sqlite, postgres) and kind (select, insert, update, delete, other).',
  labelNames: ['backend', 'kind'] as const,
  buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
  registers: [registry],
});

/** Bytes of finished launches' folders reclaimed because their team passed DOSSIER_TEAM_WORKSPACE_BYTES on this worker. */
export const reclaimedBytes = new Counter({
  name: 'dossier_reclaimed_bytes_total',
  help: "Bytes of finished launches' folders this worker reclaimed, oldest first, to keep a team under DOSSIER_TEAM_WORKSPACE_BYTES, by kind (workspace, output).",
  labelNames: ['kind'] as const,
  registers: [registry],
});

export const sandboxRefusals = new Counter({
  name: 'dossier_sandbox_refusals_total',
  help: 'Requests the sandbox policy refused before anything ran, by reason (network, isolation).',
  labelNames: ['reason'] as const,
  registers: [registry],
});

export interface Backlog {
  queue: string;
  type: 'workflow' | 'activity';
  backlog: number;
}
const backlogSources = new Set<() => Promise<Backlog[]>>();
/** Backlogs are asked of Temporal at most this often, and a scrape waits for them at most this long. */
const BACKLOG_TTL_MS = 15_000;
const BACKLOG_WAIT_MS = 2_000;
let backlogs: { at: number; rows: Promise<Backlog[]> } | undefined;

/** Every source's backlogs, shared by the scrapes of BACKLOG_TTL_MS (one round of questions at a time). */
function currentBacklogs(): Promise<Backlog[]> {
  if (!backlogs || Date.now() - backlogs.at > BACKLOG_TTL_MS) {
    const rows = Promise.all([...backlogSources].map((source) => source().catch(() => []))).then((all) =>
      all.flat(),
    );
    backlogs = { at: Date.now(), rows };
  }
  return backlogs.rows;
}

/**
 * Each task queue's backlog (Temporal's approximate count), asked when scraped and cached for
 * 15 s. Every gateway reports the same cluster-wide queues: aggregate with max, not sum. A scrape
 * that Temporal does not answer within 2 s shows none (and dossier_task_queue_backlog_up 0).
 */
export const queueBacklog = new Gauge({
  name: 'dossier_task_queue_backlog',
  help: "Tasks waiting in each task queue (Temporal's approximate backlog; the same on every gateway: aggregate with max).",
  labelNames: ['queue', 'type'] as const,
  registers: [registry],
  async collect() {
    this.reset();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<undefined>((resolve) => {
      timer = setTimeout(() => resolve(undefined), BACKLOG_WAIT_MS);
    });
    const rows = await Promise.race([currentBacklogs(), late]).finally(() => clearTimeout(timer));
    backlogUp.set(rows?.length ? 1 : 0);
    for (const row of rows ?? []) this.set({ queue: row.queue, type: row.type }, row.backlog);
  },
});

const backlogUp = new Gauge({
  name: 'dossier_task_queue_backlog_up',
  help: "Whether the last scrape got the task queues' backlogs from Temporal (1) or not (0).",
  registers: [registry],
});

/** Adds a source of queue backlogs; returns its removal. */
export function addBacklogSource(source: () => Promise<Backlog[]>): () => void {
  backlogSources.add(source);
  return () => backlogSources.delete(source);
}

/** The statement's kind, from its first word: bounded label values whatever the SQL. */
export function statementKind(sql: string): string {
  const word = /^\s*(\w+)/.exec(sql)?.[1]?.toLowerCase();
  return word === 'select' || word === 'insert' || word === 'update' || word === 'delete' || word === 'with'
    ? word
    : 'other';
}

/** The metrics in Prometheus' text format, and its content type. */
export async function renderMetrics(): Promise<{ body: string; contentType: string }> {
  return { body: await registry.metrics(), contentType: registry.contentType };
}
