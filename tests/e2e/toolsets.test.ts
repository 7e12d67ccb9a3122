// Toolsets end to end, in both protocol eras: a connection lists what its URL,
// its token or the server chose (in that order); a session lists more when its
// agent enables them and its client hears of it, on any replica; every tool
// stays callable by name whatever is listed, and roles apply as always.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { execFileSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpGateway, type HttpGateway } from '../../src/mcp/http.ts';
import { payloadKeys } from '../../src/temporal/codec.ts';
import { CATALOG } from '../../src/tools/catalog.ts';
import { call, connectMcp } from '../helpers/mcp.ts';
import { modernRequest } from '../helpers/modern.ts';
import { startTestStack, type TestStack } from '../helpers/stack.ts';

let t: TestStack;
/** A second gateway replica on the same store, as behind a load balancer. */
let replica: HttpGateway;
beforeAll(async () => {
  t = await startTestStack();
  replica = await startHttpGateway(t.stack.gateway!, t.stack.store.tokens, {
    host: '127.0.0.1',
    port: 0,
    maxRequestBytes: 1024 * 1024,
    maxUploadBytes: 1024 * 1024,
    keys: payloadKeys([], t.home),
    sessionStore: t.stack.store.sessions,
  });
});
afterAll(async () => {
  await replica?.close();
  await t?.stop(true);
});

const namesOf = (...toolsets: string[]) =>
  CATALOG.filter((c) => toolsets.includes(c.toolset)).map((c) => c.name);
const listed = async (client: Client) => (await client.listTools()).tools.map((x) => x.name);
const tokenWith = (principal: string, toolsets: string[], role: 'operator' | 'viewer' = 'operator') =>
  t.stack.store.tokens.create({ principal, team: 'local', role, toolsets });

describe('the handshake era (2025-11-25)', () => {
  it('a default session lists core and analysis; an unlisted tool is still callable by name, under its role', async () => {
    const client = await t.connect();
    expect(await listed(client)).toEqual(namesOf('core', 'analysis'));
    expect(await call(client, 'whoami')).toMatchObject({ toolsets: ['core', 'analysis'] });
    const capture = await call(client, 'capture_process_scenario', {
      executable: '/usr/bin/true',
      idempotency_key: 'unlisted-capture',
    });
    expect(capture.status).toBe('succeeded');
    // Listing is no authorization, and not listing no refusal: a viewer may list captures and still not run one.
    const viewer = await connectMcp(`${t.url}?toolsets=capture`, await tokenWith('vera', [], 'viewer'));
    expect(await listed(viewer)).toContain('capture_process_scenario');
    const refused = await call(viewer, 'capture_process_scenario', {
      executable: '/usr/bin/true',
      idempotency_key: 'viewer-capture',
    });
    expect(refused.error.code).toBe('forbidden');
    await viewer.close();

    const sets = await call(client, 'list_toolsets');
    expect(sets.listed).toEqual(['core', 'analysis']);
    const devices = sets.toolsets.find((s: { name: string }) => s.name === 'devices');
    expect(devices).toMatchObject({ listed: false, tools: expect.arrayContaining(['device_exec: Run a program on a device']) }); // prettier-ignore
  });

  it('enable_toolsets grows the session’s list and tells its client; the list holds on a replica that resumes the session, and back', async () => {
    const auth = { requestInit: { headers: { Authorization: `Bearer ${t.token}` } } };
    const heard: Tool[][] = [];
    const agent = new Client(
      { name: 'list-changed-agent', version: '1' },
      { listChanged: { tools: { onChanged: (err, tools) => void (!err && tools && heard.push(tools)) } } },
    );
    const first = new StreamableHTTPClientTransport(new URL(t.url), auth);
    await agent.connect(first);
    expect(agent.getServerCapabilities()?.tools?.listChanged).toBe(true);
    expect(await listed(agent)).toEqual(namesOf('core', 'analysis'));

    const enabled = await call(agent, 'enable_toolsets', { toolsets: ['devices'] });
    expect(enabled).toMatchObject({ enabled: ['devices'], listed: ['core', 'analysis', 'devices'] });
    await expect.poll(() => heard.length).toBe(1);
    expect(heard[0]!.map((x) => x.name)).toEqual(namesOf('core', 'analysis', 'devices'));
    expect(await listed(agent)).toEqual(namesOf('core', 'analysis', 'devices'));
    // Enabling what is listed changes nothing and says so.
    expect(await call(agent, 'enable_toolsets', { toolsets: ['analysis'] })).toMatchObject({ enabled: [] });

    // The same session on another replica (which resumes it by replaying initialize) lists the same.
    const elsewhere = new Client({ name: 'list-changed-agent', version: '1' });
    await elsewhere.connect(
      new StreamableHTTPClientTransport(new URL(replica.url), { ...auth, sessionId: first.sessionId }),
    );
    expect(await listed(elsewhere)).toEqual(namesOf('core', 'analysis', 'devices'));
    // What it enables there, the first replica (which still holds the session) lists too.
    await call(elsewhere, 'enable_toolsets', { toolsets: ['extraction'] });
    expect(await listed(agent)).toEqual(namesOf('core', 'analysis', 'extraction', 'devices'));
    await elsewhere.close();
    await agent.close();
  });

  it('the URL chooses over the token, the token over the server; a bad name is refused before any session', async () => {
    const devicesToken = await tokenWith('dora', ['devices']);
    const byToken = await connectMcp(t.url, devicesToken);
    expect(await listed(byToken)).toEqual(namesOf('core', 'devices'));
    const byUrl = await connectMcp(`${t.url}?toolsets=capture,extraction`, devicesToken);
    expect(await listed(byUrl)).toEqual(namesOf('core', 'capture', 'extraction'));
    const all = await connectMcp(`${t.url}?toolsets=all`, t.token);
    expect(await listed(all)).toEqual(CATALOG.map((c) => c.name));
    for (const c of [byToken, byUrl, all]) await c.close();

    const res = await fetch(`${t.url}?toolsets=analysis,gpu`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        authorization: `Bearer ${t.token}`,
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {} }),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(
      /unknown toolset "gpu"/,
    );
  });

  it('dossier token create --toolsets gives a token its connections’ default list', async () => {
    const cli = (...args: string[]) =>
      execFileSync(process.execPath, ['bin/dossier.js', 'token', ...args], {
        env: { ...process.env, ...t.env },
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
      });
    const token = cli('create', '--principal', 'tess', '--team', 'toolsets', '--toolsets', 'bundles').trim();
    expect(cli('list', '--team', 'toolsets')).toContain('toolsets=core,bundles');
    const client = await connectMcp(t.url, token);
    expect(await listed(client)).toEqual(namesOf('core', 'bundles'));
    await client.close();
    expect(() => cli('create', '--principal', 'x', '--team', 'y', '--toolsets', 'gpu')).toThrow(
      /--toolsets: unknown toolset/,
    );
  });

  it('launch replies validate against the output schema the SDK client checks them with', async () => {
    const client = await connectMcp(`${t.url}?toolsets=all`, t.token);
    await client.listTools(); // the client now validates structured content against each outputSchema
    const ok = await client.callTool({
      name: 'capture_process_scenario',
      arguments: { executable: '/usr/bin/seq', args: ['3000'], idempotency_key: 'validated-capture' },
    });
    expect(ok.structuredContent).toMatchObject({ status: 'succeeded', detail: 'summary' });
    const running = await client.callTool({
      name: 'capture_process_scenario',
      arguments: {
        executable: '/usr/bin/sleep',
        args: ['1'],
        wait_ms: 0,
        idempotency_key: 'validated-running',
      },
    });
    expect(running.structuredContent).toMatchObject({ status: 'running' });
    const refused = await client.callTool({ name: 'capture_process_scenario', arguments: { executable: '/usr/bin/true' } }); // prettier-ignore
    expect(refused).toMatchObject({
      isError: true,
      structuredContent: { error: { code: 'invalid_params' } },
    });
    await client.close();
  });
});

describe('the stateless era (2026-07-28)', () => {
  const ask = (url: string, token: string, method: string, params: Record<string, unknown> = {}) =>
    modernRequest(url, token, method, params);
  const names = (r: Awaited<ReturnType<typeof ask>>) => r.body.result!.tools.map((x: Tool) => x.name);

  it('tools/list follows the URL, then the token, then the server', async () => {
    expect(names(await ask(t.url, t.token, 'tools/list'))).toEqual(namesOf('core', 'analysis'));
    const devicesToken = await tokenWith('dana', ['devices']);
    expect(names(await ask(t.url, devicesToken, 'tools/list'))).toEqual(namesOf('core', 'devices'));
    expect(names(await ask(`${t.url}?toolsets=capture`, devicesToken, 'tools/list'))).toEqual(
      namesOf('core', 'capture'),
    );
    expect(names(await ask(`${t.url}?toolsets=all`, t.token, 'tools/list'))).toEqual(
      CATALOG.map((c) => c.name),
    );
  });

  it('enable_toolsets cannot change a sessionless list: it gives the tools to call by name and the URL that lists them', async () => {
    const r = await ask(t.url, t.token, 'tools/call', {
      name: 'enable_toolsets',
      arguments: { toolsets: ['capture'] },
    });
    const reply = r.body.result!.structuredContent;
    expect(reply).toMatchObject({
      enabled: [],
      listed: ['core', 'analysis'],
      url: '/mcp?toolsets=analysis,capture',
    });
    expect(reply.tools.map((x: Tool) => x.name)).toEqual(namesOf('capture'));
    expect(reply.tools[0].inputSchema.required).toContain('idempotency_key');
    // And so it is: an unlisted tool called by name runs.
    const run = await ask(t.url, t.token, 'tools/call', {
      name: 'capture_process_scenario',
      arguments: { executable: '/usr/bin/true', idempotency_key: 'stateless-unlisted' },
    });
    expect(run.body.result!.structuredContent.status).toBe('succeeded');
    expect(names(await ask(`${t.url.replace(/\/mcp$/, '')}${reply.url}`, t.token, 'tools/list'))).toEqual(
      namesOf('core', 'analysis', 'capture'),
    );
  });

  it('enable_toolsets ["all"] without a session answers within the reply budget: the definitions that fit, the rest named', async () => {
    const r = await ask(t.url, t.token, 'tools/call', {
      name: 'enable_toolsets',
      arguments: { toolsets: ['all'] },
    });
    expect(r.body.result!.isError, JSON.stringify(r.body.result!.structuredContent)).toBeFalsy();
    const reply = r.body.result!.structuredContent;
    expect(reply.url).toBe('/mcp?toolsets=all');
    const given = new Set(reply.tools.map((x: Tool) => x.name));
    const named = (reply.not_included as { toolset: string; tools: string[] }[]).flatMap((n) =>
      n.tools.map((line) => line.split(':')[0]),
    );
    // Every tool it adds is there once: with its definition, or by name for a next call.
    expect([...given, ...named].sort()).toEqual(
      namesOf('capture', 'extraction', 'devices', 'bundles', 'knowledge').sort(),
    );
    expect(given.size).toBeGreaterThan(0);
    expect(reply.note).toMatch(/did not fit in this reply.*ask enable_toolsets for/);
    // What was left out comes whole from the next call.
    const next = await ask(t.url, t.token, 'tools/call', {
      name: 'enable_toolsets',
      arguments: { toolsets: [reply.not_included[0].toolset] },
    });
    expect(next.body.result!.structuredContent.tools.map((x: Tool) => x.name)).toEqual(
      namesOf(reply.not_included[0].toolset),
    );
    // Toolsets asked by name come in the order asked: the first is never the one left out.
    const ordered = await ask(t.url, t.token, 'tools/call', {
      name: 'enable_toolsets',
      arguments: { toolsets: ['knowledge', 'capture', 'extraction'] },
    });
    const orderedReply = ordered.body.result!.structuredContent;
    const givenNames = orderedReply.tools.map((x: Tool) => x.name);
    expect(givenNames).toEqual(expect.arrayContaining(namesOf('knowledge')));
    expect((orderedReply.not_included ?? []).map((n: { toolset: string }) => n.toolset)).not.toContain(
      'knowledge',
    );
  });
});
