// The stateless MCP revision (2026-07-28) on the same endpoint as the handshake
// era, on the wire as its clients speak it: server/discover, the per-request
// envelope and headers, the approval gate as input_required with a sealed
// requestState, and launches that outlive their wait as tasks of the
// io.modelcontextprotocol/tasks extension. A handshake-era client keeps working
// beside it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, effectCounter, slowEffect } from '../helpers/mcp.ts';
import { envelope, MODERN, modernRequest, TASKS } from '../helpers/modern.ts';
import { startTestStack, type TestStack } from '../helpers/stack.ts';

let t: TestStack;
beforeAll(async () => {
  t = await startTestStack();
});
afterAll(async () => {
  await t?.stop(true);
});

const ask = (method: string, params: Record<string, unknown> = {}, opts = {}) =>
  modernRequest(t.url, t.token, method, params, opts);

const APPROVER = { elicitation: { form: {} } };

describe('the stateless era beside the handshake era', () => {
  it('server/discover names both revisions, the capabilities and the tasks extension', async () => {
    const r = await ask('server/discover');
    expect(r.status).toBe(200);
    expect(r.body.result).toMatchObject({
      resultType: 'complete',
      supportedVersions: expect.arrayContaining([MODERN]),
      capabilities: { tools: {}, prompts: {}, resources: {}, extensions: { [TASKS]: {} } },
      _meta: { 'io.modelcontextprotocol/serverInfo': { name: 'dossier' } },
    });
  });

  it('lists carry resultType and private cache hints; tools/list is the same list in the same order every time', async () => {
    const first = await ask('tools/list');
    const second = await ask('tools/list');
    expect(first.body.result).toMatchObject({ resultType: 'complete', cacheScope: 'private' });
    expect(first.body.result!.ttlMs).toEqual(expect.any(Number));
    expect(first.body.result!.tools.map((x: { name: string }) => x.name)).toEqual(
      second.body.result!.tools.map((x: { name: string }) => x.name),
    );
    for (const method of ['prompts/list', 'resources/list', 'resources/templates/list']) {
      const r = await ask(method);
      expect(r.body.result, method).toMatchObject({ resultType: 'complete', cacheScope: 'private' });
    }
  });

  it('a request without its envelope, of an unknown revision, or whose headers disagree with its body is refused', async () => {
    const bare = await ask('tools/list', {}, { meta: { 'io.modelcontextprotocol/protocolVersion': MODERN } });
    expect(bare.status).toBe(400);
    expect(bare.body.error!.code).toBe(-32602);

    const future = await ask(
      'tools/list',
      {},
      {
        meta: envelope({}, '2099-01-01'),
        headers: { 'mcp-protocol-version': '2099-01-01' },
      },
    );
    expect(future.status).toBe(400);
    expect(JSON.stringify(future.body.error)).toContain(MODERN);

    const mismatch = await ask('tools/list', {}, { headers: { 'mcp-method': 'prompts/list' } });
    expect(mismatch.status).toBe(400);
    expect(mismatch.body.error!.code).toBe(-32020);

    const named = await ask(
      'tools/call',
      { name: 'whoami', arguments: {} },
      { headers: { 'mcp-name': 'list_launches' } },
    );
    expect(named.body.error!.code).toBe(-32020);
  });

  it('an unknown resource is invalid params naming the URI; a tool call answers like the handshake era', async () => {
    const missing = await ask('resources/read', { uri: 'dossier://evidence/nothing' });
    expect(missing.body.error).toMatchObject({ code: -32602, data: { uri: 'dossier://evidence/nothing' } });
    // A request the SDK's schema refuses is the caller's error, named: not -32603 with a schema dump.
    const notText = await ask('resources/read', { uri: 7 });
    expect(notText.body.error).toMatchObject({ code: -32602, data: { issues: [{ path: 'params.uri' }] } });
    expect(notText.body.error!.message).toMatch(/^Invalid resources\/read request: params\.uri: /);
    const who = await ask('tools/call', { name: 'whoami', arguments: {} });
    expect(who.body.result).toMatchObject({
      resultType: 'complete',
      structuredContent: { principal: 'local' },
    });

    // The handshake era on the same endpoint, unchanged.
    const legacy = await t.connect();
    expect((await call(legacy, 'whoami')).principal).toBe('local');
  });

  it("a launch's key may come as the request's idempotencyKey (SEP-3182), as in the handshake era", async () => {
    const discover = await ask('server/discover');
    expect(discover.body.result!.capabilities.tools).toMatchObject({ idempotency: {} });
    const launch = (args: Record<string, unknown>, key = 'modern-protocol-key') =>
      ask('tools/call', { name: 'capture_process_scenario', idempotencyKey: key, arguments: args });
    const first = await launch({ executable: '/usr/bin/true' });
    expect(first.body.result!.structuredContent, JSON.stringify(first.body)).toMatchObject({
      status: 'succeeded',
      launch: { idempotency_key: 'modern-protocol-key', attached: false },
    });
    const retry = await launch({ executable: '/usr/bin/true' });
    expect(retry.body.result!.structuredContent).toMatchObject({
      status: 'succeeded',
      evidence_id: first.body.result!.structuredContent.evidence_id,
      launch: { attached: true },
    });
    const other = await launch({ executable: '/usr/bin/id' });
    expect(other.body.result!.structuredContent.error.code).toBe('idempotency_key_reused');
    // A key that is not a string is named as such; null is no key at all.
    const numbered = await ask('tools/call', {
      name: 'capture_process_scenario',
      idempotencyKey: 12345,
      arguments: { executable: '/usr/bin/true' },
    });
    expect(numbered.body.result!.structuredContent.error).toMatchObject({
      code: 'invalid_params',
      message: expect.stringMatching(/idempotencyKey is a number, not a string/),
    });
    const unset = await ask('tools/call', {
      name: 'capture_process_scenario',
      idempotencyKey: null,
      arguments: { executable: '/usr/bin/true', idempotency_key: 'modern-protocol-key' },
    });
    expect(unset.body.result!.structuredContent.launch).toMatchObject({ attached: true });
    const both = await launch({ executable: '/usr/bin/true', idempotency_key: 'another' });
    expect(both.body.result!.structuredContent.error).toMatchObject({
      code: 'invalid_params',
      message: expect.stringMatching(/idempotencyKey .* and the idempotency_key argument .* differ/),
    });
  });

  it('the modern request, its retry and the legacy request are answered without any session', async () => {
    const r = await ask('tools/call', { name: 'whoami', arguments: {} });
    expect(r.headers.get('mcp-session-id')).toBeNull();
  });
});

describe('the approval gate as input_required', () => {
  const capture = (key: string, extra: Record<string, unknown> = {}) => ({
    name: 'capture_process_scenario',
    arguments: { executable: '/usr/bin/uname', args: ['-s'], idempotency_key: key, ...extra },
  });

  it('asks with a form and a sealed requestState; nothing is claimed until the retry carries the approval', async () => {
    const first = await ask('tools/call', capture('mrtr-1'), { capabilities: APPROVER });
    expect(first.body.result).toMatchObject({
      resultType: 'input_required',
      inputRequests: { approval: { method: 'elicitation/create' } },
    });
    const state = first.body.result!.requestState as string;
    expect(state).toEqual(expect.any(String));
    expect(JSON.stringify(first.body.result!.inputRequests)).toContain('/usr/bin/uname');
    // The key is not claimed: get_launch does not know it.
    const before = await ask('tools/call', { name: 'get_launch', arguments: { idempotency_key: 'mrtr-1' } });
    expect(before.body.result!.structuredContent.error.code).toBe('not_found');

    const approved = await ask(
      'tools/call',
      {
        ...capture('mrtr-1'),
        inputResponses: { approval: { action: 'accept', content: { approve: true } } },
        requestState: state,
      },
      { capabilities: APPROVER },
    );
    expect(approved.body.result).toMatchObject({
      resultType: 'complete',
      structuredContent: { status: 'succeeded', launch: { attached: false } },
    });
    // A retry attaches, and is never asked again.
    const retry = await ask('tools/call', capture('mrtr-1'), { capabilities: APPROVER });
    expect(retry.body.result!.structuredContent).toMatchObject({
      status: 'succeeded',
      launch: { attached: true },
    });
  });

  it('a declined form runs nothing and leaves the key free', async () => {
    const first = await ask('tools/call', capture('mrtr-decline'), { capabilities: APPROVER });
    const declined = await ask(
      'tools/call',
      {
        ...capture('mrtr-decline'),
        inputResponses: { approval: { action: 'decline' } },
        requestState: first.body.result!.requestState,
      },
      { capabilities: APPROVER },
    );
    expect(declined.body.result!.structuredContent.error).toMatchObject({ code: 'policy_denied' });
    const again = await ask('tools/call', capture('mrtr-decline'), { capabilities: APPROVER });
    expect(again.body.result!.resultType).toBe('input_required');
  });

  it('a tampered, foreign or other-body requestState never runs the launch', async () => {
    const effect = effectCounter(t.home);
    const args = (key: string) => ({
      name: 'capture_process_scenario',
      arguments: { ...effect.launch(), idempotency_key: key },
    });
    const approve = { approval: { action: 'accept', content: { approve: true } } };
    const first = await ask('tools/call', args('mrtr-seal'), { capabilities: APPROVER });
    const state = first.body.result!.requestState as string;

    const tampered = await ask(
      'tools/call',
      { ...args('mrtr-seal'), inputResponses: approve, requestState: `${state.slice(0, -4)}AAAA` },
      { capabilities: APPROVER },
    );
    expect(tampered.body.error!.code).toBe(-32602);

    const mallory = await t.tokenFor('mallory', 'local');
    const replayed = await modernRequest(
      t.url,
      mallory,
      'tools/call',
      { ...args('mrtr-seal'), inputResponses: approve, requestState: state },
      { capabilities: APPROVER },
    );
    expect(replayed.body.error!.code).toBe(-32602);

    // Sealed for another body (another key): this call is asked about, not run.
    const otherBody = await ask(
      'tools/call',
      { ...args('mrtr-seal-2'), inputResponses: approve, requestState: state },
      { capabilities: APPROVER },
    );
    expect(otherBody.body.result!.resultType).toBe('input_required');
    expect(effect.count()).toBe(0);
  });
});

describe('tasks, the extension', () => {
  const TASK_CLIENT = { extensions: { [TASKS]: {} } };

  it('a launch that outlives its wait becomes a task; tasks/get carries its result inline', async () => {
    const effect = effectCounter(t.home);
    const created = await ask(
      'tools/call',
      {
        name: 'capture_process_scenario',
        arguments: { ...slowEffect(effect, 2), idempotency_key: 'modern-task', wait_ms: 100 },
      },
      { capabilities: TASK_CLIENT },
    );
    expect(created.body.result).toMatchObject({ resultType: 'task', status: 'working' });
    expect(created.body.result).not.toHaveProperty('requestState');
    expect(created.body.result).not.toHaveProperty('ttl');
    const taskId = created.body.result!.taskId as string;
    expect(created.body.result).toMatchObject({ ttlMs: expect.any(Number), pollIntervalMs: 1_000 });

    let got = await ask('tasks/get', { taskId }, { capabilities: TASK_CLIENT });
    for (let i = 0; i < 60 && got.body.result?.status === 'working'; i++) {
      await new Promise((r) => setTimeout(r, 500));
      got = await ask('tasks/get', { taskId }, { capabilities: TASK_CLIENT });
    }
    expect(got.body.result).toMatchObject({
      resultType: 'complete',
      taskId,
      status: 'completed',
      result: { structuredContent: { status: 'succeeded' } },
    });
    expect(got.body.result!.result._meta?.['io.modelcontextprotocol/related-task']).toBeUndefined();
    expect(effect.count()).toBe(1);
  });

  it('tasks/* need the extension, the right Mcp-Name and the owner; there is no tasks/list or tasks/result', async () => {
    const effect = effectCounter(t.home);
    const created = await ask(
      'tools/call',
      {
        name: 'capture_process_scenario',
        arguments: { ...slowEffect(effect, 30), idempotency_key: 'modern-task-2', wait_ms: 100 },
      },
      { capabilities: TASK_CLIENT },
    );
    const taskId = created.body.result!.taskId as string;
    const without = await ask('tasks/get', { taskId });
    expect(without.body.error!.code).toBe(-32021);
    const wrongName = await ask(
      'tasks/get',
      { taskId },
      { capabilities: TASK_CLIENT, headers: { 'mcp-name': 'tsk_other' } },
    );
    expect(wrongName.body.error!.code).toBe(-32020);
    const nosy = await t.tokenFor('nosy', 'local');
    const foreign = await modernRequest(t.url, nosy, 'tasks/get', { taskId }, { capabilities: TASK_CLIENT });
    expect(foreign.body.error!.code).toBe(-32602);
    expect((await ask('tasks/list', {}, { capabilities: TASK_CLIENT })).body.error!.code).toBe(-32601);
    expect((await ask('tasks/result', { taskId }, { capabilities: TASK_CLIENT })).body.error!.code).toBe(
      -32601,
    );

    // A viewer token of the owner reads the task, and may not cancel it (as cancel_launch).
    const viewer = await t.tokenFor('local', 'local', 'viewer');
    const read = await modernRequest(t.url, viewer, 'tasks/get', { taskId }, { capabilities: TASK_CLIENT });
    expect(read.body.result!.status).toBe('working');
    const refused = await modernRequest(
      t.url,
      viewer,
      'tasks/cancel',
      { taskId },
      { capabilities: TASK_CLIENT },
    );
    expect(refused.body.error!.message).toMatch(/viewer\) may not cancel/);
    expect((await ask('tasks/get', { taskId }, { capabilities: TASK_CLIENT })).body.result!.status).toBe(
      'working',
    );

    const cancelled = await ask('tasks/cancel', { taskId }, { capabilities: TASK_CLIENT });
    expect(cancelled.body.result).toMatchObject({ resultType: 'complete' });
    expect(cancelled.body.result).not.toHaveProperty('taskId');
    const after = await ask('tasks/get', { taskId }, { capabilities: TASK_CLIENT });
    expect(after.body.result!.status).toBe('cancelled');
    expect((await ask('tasks/cancel', { taskId }, { capabilities: TASK_CLIENT })).body.result).toMatchObject({
      resultType: 'complete',
    });
  });

  it('a capture that needs approval is a task that asks; tasks/update answers it, and only then is the key claimed', async () => {
    const both = { ...APPROVER, ...TASK_CLIENT };
    const effect = effectCounter(t.home);
    const args = {
      name: 'capture_process_scenario',
      arguments: { ...effect.launch(), idempotency_key: 'task-ask' },
    };
    const created = await ask('tools/call', args, { capabilities: both });
    expect(created.body.result).toMatchObject({ resultType: 'task', status: 'input_required' });
    const taskId = created.body.result!.taskId as string;
    // Asked again, the same call is the same question.
    expect((await ask('tools/call', args, { capabilities: both })).body.result!.taskId).toBe(taskId);
    const asking = await ask('tasks/get', { taskId }, { capabilities: both });
    expect(asking.body.result).toMatchObject({
      status: 'input_required',
      inputRequests: { approval: { method: 'elicitation/create' } },
    });
    expect(JSON.stringify(asking.body.result!.inputRequests)).toContain('/usr/bin/tee');
    const unclaimed = await ask('tools/call', {
      name: 'get_launch',
      arguments: { idempotency_key: 'task-ask' },
    });
    expect(unclaimed.body.result!.structuredContent.error.code).toBe('not_found');

    // Only its owner answers.
    const mallory = await t.tokenFor('mallory-tasks', 'local');
    const foreign = await modernRequest(
      t.url,
      mallory,
      'tasks/update',
      {
        taskId,
        inputResponses: { approval: { action: 'accept', content: { approve: true } } },
      },
      { capabilities: both },
    );
    expect(foreign.body.error!.code).toBe(-32602);
    // Nor does a viewer token of the owner: the question stays open for the operator.
    const viewer = await t.tokenFor('local', 'local', 'viewer');
    const spent = await modernRequest(
      t.url,
      viewer,
      'tasks/update',
      { taskId, inputResponses: { approval: { action: 'decline' } } },
      { capabilities: both },
    );
    expect(spent.body.error!.message).toMatch(/viewer\) may not answer/);
    expect((await ask('tasks/get', { taskId }, { capabilities: both })).body.result!.status).toBe(
      'input_required',
    );

    const answered = await ask(
      'tasks/update',
      {
        taskId,
        inputResponses: { approval: { action: 'accept', content: { approve: true } } },
      },
      { capabilities: both },
    );
    expect(answered.body.result).toMatchObject({ resultType: 'complete' });
    let got = await ask('tasks/get', { taskId }, { capabilities: both });
    for (let i = 0; i < 60 && got.body.result?.status === 'working'; i++) {
      await new Promise((r) => setTimeout(r, 250));
      got = await ask('tasks/get', { taskId }, { capabilities: both });
    }
    expect(got.body.result).toMatchObject({
      status: 'completed',
      result: { structuredContent: { status: 'succeeded' } },
    });
    // A second answer changes nothing, and the program ran once.
    await ask(
      'tasks/update',
      { taskId, inputResponses: { approval: { action: 'decline' } } },
      { capabilities: both },
    );
    expect((await ask('tasks/get', { taskId }, { capabilities: both })).body.result!.status).toBe(
      'completed',
    );
    expect(effect.count()).toBe(1);
  });

  it('a declined or cancelled question runs nothing and leaves the key free', async () => {
    const both = { ...APPROVER, ...TASK_CLIENT };
    const effect = effectCounter(t.home);
    const args = (key: string) => ({
      name: 'capture_process_scenario',
      arguments: { ...effect.launch(), idempotency_key: key },
    });
    const first = await ask('tools/call', args('task-no'), { capabilities: both });
    const taskId = first.body.result!.taskId as string;
    await ask(
      'tasks/update',
      { taskId, inputResponses: { approval: { action: 'decline' } } },
      { capabilities: both },
    );
    const declined = await ask('tasks/get', { taskId }, { capabilities: both });
    expect(declined.body.result).toMatchObject({
      status: 'completed',
      result: { isError: true, structuredContent: { error: { code: 'policy_denied' } } },
    });

    const second = await ask('tools/call', args('task-withdrawn'), { capabilities: both });
    const withdrawn = second.body.result!.taskId as string;
    expect(
      (await ask('tasks/cancel', { taskId: withdrawn }, { capabilities: both })).body.result,
    ).toMatchObject({
      resultType: 'complete',
    });
    expect((await ask('tasks/get', { taskId: withdrawn }, { capabilities: both })).body.result!.status).toBe(
      'cancelled',
    );

    for (const key of ['task-no', 'task-withdrawn']) {
      const launch = await ask('tools/call', { name: 'get_launch', arguments: { idempotency_key: key } });
      expect(launch.body.result!.structuredContent.error.code).toBe('not_found');
    }
    expect(effect.count()).toBe(0);
  });

  it('without the extension, a long launch answers running with its key, as it always has', async () => {
    const effect = effectCounter(t.home);
    const r = await ask('tools/call', {
      name: 'capture_process_scenario',
      arguments: { ...slowEffect(effect, 1), idempotency_key: 'modern-no-task', wait_ms: 100 },
    });
    expect(r.body.result).toMatchObject({ resultType: 'complete', structuredContent: { status: 'running' } });
  });
});
