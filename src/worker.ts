// The one place that wires a worker: a workflow worker on the shared `dossier`
// queue (workflows and store bookkeeping) and one activity worker per
// capability this host serves (`dossier-capture`, `dossier-extract`, …).
import {
  bundleWorkflowCode,
  NativeConnection,
  Runtime,
  Worker,
  type WorkflowBundleWithSourceMap,
} from '@temporalio/worker';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { NOT_SERVED_HERE, type EffectActivities } from './launches/protocol.ts';
import { createActivities } from './activities/index.ts';
import type { Config } from './config.ts';
import type { Store } from './store/store.ts';
import { payloadKeys } from './temporal/codec.ts';
import { dataConverter, FAILURE_CONVERTER_PATH } from './temporal/dataConverter.ts';
import { capabilityQueue, WORKFLOW_TASK_QUEUE } from './temporal/queues.ts';
import { clientTls, type TemporalTls } from './temporal/tls.ts';
import { CAPABILITIES } from './domain/types.ts';
import { tracing } from './metrics/tracing.ts';

const HERE = fileURLToPath(import.meta.url);
const SRC = path.dirname(HERE);
/** `.ts` when run from the sources, `.js` when run from the compiled build. */
const EXT = path.extname(HERE);
const WORKFLOWS_PATH = path.join(SRC, 'workflows', `index${EXT}`);

export interface RunningWorkers {
  /**
   * The workers' own connection: a client built on it in the same process
   * starts workflows eagerly (the first workflow task comes back with the
   * start and runs here, without a round trip through a poller).
   */
  connection: NativeConnection;
  shutdown(): Promise<void>;
}

function sourceFingerprint(): string {
  const hash = createHash('sha256');
  const require = createRequire(import.meta.url);
  hash.update(readFileSync(require.resolve('@temporalio/workflow/package.json')));
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) =>
      a.name.localeCompare(b.name),
    )) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (entry.name.endsWith(EXT)) hash.update(full).update(readFileSync(full));
    }
  };
  walk(SRC);
  hash.update(readFileSync(FAILURE_CONVERTER_PATH));
  return hash.digest('hex').slice(0, 16);
}

/**
 * Bundles the workflow code once per source version (and set of workflow
 * interceptor modules: tracing adds one); later starts reuse the file.
 */
export async function workflowBundle(
  cacheDir: string,
  interceptorModules: string[] = [],
): Promise<WorkflowBundleWithSourceMap> {
  const variant = interceptorModules.length
    ? `-${createHash('sha256').update(interceptorModules.join('\n')).digest('hex').slice(0, 8)}`
    : '';
  const file = path.join(cacheDir, `workflows-${sourceFingerprint()}${variant}.js`);
  if (existsSync(file)) return { code: readFileSync(file, 'utf8') } as WorkflowBundleWithSourceMap;
  const bundle = await bundleWorkflowCode({
    workflowsPath: WORKFLOWS_PATH,
    workflowInterceptorModules: interceptorModules,
    failureConverterPath: FAILURE_CONVERTER_PATH,
    logger: quietLogger,
  });
  mkdirSync(cacheDir, { recursive: true });
  // A temp file of its own: processes that bundle at once each rename a whole file into place.
  const temp = `${file}.${process.pid}.tmp`;
  writeFileSync(temp, bundle.code);
  renameSync(temp, file);
  return bundle;
}

const quietLogger = {
  log: () => undefined,
  trace: () => undefined,
  debug: () => undefined,
  info: () => undefined,
  // Activity-only workers say they poll no workflows, and a launch that did not
  // succeed fails its workflow (and often its activity): all by design here.
  warn: (message: string) =>
    !/^(No workflows registered|Workflow failed|Activity failed)/.test(message) && console.warn(message),
  error: (message: string) => console.error(message),
};

/**
 * How long a workflow task waits on the queue of the worker that ran the workflow last (its
 * cache) before any worker may take it. A worker that died leaves a launch's next task there: the
 * one its effect's heartbeat timeout schedules. Temporal's 10 s default doubled the time a launch
 * took to notice its worker's death, effect begun (interrupted) or not (dispatched again); a live
 * worker starts its tasks in milliseconds, and one that misses this only costs a replay elsewhere.
 */
const STICKY_TASK_WAIT = '2 seconds';

/**
 * Polls a capability's worker keeps open for effects that come through its queue (those whose
 * workflow task ran on a worker that does not serve the capability, dispatches after a lost worker,
 * and any past the free slots): a quarter of its slots, at least 1, at most the SDK's default of 10.
 * Each waiting poll holds a slot, and so does the next one waiting for its turn (sdk-core takes the
 * slot first): 16 slots keep 5 for polls and 11 free for effects handed back eagerly; 1 or 2 slots
 * hand every effect through the queue. At 32 callers on 16 slots, two polls shortened the median
 * most (0.65 s, four 0.83 s, ten 1.0 s) but left the effects queued behind the eager ones waiting
 * longest (p99 4.3 s, four 3.2 s, ten 2.5 s).
 */
function activityPolls(slots: number): number {
  return Math.min(10, Math.max(1, Math.round(slots / 4)));
}

/** How a worker runs the effects of a capability it serves: its slots, their polls, heartbeats. */
function effectSlots(slots: number) {
  return {
    maxConcurrentActivityTaskExecutions: slots,
    maxConcurrentLocalActivityExecutions: slots,
    // With the SDK's 10 polls holding 11 of 16 slots, 8 launches at once already sent half their
    // effects the long way, through matching.
    activityTaskPollerBehavior: { type: 'simple-maximum' as const, maximum: activityPolls(slots) },
    // Heartbeats carry cancellation back to the activity: send them at
    // least every second so cancel_launch ends a process within ~1-2 s.
    maxHeartbeatThrottleInterval: '1 second',
  };
}

let runtimeInstalled = false;
function installRuntime(config: Config) {
  if (runtimeInstalled) return;
  runtimeInstalled = true;
  const sdkMetrics = config.metrics.sdkAddress;
  try {
    Runtime.install({
      logger: quietLogger as never,
      // The Temporal SDK's own metrics (polls, task latencies, slots) on an exporter of its own.
      ...(sdkMetrics ? { telemetryOptions: { metrics: { prometheus: { bindAddress: sdkMetrics } } } } : {}),
    });
  } catch (err) {
    // Already installed by the host process (tests): keep theirs. Anything else (an exporter
    // address in use) must not pass silently.
    if (!/already (been )?(installed|instantiated)/i.test((err as Error).message)) throw err;
  }
}

function notServedHere(capability: string): EffectActivities['runEffect'] {
  return () =>
    Promise.reject(
      ApplicationFailure.create({
        type: NOT_SERVED_HERE,
        message: `this worker does not serve the ${capability} capability`,
        nonRetryable: true,
      }),
    );
}

export async function startWorkers(deps: {
  config: Config;
  store: Store;
  address: string;
  /** Mutual TLS to a cluster's Temporal; none for the embedded dev server. */
  tls: TemporalTls | undefined;
  bundle: WorkflowBundleWithSourceMap;
}): Promise<RunningWorkers> {
  installRuntime(deps.config);
  const { config, store } = deps;
  const tls = clientTls(deps.tls);
  const connection = await NativeConnection.connect({ address: deps.address, tls });
  const converter = dataConverter(payloadKeys(config.payloadKeys, config.home));
  // Analysis bookkeeping starts (or attaches to) database builds: it needs a client of its own.
  const clientConnection = await Connection.connect({ address: deps.address, tls });
  const traced = tracing();
  const client = new Client({
    connection: clientConnection,
    namespace: config.namespace,
    dataConverter: converter,
    interceptors: { workflow: traced?.clientInterceptors ?? [] },
  });
  // With tracing on: activity spans, and the sink that takes workflow spans out of the sandbox
  // (the workflow interceptors themselves are in the bundle).
  const tracingOptions = traced
    ? { interceptors: { activity: traced.activityInterceptors }, sinks: traced.sinks }
    : {};
  // The grace period of a stop, for the local effects the SDK lets run past it.
  const stopped = new AbortController();
  const { effects, bookkeeping, analysis, maintain } = createActivities({
    store,
    config,
    client,
    stopped: stopped.signal,
  });
  // Housekeeping now and hourly: reclaim workspaces past their retention, and what dead workers left.
  void maintain();
  const housekeeping = setInterval(() => void maintain(), 3_600_000);
  housekeeping.unref();
  const workers: Worker[] = [
    await Worker.create({
      connection,
      namespace: config.namespace,
      taskQueue: WORKFLOW_TASK_QUEUE,
      workflowBundle: deps.bundle,
      stickyQueueScheduleToStartTimeout: STICKY_TASK_WAIT,
      dataConverter: converter,
      activities: bookkeeping,
      ...tracingOptions,
    }),
  ];
  // Every worker runs the launch workflows of every capability's queue, and the effects of the
  // capabilities it serves. Where it serves the capability, the effect its workflow task schedules
  // is handed back with that task (eager activity dispatch); where no worker serves it, the
  // workflow still runs and its effect fails as provider_unavailable; and any live worker settles
  // a launch whose effect's worker died, or cancels it.
  for (const capability of CAPABILITIES) {
    const serves = config.capabilities.includes(capability);
    workers.push(
      await Worker.create({
        connection,
        namespace: config.namespace,
        taskQueue: capabilityQueue(capability),
        workflowBundle: deps.bundle,
        stickyQueueScheduleToStartTimeout: STICKY_TASK_WAIT,
        dataConverter: converter,
        ...(serves
          ? {
              activities: capability === 'analysis' ? { ...effects, ...analysis } : effects,
              ...effectSlots(config.workerConcurrency),
            }
          : // A launch dispatched here first (DOSSIER_LAUNCH_DISPATCH=local) is refused, untouched,
            // and its workflow hands it to the capability's queue.
            { activities: { runEffect: notServedHere(capability) }, enableNonLocalActivities: false }),
        // A stopping worker lets running launches finish this long, then ends them (recorded interrupted).
        shutdownGraceTime: config.shutdownGraceMs,
        ...tracingOptions,
      }),
    );
  }
  const running = workers.map((w) => w.run());
  return {
    connection,
    async shutdown() {
      clearInterval(housekeeping);
      const grace = setTimeout(() => stopped.abort(), config.shutdownGraceMs);
      for (const w of workers) if (w.getState() === 'RUNNING') w.shutdown();
      await Promise.allSettled(running);
      clearTimeout(grace);
      await connection.close();
      await clientConnection.close();
    },
  };
}
