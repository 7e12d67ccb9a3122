// Start or attach to launches (docs/idempotency.md). The store's launch record is the
// arbiter of a key: it is claimed before Temporal is asked to start anything,
// and a finished launch is answered from it without a Temporal round trip.
import { ActivityExecutionFailedError, Client, WorkflowFailedError } from '@temporalio/client';
import { randomUUID } from 'node:crypto';
import type { Config } from '../config.ts';
import { TOOLS_BY_NAME } from '../tools/catalog.ts';
import { DossierError } from '../domain/errors.ts';
import type { DeviceStore } from '../store/devices.ts';
import type { LaunchFilter, LaunchStore } from '../store/launches.ts';
import { isFinished, type LaunchRecord, type Page, type Principal } from '../domain/types.ts';
import type { ToolContract } from '../tools/contract.ts';
import { capabilityQueue, WORKFLOW_TASK_QUEUE } from '../temporal/queues.ts';
import { bodyDigest, launchWorkflowId } from '../launches/keys.ts';
import { errorOutcome } from '../launches/outcomes.ts';
import { cancelStandalone, endedWithoutOutcome, standaloneOutcome, startStandalone } from './standalone.ts';
import { launchCalls, launchWaitSeconds, type Backlog } from '../metrics/metrics.ts';
import proto from '@temporalio/proto';
import { CAPABILITIES } from '../domain/types.ts';
import { waitForWorkflow, type WaitOptions } from './waiting.ts';
import { deviceAttributes, startLaunchWorkflow, unavailable, unreachable } from './launchStart.ts';
import { keyReused, launchReply, START_LATE_MS, type LaunchReply } from './launchReplies.ts';

export type { LaunchReply, WaitOptions };

/** gRPC status NOT_FOUND: the workflow does not exist. */
const GRPC_NOT_FOUND = 5;
/**
 * The least time a call gives Temporal to start its launch, however short its wait (a slower
 * start leaves the launch pending, and a background round starts it).
 */
const START_ATTEMPT_MIN_MS = 3_000;
/** How long a background round gives Temporal to start one pending launch. */
const START_ROUND_ATTEMPT_MS = 10_000;
/** How often a call waiting on a pending launch looks whether the gateway has started it. */
const PENDING_POLL_MS = 1_000;
/** How often a background round looks for standalone launches that ended without an outcome. */
const SETTLE_STANDALONE_EVERY_MS = 30_000;

export class LaunchService {
  /** When the background round last looked for ended standalone launches, and where the next goes on. */
  private settledAt = 0;
  private readonly swept = { after: '', id: '' };

  constructor(
    private readonly deps: {
      launches: LaunchStore;
      /** For the device search attributes of device operations. */
      devices?: DeviceStore;
      client: Client;
      namespace: string;
      uiUrl: string;
      /**
       * The client shares its native connection with workers in this process: ask for
       * eager start (the first workflow task comes back with the start and runs here).
       */
      eagerStart?: boolean;
      /** How the effect is dispatched (DOSSIER_LAUNCH_DISPATCH); by default as an activity. */
      dispatch?: Config['launchDispatch'];
    },
  ) {}

  async startOrAttach(
    caller: Principal,
    contract: ToolContract,
    args: Record<string, unknown>,
    wait: WaitOptions & {
      /** Runs before a new key is claimed (never for a key already held), with its body digest; throwing claims nothing. */
      beforeClaim?: (bodyDigest: string) => Promise<void>;
    },
  ): Promise<LaunchReply> {
    const {
      idempotency_key: key,
      wait_ms: _wait,
      ...body
    } = args as {
      idempotency_key: string;
      wait_ms: number;
    } & Record<string, unknown>;
    const digest = bodyDigest(contract.name, body);
    const workflowId = launchWorkflowId(caller.team, caller.principal, key);
    const investigation = typeof body.investigation === 'string' ? body.investigation : null;
    // A retry is answered from the row it finds; only a new key is asked about, then claimed.
    const held = await this.deps.launches.get(caller.team, caller.principal, key);
    if (!held) await wait.beforeClaim?.(digest);
    const { created, record } = held
      ? { created: false, record: held }
      : await this.deps.launches.claim({
          team: caller.team,
          principal: caller.principal,
          key,
          tool: contract.name,
          bodyDigest: digest,
          input: body,
          workflowId,
          investigation,
        });
    if (record.tool !== contract.name || record.bodyDigest !== digest) {
      launchCalls.inc({ tool: contract.name, kind: 'key_reused' });
      throw keyReused(record, contract.name, body, digest);
    }
    launchCalls.inc({ tool: contract.name, kind: created ? 'new' : 'attached' });
    // The caller that claimed the key is never `attached`, even when a retry that found the row
    // started the launch and it finished before this call read the row back.
    if (isFinished(record.status)) return this.reply(record, !created);
    const deadline = Date.now() + wait.waitMs;
    let runId = record.runId;
    // Watched from before the start: an end written while this call starts the launch is heard too.
    const watch = this.deps.launches.watchEnd(record.workflowId);
    try {
      // Temporal's client retries an unreachable server for about 20 s: the call's wait bounds that.
      runId ??= await this.ensureStarted(
        record,
        contract,
        Math.max(deadline, Date.now() + START_ATTEMPT_MIN_MS),
      );
    } catch (err) {
      // Temporal did not answer: the key stays claimed, pending; the background round starts it.
      if (!(err instanceof DossierError && err.code === 'provider_unavailable' && unreachable(err))) {
        watch.stop();
        throw err;
      }
    }
    return this.wait({ ...record, runId }, !created, wait, deadline, watch);
  }

  async get(caller: Principal, key: string): Promise<LaunchReply> {
    return this.reply(await this.find(caller, key), true);
  }

  /** One of the caller's launch records and its workflow's history (none before the workflow started). */
  async history(caller: Principal, key: string) {
    const record = await this.find(caller, key);
    if (!record.runId) return { record, events: [], unread: null };
    try {
      const handle = this.deps.client.workflow.getHandle(record.workflowId, record.runId);
      return { record, events: (await handle.fetchHistory()).events ?? [], unread: null };
    } catch (err) {
      return { record, events: [], unread: (err as Error).message };
    }
  }

  async await(caller: Principal, key: string, wait: WaitOptions): Promise<LaunchReply> {
    const record = await this.find(caller, key);
    if (isFinished(record.status)) return this.reply(record, true);
    return this.wait(record, true, wait);
  }

  /**
   * Cancels a launch in the caller's name: the request carries the principal as
   * its identity and reason, so the workflow history says who cancelled. A
   * launch whose workflow never started (Temporal was down when it was claimed)
   * is recorded cancelled at once: nothing of it ran.
   */
  async cancel(caller: Principal, key: string, wait: WaitOptions): Promise<LaunchReply> {
    const record = await this.find(caller, key);
    if (isFinished(record.status)) return this.reply(record, true);
    if (this.deps.dispatch === 'standalone' && (await cancelStandalone(this.deps.client, caller, record))) {
      await this.deps.launches.requestCancel(record.workflowId);
      return this.wait(record, true, wait);
    }
    try {
      await this.deps.client.workflowService.requestCancelWorkflowExecution({
        namespace: this.deps.namespace,
        workflowExecution: { workflowId: record.workflowId },
        identity: `dossier principal ${caller.team}/${caller.principal}`,
        reason: `cancel_launch by ${caller.principal} of team ${caller.team}`,
        requestId: randomUUID(),
      });
    } catch (err) {
      if ((err as { code?: number }).code !== GRPC_NOT_FOUND) throw unavailable(err, 'cancel');
      // Only a launch that is provably unstarted is recorded cancelled; one that moved meanwhile is answered as it is.
      const recorded = await this.deps.launches.finishUnstarted(
        record.workflowId,
        errorOutcome(
          'cancelled',
          'cancelled',
          `Cancelled by ${caller.principal} before its workflow started; nothing of it ran.`,
          'Start a new launch with a new idempotency_key if the effect is still wanted.',
        ),
      );
      const now = (await this.deps.launches.byWorkflowId(record.workflowId)) ?? record;
      if (!recorded && !isFinished(now.status)) {
        throw new DossierError(
          'provider_unavailable',
          'Temporal has no workflow for this launch, yet the store says it started; its state cannot be told from here.',
          'Check the launch in the Temporal UI; get_launch shows what the store holds.',
          { workflow_id: record.workflowId },
        );
      }
      return this.reply(now, true);
    }
    // A local effect holds its workflow task and hears of the cancel here, not through Temporal.
    await this.deps.launches.requestCancel(record.workflowId);
    return this.wait(record, true, wait);
  }

  /**
   * Starts the launches that were claimed but never started (Temporal was
   * unreachable when they were called): the gateway runs this every few
   * seconds, so a launch starts once Temporal is back without a retry.
   */
  async startUnstarted(olderThanMs = 3_000): Promise<number> {
    // Standalone launches have no workflow to record a lost or cancelled effect: this round does.
    // Beside the starts, not before them: a slow Temporal delays neither for the other.
    if (this.deps.dispatch === 'standalone' && Date.now() - this.settledAt >= SETTLE_STANDALONE_EVERY_MS) {
      this.settledAt = Infinity; // until this round ends
      void this.settleStandalone()
        .catch((err: unknown) => console.error('dossier: recording ended standalone launches:', err))
        .finally(() => (this.settledAt = Date.now()));
    }
    const waiting = await this.deps.launches.unstarted(new Date(Date.now() - olderThanMs).toISOString(), 50);
    let started = 0;
    for (const record of waiting) {
      const contract = TOOLS_BY_NAME.get(record.tool);
      const age = Date.now() - Date.parse(record.createdAt);
      if (!contract || age > START_LATE_MS) {
        // Too late to act on the caller's intent (or a tool this gateway no longer serves): it never ran.
        await this.deps.launches.finishUnstarted(
          record.workflowId,
          errorOutcome(
            'failed',
            'provider_unavailable',
            contract
              ? `Temporal was unreachable for more than ${START_LATE_MS / 60_000} minutes after this launch was called; it was never started and never will be.`
              : `This gateway no longer serves ${record.tool}; the launch was never started.`,
            'Launch again with a new idempotency_key if the effect is still wanted.',
          ),
        );
        continue;
      }
      try {
        await this.ensureStarted(record, contract, Date.now() + START_ROUND_ATTEMPT_MS);
        started++;
      } catch (err) {
        if (unreachable(err)) return started; // next round
        // Temporal answered and refused this one: record it, so it never holds up the others.
        await this.deps.launches.finishUnstarted(
          record.workflowId,
          errorOutcome(
            'failed',
            'provider_unavailable',
            `Temporal refused to start this launch: ${(err as Error).message}`,
            'Launch again with a new idempotency_key; report it if it happens again.',
          ),
        );
      }
    }
    return started;
  }

  /** Each task queue's approximate backlog, as Temporal reports it (for dossier_task_queue_backlog). */
  async backlog(): Promise<Backlog[]> {
    const { client, namespace } = this.deps;
    const { TaskQueueType } = proto.temporal.api.enums.v1;
    const queues: [string, Backlog['type']][] = [
      [WORKFLOW_TASK_QUEUE, 'workflow'],
      [WORKFLOW_TASK_QUEUE, 'activity'],
      ...CAPABILITIES.flatMap((c): [string, Backlog['type']][] => [
        [capabilityQueue(c), 'workflow'],
        [capabilityQueue(c), 'activity'],
      ]),
    ];
    return Promise.all(
      queues.map(async ([queue, type]) => {
        const res = await client.connection.withDeadline(Date.now() + 2_000, () =>
          client.workflowService.describeTaskQueue({
            namespace,
            taskQueue: { name: queue },
            taskQueueType:
              type === 'workflow'
                ? TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW
                : TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
            reportStats: true,
          }),
        );
        return res.stats ? [{ queue, type, backlog: Number(res.stats.approximateBacklogCount ?? 0) }] : [];
      }),
    ).then((rows) => rows.flat());
  }

  async list(caller: Principal, filter: LaunchFilter): Promise<Page<LaunchReply>> {
    const page = await this.deps.launches.list(caller.team, filter);
    return { ...page, items: page.items.map((r) => this.reply(r, true, false)) };
  }

  private async find(caller: Principal, key: string): Promise<LaunchRecord> {
    const record = await this.deps.launches.get(caller.team, caller.principal, key);
    if (!record) {
      throw new DossierError(
        'not_found',
        `You have no launch with idempotency_key "${key}".`,
        'Check the key: keys are scoped to your principal. list_launches shows your team’s launches; a teammate’s is read, awaited and cancelled by its own principal.',
        { idempotency_key: key },
      );
    }
    return record;
  }

  /** Starts the launch's workflow (or finds its run), giving up on Temporal at `deadline`. */
  private async ensureStarted(
    record: LaunchRecord,
    contract: ToolContract,
    deadline: number,
  ): Promise<string> {
    const { client, devices, eagerStart, dispatch } = this.deps;
    const device = await deviceAttributes(devices, record);
    const runId =
      dispatch === 'standalone'
        ? await startStandalone(client, record, contract, { deadline, device })
        : await startLaunchWorkflow(client, record, contract, { deadline, device, eagerStart, dispatch });
    await this.deps.launches.markRunning(record.workflowId, runId);
    return runId;
  }

  /** Waits for the launch until `deadline` (by default wait_ms from now), then replies as it is. */
  private async wait(
    record: LaunchRecord,
    attached: boolean,
    wait: WaitOptions,
    deadline = Date.now() + wait.waitMs,
    watch = this.deps.launches.watchEnd(record.workflowId),
  ): Promise<LaunchReply> {
    const { launches, client } = this.deps;
    const end = wait.waitMs > 0 ? launchWaitSeconds.startTimer({ tool: record.tool }) : undefined;
    try {
      // A pending launch is started by a gateway's background round: wait for that first.
      const current = record.runId ? record : await this.untilStarted(record, deadline, wait);
      let ended = isFinished(current.status);
      if (current.runId && !ended) {
        const waited = await waitForWorkflow(
          client,
          current.workflowId,
          current.runId,
          { ...wait, waitMs: deadline - Date.now() },
          async () => (await launches.byWorkflowId(current.workflowId))?.progress ?? null,
          watch,
          this.deps.dispatch === 'standalone',
        );
        ended = waited.ended;
        if (waited.error) await this.settleAbnormalEnd(current, waited.error);
      }
      end?.({ ended: String(ended) });
      const fresh = (await launches.byWorkflowId(record.workflowId)) ?? current;
      return this.reply(fresh, attached);
    } finally {
      watch.stop();
    }
  }

  /** The launch once it has a run or an outcome, or as it is at the deadline (or when the call goes). */
  private async untilStarted(record: LaunchRecord, deadline: number, wait: WaitOptions) {
    const t0 = Date.now();
    let current = record;
    while (!current.runId && !isFinished(current.status) && !wait.signal?.aborted) {
      const left = deadline - Date.now();
      if (left <= 0) break;
      await new Promise((r) => setTimeout(r, Math.min(PENDING_POLL_MS, left)));
      current = (await this.deps.launches.byWorkflowId(record.workflowId)) ?? current;
      await wait.onProgress?.(Date.now() - t0, { phase: 'pending' }).catch(() => undefined);
    }
    return current;
  }

  /**
   * A run that ended without recording its outcome is recorded here: a workflow terminated or timed
   * out, or a standalone activity that failed before it could (lost worker, cancel, no worker).
   */
  private async settleAbnormalEnd(record: LaunchRecord, err: unknown) {
    if (!(err instanceof WorkflowFailedError || err instanceof ActivityExecutionFailedError)) return;
    const current = await this.deps.launches.byWorkflowId(record.workflowId);
    if (!current || isFinished(current.status)) return;
    if (err instanceof ActivityExecutionFailedError) {
      await this.deps.launches.finish(record.workflowId, standaloneOutcome(current, err.cause));
      return;
    }
    const cancelled = err.cause?.name === 'CancelledFailure';
    await this.deps.launches.finish(
      record.workflowId,
      errorOutcome(
        cancelled ? 'cancelled' : 'interrupted',
        cancelled ? 'cancelled' : 'interrupted',
        `The launch workflow ended without an outcome: ${err.message}`,
        'Inspect the workflow history in the Temporal UI; use a new idempotency_key to launch again.',
      ),
    );
  }

  /** Records the standalone launches whose activity ended without an outcome while no call waited. */
  async settleStandalone(olderThanMs?: number): Promise<void> {
    const { client, launches } = this.deps;
    for (const [record, err] of await endedWithoutOutcome(client, launches, this.swept, olderThanMs))
      await this.settleAbnormalEnd(record, err);
  }

  /** `follow`: say how to follow a running launch (not in lists, where each row would repeat it). */
  reply(record: LaunchRecord, attached: boolean, follow = true): LaunchReply {
    return launchReply(record, attached, this.deps, follow);
  }
}
