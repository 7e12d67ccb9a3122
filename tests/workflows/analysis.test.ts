// The analysis workflows alone, in Temporal's test environment on the run's real
// dev server, with their activities replaced by scripted ones: how an analysis
// waits on its artifact's database, retries a lost worker once, keeps a tool's
// error and records why it failed, and how a build ends in the audit.
import { randomUUID } from 'node:crypto';
import { ApplicationFailure, type TypedSearchAttributes } from '@temporalio/common';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type {
  AnalysisOutcome,
  AnalysisRequest,
  DatabaseRef,
  DatabaseRequest,
} from '../../src/launches/protocol.ts';
import { UNVOUCHED } from '../../src/launches/protocol.ts';
import { capabilityQueue, WORKFLOW_TASK_QUEUE } from '../../src/temporal/queues.ts';
import { ensureNamespace } from '../../src/temporal/setup.ts';
import { SEARCH_ATTRIBUTES } from '../../src/temporal/searchAttributes.ts';
import { workflowBundle } from '../../src/worker.ts';

const namespace = `wfa-${randomUUID().slice(0, 8)}`;
let env: TestWorkflowEnvironment;

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

const database: DatabaseRef = {
  file: 'db.sqlite',
  digest: 'sha256:db',
  provider: { name: 'angr', version: '9.2.213' },
  profile: 'default',
  truncated: false,
  limitations: [],
  parameters: {},
};
const answered: AnalysisOutcome = {
  status: 'succeeded',
  evidenceId: 'ev_a',
  summary: { functions: 3 },
  error: null,
};

/** What the scripted activities do and saw. */
interface Script {
  awaitDatabase?: () => Promise<DatabaseRef>;
  runs: ((n: number) => Promise<AnalysisOutcome>)[];
  runCount: number;
  databasesAsked: number;
  finished: AnalysisOutcome[];
}

function dbRequest(): DatabaseRequest {
  return {
    workflowId: `analysis-db/t/${randomUUID()}`,
    team: 't',
    key: 'dbkey',
    artifact: 'sha256:artifact',
    profile: 'default',
    requestedBy: 'alice',
    maxRunMs: 60_000,
  };
}

/** Runs `workflow` with one worker per queue and the scripted activities; its result or failure, and its search attributes. */
async function run(
  workflow: 'analysisWorkflow' | 'analysisDatabaseWorkflow',
  script: Script,
  builds?: () => Promise<DatabaseRef>,
) {
  const bundle = await workflowBundle(inject('bundleCacheDir'));
  const bookkeeping = {
    awaitAnalysisDatabase: async () => {
      script.databasesAsked++;
      return (script.awaitDatabase ?? (async () => database))();
    },
    finishAnalysis: async (_id: string, outcome: AnalysisOutcome) => {
      script.finished.push(outcome);
      return outcome;
    },
  };
  const work = {
    buildAnalysisDatabase: async () => (builds ?? (async () => database))(),
    runAnalysis: async () =>
      script.runs[Math.min(script.runCount, script.runs.length - 1)]!(script.runCount++),
  };
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
      taskQueue: capabilityQueue('analysis'),
      activities: work,
    }),
  ]);
  const running = Promise.all(workers.map((w) => w.run()));
  try {
    const db = dbRequest();
    const req: AnalysisRequest = {
      workflowId: `analysis/t/${randomUUID()}`,
      team: 't',
      key: 'akey',
      tool: 'list_functions',
      input: {},
      requestedBy: 'alice',
      database: db,
      maxRunMs: 60_000,
    };
    const handle = await env.client.workflow.start(workflow, {
      taskQueue: WORKFLOW_TASK_QUEUE,
      workflowId: workflow === 'analysisWorkflow' ? req.workflowId : db.workflowId,
      args: [workflow === 'analysisWorkflow' ? req : db],
      // The real start sets this; the workflow upserts only its outcome.
      typedSearchAttributes: [],
    });
    const result = await handle.result().then(
      (value) => ({ value: value as unknown, failure: undefined }),
      (failure: Error) => ({ value: undefined, failure: failure.cause as ApplicationFailure | undefined }),
    );
    const described = await handle.describe();
    return {
      ...result,
      status: described.status.name,
      attributes: described.typedSearchAttributes as TypedSearchAttributes,
    };
  } finally {
    for (const w of workers) w.shutdown();
    await running;
  }
}

const script = (runs: Script['runs'], awaitDatabase?: Script['awaitDatabase']): Script => ({
  runs,
  awaitDatabase,
  runCount: 0,
  databasesAsked: 0,
  finished: [],
});

describe('analysisWorkflow', () => {
  it('waits on the artifact’s database, then answers from it; the audit says it succeeded', async () => {
    const s = script([async () => answered]);
    const { value, status, attributes } = await run('analysisWorkflow', s);
    expect(value).toEqual(answered);
    expect(s.databasesAsked).toBe(1);
    expect(s.runCount).toBe(1);
    expect(s.finished).toEqual([]); // the activity recorded its own answer
    expect(status).toBe('COMPLETED');
    expect(attributes.get(SEARCH_ATTRIBUTES.outcome)).toBe('succeeded');
  });

  it('a read-only analysis whose worker failed runs once more, and answers', async () => {
    const s = script([
      async () => {
        throw new Error('the worker went away');
      },
      async () => answered,
    ]);
    const { value } = await run('analysisWorkflow', s);
    expect(value).toEqual(answered);
    expect(s.runCount).toBe(2);
  });

  it('a tool error is not retried: it is recorded as the outcome, and the workflow ends Failed with it', async () => {
    const error = {
      code: 'unsupported_target',
      message: 'not an executable',
      details: { evidence_id: 'ev_why' },
    };
    const s = script([
      async () => {
        throw ApplicationFailure.nonRetryable('not an executable', 'ToolError', error);
      },
    ]);
    const { failure, status, attributes } = await run('analysisWorkflow', s);
    expect(s.runCount).toBe(1);
    expect(s.finished).toEqual([{ status: 'failed', evidenceId: 'ev_why', summary: null, error }]);
    expect(failure?.type).toBe('ToolError');
    expect(status).toBe('FAILED');
    expect(attributes.get(SEARCH_ATTRIBUTES.outcome)).toBe('failed');
  });

  it('a database that could not be built fails the analysis with the build’s error, without running it', async () => {
    const error = { code: 'provider_timeout', message: 'the build ran out of time' };
    const s = script([async () => answered], async () => {
      throw ApplicationFailure.nonRetryable('the build ran out of time', 'ToolError', error);
    });
    const { failure } = await run('analysisWorkflow', s);
    expect(s.runCount).toBe(0);
    expect(s.finished[0]).toMatchObject({ status: 'failed', error });
    expect(failure?.type).toBe('ToolError');
  });

  it('a worker lost twice says the analysis could not finish, as provider_unavailable', async () => {
    const s = script([
      async () => {
        throw new Error('lost');
      },
    ]);
    const { failure } = await run('analysisWorkflow', s);
    expect(s.runCount).toBe(2);
    expect(s.finished[0]).toMatchObject({ status: 'failed', error: { code: 'provider_unavailable' } });
    expect(failure?.type).toBe('ToolError');
  });

  it('a request nothing vouches for writes nothing over the claim', async () => {
    const s = script([
      async () => {
        throw ApplicationFailure.nonRetryable('not the analysis claimed under this ID', UNVOUCHED);
      },
    ]);
    const { failure } = await run('analysisWorkflow', s);
    expect(failure?.type).toBe(UNVOUCHED);
    expect(s.finished).toEqual([]);
  });
});

describe('analysisDatabaseWorkflow', () => {
  it('returns the database its activity built; a failed build ends Failed, with its outcome in the audit', async () => {
    const built = await run('analysisDatabaseWorkflow', script([]));
    expect(built.value).toEqual(database);
    expect(built.attributes.get(SEARCH_ATTRIBUTES.outcome)).toBe('succeeded');
    const broken = await run('analysisDatabaseWorkflow', script([]), async () => {
      throw ApplicationFailure.nonRetryable('angr could not load it', 'ToolError', {
        code: 'unsupported_target',
      });
    });
    expect(broken.status).toBe('FAILED');
    expect(broken.attributes.get(SEARCH_ATTRIBUTES.outcome)).toBe('failed');
  });
});
