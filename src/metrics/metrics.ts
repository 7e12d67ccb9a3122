// Prometheus metrics of this process (a gateway, a worker, or both in the
// embedded stack): what the cluster does, never who does it. No label names a
// team, a principal, a key or a target, so a scrape shows one team nothing of
// another's work beyond the cluster's totals (and a scrape needs the
// operator's DOSSIER_METRICS_TOKEN, not a team token).
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

export const registry = new Registry();
collectDefaultMetrics({ register: registry });

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

/** Each task queue's backlog, asked of Temporal when scraped (a gateway adds the source). */
export const queueBacklog = new Gauge({
  name: 'dossier_task_queue_backlog',
  help: "Tasks waiting in each task queue (Temporal's approximate backlog), by queue and type; read when scraped.",
  labelNames: ['queue', 'type'] as const,
  registers: [registry],
  async collect() {
    this.reset();
    for (const source of backlogSources) {
      for (const row of await source().catch(() => []))
        this.set({ queue: row.queue, type: row.type }, row.backlog);
    }
  },
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
