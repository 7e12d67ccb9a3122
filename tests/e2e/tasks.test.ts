// MCP tasks backed by launches, the protocol-level idempotency key (SEP-3182
// draft) and the approval gate of process captures, driven by the SDK's own
// client (and raw JSON-RPC for the params key) against a real stack.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CallToolResultSchema,
  CreateTaskResultSchema,
  ElicitRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, effectCounter, slowEffect, type Reply } from '../helpers/mcp.ts';
import { startTestStack, type TestStack } from '../helpers/stack.ts';

let t: TestStack;
beforeAll(async () => {
  // Every toolset listed (DOSSIER_TOOLSETS): the SDK client runs a tool as a task only when tools/list shows it may.
  t = await startTestStack({ env: { DOSSIER_TOOLSETS: 'all' } });
});
afterAll(async () => {
  await t?.stop(true);
});

/** An SDK client that can be asked to approve, answering with `answer` and counting the questions. */
async function approvingClient(token: string, answer: (message: string) => 'approve' | 'decline' | 'fail') {
  const client = new Client(
    { name: 'approver', version: '1' },
    { capabilities: { elicitation: { form: {} } } },
  );
  const asked: string[] = [];
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    const message = (request.params as { message: string }).message;
    asked.push(message);
    const said = answer(message);
    if (said === 'fail') throw new Error('the form could not be shown');
    return said === 'approve'
      ? { action: 'accept' as const, content: { approve: true } }
      : { action: 'decline' as const };
  });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(t.url), {
      requestInit: { headers: { Authorization: `Bearer ${token}` } },
    }),
  );
  return { client, asked };
}

/** A task-augmented call of capture_process_scenario: answers CreateTaskResult at once. */
function createTask(client: Client, args: Record<string, unknown>, task: { ttl?: number }) {
  return client.request(
    { method: 'tools/call', params: { name: 'capture_process_scenario', arguments: args, task } },
    CreateTaskResultSchema,
  );
}

describe('MCP tasks backed by launches', () => {
  it('advertises tasks and the protocol key; every launch tool may run as a task, no other tool', async () => {
    const client = await t.connect();
    const caps = client.getServerCapabilities()!;
    expect(caps.tasks).toMatchObject({ list: {}, cancel: {}, requests: { tools: { call: {} } } });
    expect(caps.experimental?.['tools.idempotency']).toBeDefined();
    const { tools } = await client.listTools();
    const byName = new Map(tools.map((x) => [x.name, x]));
    expect(byName.get('capture_process_scenario')!.execution).toEqual({ taskSupport: 'optional' });
    expect(byName.get('extract_artifact')!.execution).toEqual({ taskSupport: 'optional' });
    expect(byName.get('whoami')!.execution).toBeUndefined();
    await expect(
      client.request(
        { method: 'tools/call', params: { name: 'whoami', arguments: {}, task: {} } },
        CallToolResultSchema,
      ),
    ).rejects.toThrow(/does not run as a task/);
  });

  it('the SDK client streams a task to its result, which is exactly what the call answers', async () => {
    const client = await t.connect();
    await client.listTools(); // the SDK client learns which tools may run as tasks
    const effect = effectCounter(t.home);
    const args = { ...slowEffect(effect, 1), idempotency_key: 'task-stream' };
    const kinds: string[] = [];
    let taskId = '';
    let result: Reply | undefined;
    for await (const message of client.experimental.tasks.callToolStream({
      name: 'capture_process_scenario',
      arguments: args,
    })) {
      kinds.push(message.type);
      if (message.type === 'taskCreated') taskId = message.task.taskId;
      if (message.type === 'result') result = message.result as Reply;
      if (message.type === 'error') throw message.error;
    }
    expect(kinds[0]).toBe('taskCreated');
    expect(kinds.at(-1)).toBe('result');
    expect(taskId).toMatch(/^tsk_[0-9a-f]{48}$/);
    const direct = await call(client, 'capture_process_scenario', args);
    expect(result!.structuredContent).toMatchObject({
      status: 'succeeded',
      evidence_id: direct.evidence_id,
      summary: direct.summary,
    });
    expect(result!._meta?.['io.modelcontextprotocol/related-task']).toEqual({ taskId });
    expect(effect.count()).toBe(1);
    const task = await client.experimental.tasks.getTask(taskId);
    expect(task).toMatchObject({ taskId, status: 'completed', pollInterval: 1_000 });
  });

  it('create, poll, list and cancel, owned by their principal; ttl is honoured within its bounds', async () => {
    const client = await t.connect();
    const effect = effectCounter(t.home);
    const created = await createTask(
      client,
      { ...slowEffect(effect, 60), idempotency_key: 'task-cancel' },
      { ttl: 120_000 },
    );
    expect(created.task).toMatchObject({ status: 'working', ttl: 120_000 });
    const id = created.task.taskId;
    const again = await createTask(
      client,
      { ...slowEffect(effect, 60), idempotency_key: 'task-cancel' },
      { ttl: 1 },
    );
    expect(again.task.taskId).toBe(id); // the same launch, the same task

    const listed = await client.experimental.tasks.listTasks();
    expect(listed.tasks.map((x) => x.taskId)).toContain(id);

    // Another principal of the same team sees nothing of it.
    const other = await t.connect(await t.tokenFor('nosy', 'local'));
    await expect(other.experimental.tasks.getTask(id)).rejects.toThrow(/no task/);
    await expect(other.experimental.tasks.cancelTask(id)).rejects.toThrow(/no task/);
    expect((await other.experimental.tasks.listTasks()).tasks).toEqual([]);
    // A viewer token of the same principal reads the task but may not end it, as cancel_launch.
    const viewer = await t.connect(await t.tokenFor('local', 'local', 'viewer'));
    expect((await viewer.experimental.tasks.getTask(id)).status).toBe('working');
    await expect(viewer.experimental.tasks.cancelTask(id)).rejects.toThrow(/viewer\) may not cancel/);
    expect((await client.experimental.tasks.getTask(id)).status).toBe('working');

    const cancelled = await client.experimental.tasks.cancelTask(id);
    expect(cancelled.status).toBe('cancelled');
    await expect(client.experimental.tasks.cancelTask(id)).rejects.toThrow(/terminal/);
    const result = await client.experimental.tasks.getTaskResult(id, CallToolResultSchema);
    expect(result.structuredContent).toMatchObject({ status: 'cancelled' });
    expect(effect.count()).toBe(1);

    const short = await createTask(
      client,
      { executable: '/usr/bin/true', idempotency_key: 'task-ttl' },
      { ttl: 1 },
    );
    expect(short.task.ttl).toBe(60_000); // the smallest ttl dossier keeps
  });

  it('a gateway restart between create and result loses nothing: the task resolves through the store', async () => {
    const client = await t.connect();
    const effect = effectCounter(t.home);
    const created = await createTask(
      client,
      { ...slowEffect(effect, 3), idempotency_key: 'task-restart' },
      {},
    );
    await t.restart();
    const fresh = await t.connect();
    const result = await fresh.experimental.tasks.getTaskResult(created.task.taskId, CallToolResultSchema);
    expect(result.structuredContent).toMatchObject({ status: 'succeeded' });
    expect((await fresh.experimental.tasks.getTask(created.task.taskId)).status).toBe('completed');
    expect(effect.count()).toBe(1);
  });
});

/** A raw JSON-RPC session over Streamable HTTP: initialize, then requests; answers parsed from JSON or SSE. */
async function rawSession(url: string, token: string) {
  let session: string | undefined;
  let id = 0;
  const post = async (body: unknown) => {
    const res = await fetch(url, {
      method: 'POST',
      headers: {
        Authorization: `Bearer ${token}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        ...(session ? { 'mcp-session-id': session, 'mcp-protocol-version': '2025-11-25' } : {}),
      },
      body: JSON.stringify(body),
    });
    session ??= res.headers.get('mcp-session-id') ?? undefined;
    const text = await res.text();
    if (!text) return undefined;
    const json = res.headers.get('content-type')?.includes('text/event-stream')
      ? text
          .split('\n')
          .filter((l) => l.startsWith('data:'))
          .map((l) => JSON.parse(l.slice(5)))
          .find((m) => m.id !== undefined)
      : JSON.parse(text);
    return json as Reply;
  };
  const init = await post({
    jsonrpc: '2.0',
    id: ++id,
    method: 'initialize',
    params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
  });
  await post({ jsonrpc: '2.0', method: 'notifications/initialized' });
  return {
    init: init!,
    request: (method: string, params: unknown) => post({ jsonrpc: '2.0', id: ++id, method, params }),
  };
}

describe('requests of the wrong shape', () => {
  it('are invalid params naming the field, not an internal error dumping the schema', async () => {
    const raw = await rawSession(t.url, t.token);
    for (const [method, params, field] of [
      [
        'prompts/get',
        { name: 'investigate_feature', arguments: { feature: { a: 1 } } },
        'params.arguments.feature',
      ],
      ['tools/call', { name: 5 }, 'params.name'],
      ['logging/setLevel', { level: 'nonsense' }, 'params.level'],
      ['resources/read', { uri: 7 }, 'params.uri'],
    ] as const) {
      const reply = await raw.request(method, params);
      expect(reply!.error, method).toMatchObject({ code: -32602, data: { issues: [{ path: field }] } });
      expect(reply!.error.message, method).toMatch(new RegExp(`^Invalid ${method} request: ${field}: `));
    }
    // A well-formed request on the same session is answered as ever.
    expect((await raw.request('tools/call', { name: 'whoami', arguments: {} }))!.result).toBeDefined();
  });
});

describe('the protocol-level key (SEP-3182 draft)', () => {
  it('params.idempotencyKey works as the idempotency_key argument; both and different is invalid_params; a reused key is the caller’s error', async () => {
    const raw = await rawSession(t.url, t.token);
    expect(raw.init.result.capabilities.tools.idempotency).toEqual({});
    const effect = effectCounter(t.home);
    const first = await raw.request('tools/call', {
      name: 'capture_process_scenario',
      arguments: effect.launch(),
      idempotencyKey: 'protocol-key-1',
    });
    const reply = first!.result.structuredContent;
    expect(reply).toMatchObject({
      status: 'succeeded',
      launch: { idempotency_key: 'protocol-key-1', attached: false },
    });
    const same = await raw.request('tools/call', {
      name: 'capture_process_scenario',
      arguments: { ...effect.launch(), idempotency_key: 'protocol-key-1' },
      idempotencyKey: 'protocol-key-1',
    });
    expect(same!.result.structuredContent).toMatchObject({
      evidence_id: reply.evidence_id,
      launch: { attached: true },
    });
    const differ = await raw.request('tools/call', {
      name: 'capture_process_scenario',
      arguments: { ...effect.launch(), idempotency_key: 'protocol-key-2' },
      idempotencyKey: 'protocol-key-1',
    });
    expect(differ!.result.isError).toBe(true);
    expect(differ!.result.structuredContent.error.code).toBe('invalid_params');
    // The same key with another body, as a task: refused as the caller's error (-32602), not an internal one.
    const reused = await raw.request('tools/call', {
      name: 'capture_process_scenario',
      arguments: { ...effect.launch(), args: ['another body'] },
      idempotencyKey: 'protocol-key-1',
      task: {},
    });
    expect(reused!.error).toMatchObject({ code: -32602, data: { code: 'idempotency_key_reused' } });
    // The message is the message: clients add their own "MCP error -32602:" prefix.
    expect(reused!.error.message).not.toMatch(/^MCP error/);
    expect(effect.count()).toBe(1);
    // A key on a tool without effects is accepted and changes nothing.
    const read = await raw.request('tools/call', { name: 'whoami', arguments: {}, idempotencyKey: 'x' });
    expect(read!.result.structuredContent.principal).toBe('local');
  });
});

describe('the approval gate of process captures', () => {
  it('asks a client that can be asked, with the exact plan; a refusal runs nothing and leaves the key unclaimed', async () => {
    const effect = effectCounter(t.home);
    const decliner = await approvingClient(t.token, () => 'decline');
    const refused = await call(decliner.client, 'capture_process_scenario', {
      ...effect.launch(),
      idempotency_key: 'gate-1',
    });
    expect(refused.error).toMatchObject({ code: 'policy_denied', details: { reason: 'approval_declined' } });
    expect(decliner.asked).toHaveLength(1);
    expect(decliner.asked[0]).toContain(`"/usr/bin/tee" "${effect.marker}"`);
    expect(decliner.asked[0]).toMatch(/isolation: sandbox, no network/);
    expect((await call(decliner.client, 'get_launch', { idempotency_key: 'gate-1' })).error.code).toBe(
      'not_found',
    );
    expect(effect.count()).toBe(0);

    const broken = await approvingClient(t.token, () => 'fail');
    const unanswered = await call(broken.client, 'capture_process_scenario', {
      ...effect.launch(),
      idempotency_key: 'gate-1',
    });
    expect(unanswered.error).toMatchObject({
      code: 'policy_denied',
      details: { reason: 'approval_unanswered' },
    });
    expect(effect.count()).toBe(0);

    const approver = await approvingClient(t.token, () => 'approve');
    const ran = await call(approver.client, 'capture_process_scenario', {
      ...effect.launch(),
      idempotency_key: 'gate-1',
    });
    expect(ran.status).toBe('succeeded');
    const retry = await call(approver.client, 'capture_process_scenario', {
      ...effect.launch(),
      idempotency_key: 'gate-1',
    });
    expect(retry.launch.attached).toBe(true);
    expect(approver.asked).toHaveLength(1); // a retry is never asked again
    expect(effect.count()).toBe(1);

    const prompt = await approver.client.getPrompt({
      name: 'prepare_bounded_process_capture',
      arguments: { artifact: 'sha256:' + '0'.repeat(64) },
    });
    expect(JSON.stringify(prompt.messages)).toMatch(/only after a human approves it/);
  });

  it('a client that cannot be asked: operators proceed under the default policy, and the prompt says so', async () => {
    const client = await t.connect();
    const ran = await call(client, 'capture_process_scenario', {
      executable: '/usr/bin/true',
      idempotency_key: 'gate-no-elicitation',
    });
    expect(ran.status).toBe('succeeded');
    const prompt = await client.getPrompt({
      name: 'prepare_bounded_process_capture',
      arguments: { artifact: 'sha256:' + '0'.repeat(64) },
    });
    expect(JSON.stringify(prompt.messages)).toMatch(/cannot show an approval form/);
  });

  it('with DOSSIER_APPROVAL_WITHOUT_ELICITATION=require, a client that cannot be asked is refused; nothing runs', async () => {
    const strict = await startTestStack({ env: { DOSSIER_APPROVAL_WITHOUT_ELICITATION: 'require' } });
    try {
      const client = await strict.connect();
      const refused = await call(client, 'capture_process_scenario', {
        executable: '/usr/bin/true',
        idempotency_key: 'strict-1',
      });
      expect(refused.error).toMatchObject({
        code: 'policy_denied',
        details: { reason: 'approval_unavailable' },
      });
      expect((await call(client, 'list_launches', {})).launches).toEqual([]);
      // Other launches are not process captures: they are not gated.
      const approver = new Client(
        { name: 'x', version: '1' },
        { capabilities: { elicitation: { form: {} } } },
      );
      approver.setRequestHandler(ElicitRequestSchema, async () => ({
        action: 'accept' as const,
        content: { approve: true },
      }));
      await approver.connect(
        new StreamableHTTPClientTransport(new URL(strict.url), {
          requestInit: { headers: { Authorization: `Bearer ${strict.token}` } },
        }),
      );
      expect(
        (
          await call(approver, 'capture_process_scenario', {
            executable: '/usr/bin/true',
            idempotency_key: 'strict-2',
          })
        ).status,
      ).toBe('succeeded');
      await approver.close();
    } finally {
      await strict.stop(true);
    }
  });
});
