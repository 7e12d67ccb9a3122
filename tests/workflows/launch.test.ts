// The launch workflow alone, in Temporal's test environment on the run's real
// dev server, with its activities replaced by scripted ones: how it decides
// from the journal what a lost, failed or cancelled effect becomes.
import { randomUUID } from 'node:crypto';
import { Context } from '@temporalio/activity';
import { ApplicationFailure, CancelledFailure, type TypedSearchAttributes } from '@temporalio/common';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { LaunchOutcome } from '../../src/domain/types.ts';
import type { JournalView, LaunchRequest } from '../../src/launches/protocol.ts';
import { capabilityQueue, WORKFLOW_TASK_QUEUE } from '../../src/temporal/queues.ts';
import { ensureNamespace } from '../../src/temporal/setup.ts';
import { SEARCH_ATTRIBUTES } from '../../src/temporal/searchAttributes.ts';
import { LAUNCH_FAILED } from '../../src/workflows/launch.ts';
import { workflowBundle } from '../../src/worker.ts';

const namespace = `wf-${randomUUID().slice(0, 8)}`;
let lastStatus: string | undefined;
let lastAttributes: TypedSearchAttributes | undefined;
let env: TestWorkflowEnvironment;

/** What the scripted activities do and saw, per workflow. */
interface Script {
  runs: ((n: number) => Promise<LaunchOutcome>)[];
  journal: () => JournalView;
  runCount: number;
  finished: LaunchOutcome[];
}
const scripts = new Map<string, Script>();

const succeeded: LaunchOutcome = { status: 'succeeded', evidenceId: 'ev_x', summary: { ok: 1 }, error: null };

beforeAll(async () => {
  env = await TestWorkflowEnvironment.createFromExistingServer({
    address: inject('temporalAddress'),
    namespace,
  });
  await ensureNamespace(env.connection, namespace, 1);
});
afterAll(async () => {
  await env?.teardown();
});

async function launch(script: Omit<Script, 'runCount' | 'finished'>, act?: (id: string) => Promise<void>) {
  const workflowId = `launch/t/alice/${randomUUID()}`;
  const s: Script = { ...script, runCount: 0, finished: [] };
  scripts.set(workflowId, s);
  const bookkeeping = {
    readJournal: async (id: string) => scripts.get(id)!.journal(),
    finishLaunch: async (id: string, outcome: LaunchOutcome) => {
      scripts.get(id)!.finished.push(outcome);
      return outcome;
    },
  };
  const effects = {
    runEffect: async (req: LaunchRequest) => {
      const own = scripts.get(req.workflowId)!;
      const n = own.runCount++;
      return own.runs[Math.min(n, own.runs.length - 1)]!(n);
    },
  };
  const bundle = await workflowBundle(inject('bundleCacheDir'));
  const workers = await Promise.all([
    Worker.create({
      connection: env.nativeConnection,
      namespace,
      taskQueue: WORKFLOW_TASK_QUEUE,
      workflowBundle: bundle,
      activities: bookkeeping,
    }),
    Worker.create({
      connection: env.nativeConnection,
      namespace,
      taskQueue: capabilityQueue('capture'),
      activities: effects,
      maxHeartbeatThrottleInterval: '1 second',
    }),
  ]);
  const request: LaunchRequest = {
    workflowId,
    tool: 'capture_process_scenario',
    capability: 'capture',
    input: {},
    principal: 'alice',
    team: 't',
    key: 'k',
    bodyDigest: 'd',
    investigation: null,
    maxRunMs: 60_000,
  };
  const running = Promise.all(workers.map((w) => w.run()));
  try {
    const handle = await env.client.workflow.start('launchWorkflow', {
      taskQueue: WORKFLOW_TASK_QUEUE,
      workflowId,
      args: [request],
    });
    await act?.(workflowId);
    // A launch that did not succeed ends its workflow Failed, its outcome in the failure's details.
    const result = await handle.result().then(
      (outcome) => ({ outcome: outcome as LaunchOutcome, failure: undefined }),
      (failure: Error) => {
        const cause = failure.cause as ApplicationFailure | undefined;
        const outcome = cause?.type === LAUNCH_FAILED ? (cause.details?.[0] as LaunchOutcome) : undefined;
        return { outcome, failure };
      },
    );
    const described = await handle.describe();
    lastStatus = described.status.name;
    lastAttributes = described.typedSearchAttributes;
    return { ...result, script: s };
  } finally {
    for (const w of workers) w.shutdown();
    await running;
  }
}

/** An activity whose worker "dies": it stops heartbeating, so the server times it out. */
const lostWorker = () =>
  new Promise<LaunchOutcome>((resolve) => setTimeout(() => resolve(succeeded), 13_000));

describe('launchWorkflow', () => {
  it('returns the outcome the effect recorded, with no further bookkeeping', async () => {
    const { outcome, script } = await launch({
      runs: [async () => succeeded],
      journal: () => ({ effect: 'started', finished: succeeded }),
    });
    expect(outcome).toEqual(succeeded);
    expect(script.runCount).toBe(1);
    expect(script.finished).toEqual([]);
    expect(lastStatus).toBe('COMPLETED');
    expect(lastAttributes?.get(SEARCH_ATTRIBUTES.outcome)).toBe('succeeded');
    expect(lastAttributes?.get(SEARCH_ATTRIBUTES.evidence)).toBe('ev_x');
  });

  it('a failed effect records the tool error it reported', async () => {
    const error = { code: 'not_found', message: 'no such artifact' };
    const { outcome, script } = await launch({
      runs: [
        async () => {
          throw ApplicationFailure.nonRetryable('no such artifact', 'ToolError', error);
        },
      ],
      journal: () => ({ effect: 'not_started', finished: null }),
    });
    expect(outcome).toMatchObject({ status: 'failed', error });
    expect(script.finished).toEqual([outcome]);
    // The audit tells the truth: the workflow failed, and says how.
    expect(lastStatus).toBe('FAILED');
    expect(lastAttributes?.get(SEARCH_ATTRIBUTES.outcome)).toBe('failed');
  });

  it('a worker lost before the effect began is dispatched again, and the second dispatch’s outcome wins', async () => {
    const { outcome, script } = await launch({
      runs: [lostWorker, async () => succeeded],
      journal: () => ({ effect: 'not_started', finished: null }),
    });
    expect(script.runCount).toBe(2);
    expect(outcome).toEqual(succeeded);
  }, 60_000);

  it('a worker lost after the effect began ends the launch interrupted and never runs it again', async () => {
    const { outcome, script } = await launch({
      runs: [lostWorker],
      journal: () => ({ effect: 'started', finished: null }),
    });
    expect(script.runCount).toBe(1);
    expect(outcome).toMatchObject({ status: 'interrupted', error: { code: 'interrupted' } });
    expect(script.finished).toEqual([outcome]);
    expect(lastStatus).toBe('FAILED');
    expect(lastAttributes?.get(SEARCH_ATTRIBUTES.outcome)).toBe('interrupted');
  }, 60_000);

  it('a cancel reaches the effect, is recorded as cancelled, and the workflow ends cancelled', async () => {
    const { failure, script } = await launch(
      {
        runs: [
          async () => {
            const ctx = Context.current();
            for (;;) {
              ctx.heartbeat();
              await Promise.race([ctx.cancelled, new Promise((r) => setTimeout(r, 200))]).catch(() => {
                throw new CancelledFailure('cancelled');
              });
            }
          },
        ],
        journal: () => ({ effect: 'started', finished: null }),
      },
      async (id) => {
        await new Promise((r) => setTimeout(r, 1_000));
        await env.client.workflow.getHandle(id).cancel();
      },
    );
    expect((failure?.cause as Error | undefined)?.name).toBe('CancelledFailure');
    expect(script.finished.map((o) => o.status)).toEqual(['cancelled']);
    expect(lastStatus).toBe('CANCELLED');
    expect(lastAttributes?.get(SEARCH_ATTRIBUTES.outcome)).toBe('cancelled');
  });
});
