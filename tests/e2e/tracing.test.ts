// OpenTelemetry traces: with DOSSIER_OTLP_TRACES_ENDPOINT set, one MCP tool
// call is one trace, from the gateway's span through the workflow start, the
// workflow and its activities, exported by OTLP/HTTP to a collector (here a
// real HTTP listener that keeps what it receives).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tracing } from '../../src/metrics/tracing.ts';
import { call } from '../helpers/mcp.ts';
import { eventually } from '../helpers/wait.ts';
import { startTestStack, type TestStack } from '../helpers/stack.ts';

interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  attributes?: { key: string; value: { stringValue?: string } }[];
}

const received: OtlpSpan[] = [];
const requests: string[] = [];
let collector: http.Server;
let t: TestStack;

beforeAll(async () => {
  collector = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      requests.push(`${req.method} ${req.url} ${req.headers['content-type']}`);
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        resourceSpans: { scopeSpans: { spans: OtlpSpan[] }[] }[];
      };
      for (const r of body.resourceSpans) for (const s of r.scopeSpans) received.push(...s.spans);
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => collector.listen(0, '127.0.0.1', resolve));
  const { port } = collector.address() as AddressInfo;
  t = await startTestStack({
    env: { DOSSIER_OTLP_TRACES_ENDPOINT: `http://127.0.0.1:${port}/v1/traces` },
  });
});

afterAll(async () => {
  await t?.stop(true);
  await new Promise((resolve) => collector?.close(resolve));
});

describe('traces from the MCP call to the activity', () => {
  it('one launch is one trace: tool call, workflow start, workflow, effect activity', async () => {
    const reply = await call(await t.connect(), 'capture_process_scenario', {
      executable: '/usr/bin/true',
      idempotency_key: 'traced-1',
    });
    expect(reply.status).toBe('succeeded');
    // The call answers once the outcome is stored; the workflow's span closes with its last task,
    // which may follow the reply by a moment.
    const root = await eventually('the launch trace with its workflow and activity spans', async () => {
      await tracing()!.flush();
      const toolCall = received.find((s) => s.name === 'tools/call capture_process_scenario');
      const names = new Set(received.filter((s) => s.traceId === toolCall?.traceId).map((s) => s.name));
      return names.has('RunWorkflow:launchWorkflow') && names.has('RunActivity:runEffect')
        ? toolCall
        : undefined;
    });
    expect(requests[0]).toMatch(/^POST \/v1\/traces application\/json/);

    expect(root).toBeDefined();
    expect(root!.parentSpanId || undefined).toBeUndefined();
    const attrs = Object.fromEntries((root!.attributes ?? []).map((a) => [a.key, a.value.stringValue]));
    expect(attrs).toMatchObject({
      'dossier.tool': 'capture_process_scenario',
      'dossier.outcome': 'succeeded',
    });

    const inTrace = received.filter((s) => s.traceId === root!.traceId);
    const byId = new Map(inTrace.map((s) => [s.spanId, s]));
    const names = inTrace.map((s) => s.name);
    expect(names).toContain('StartWorkflow:launchWorkflow');
    expect(names).toContain('RunWorkflow:launchWorkflow');
    const effect = inTrace.find((s) => s.name === 'RunActivity:runEffect');
    expect(effect).toBeDefined();
    // The activity's span hangs, parent by parent, from the tool call's.
    const chain: string[] = [];
    for (let s: OtlpSpan | undefined = effect; s; s = s.parentSpanId ? byId.get(s.parentSpanId) : undefined)
      chain.push(s.name);
    expect(chain.at(-1)).toBe('tools/call capture_process_scenario');
    expect(chain).toContain('RunWorkflow:launchWorkflow');
  });

  it('a retry of the key is a trace of its own that names the same launch, and runs nothing again', async () => {
    const before = received.filter((s) => s.name === 'RunActivity:runEffect').length;
    const retry = await call(await t.connect(), 'capture_process_scenario', {
      executable: '/usr/bin/true',
      idempotency_key: 'traced-1',
    });
    expect(retry.launch.attached).toBe(true);
    await tracing()!.flush();
    const roots = received.filter((s) => s.name === 'tools/call capture_process_scenario');
    expect(roots).toHaveLength(2);
    expect(roots[0]!.traceId).not.toBe(roots[1]!.traceId);
    expect(received.filter((s) => s.name === 'RunActivity:runEffect')).toHaveLength(before);
  });
});
