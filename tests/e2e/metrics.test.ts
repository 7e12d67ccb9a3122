// Prometheus metrics: GET /metrics on the gateway answers only the operator's
// token, and shows the launches, retries and refusals just made, the effects
// the worker ran, store latency and the sandbox's refusals, with no label that
// names a team or a principal. A worker without a gateway serves its own.
import { randomBytes } from 'node:crypto';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMetricsListener } from '../../src/mcp/metricsRoute.ts';
import { call, effectCounter } from '../helpers/mcp.ts';
import { freePort } from '../helpers/ports.ts';
import { startTestStack, type TestStack } from '../helpers/stack.ts';

const TOKEN = randomBytes(24).toString('hex');
let t: TestStack;
let client: Client;
let sdkMetrics: string;

beforeAll(async () => {
  // The first stack of this test process installs the SDK's runtime, with its exporter.
  sdkMetrics = `127.0.0.1:${await freePort()}`;
  t = await startTestStack({
    env: { DOSSIER_METRICS_TOKEN: TOKEN, DOSSIER_SDK_METRICS_ADDRESS: sdkMetrics },
  });
  client = await t.connect();
}, 120_000);
afterAll(async () => {
  await t?.stop(true);
});

const metricsUrl = () => t.url.replace(/\/mcp$/, '/metrics');
const scrape = async (token?: string) =>
  fetch(metricsUrl(), token ? { headers: { Authorization: `Bearer ${token}` } } : {});

/** The value of one sample, by metric name and exact labels, or 0 when absent. */
function sample(text: string, name: string, labels: Record<string, string>): number {
  const want = Object.entries(labels)
    .map(([k, v]) => `${k}="${v}"`)
    .sort();
  for (const line of text.split('\n')) {
    const m = /^([a-z_]+)\{([^}]*)\} (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = m[2]!.split(',').sort();
    if (want.every((w) => have.includes(w)) && have.length === want.length) return Number(m[3]);
  }
  return 0;
}

describe('GET /metrics', () => {
  it("answers only the operator's token: not a team token, not none", async () => {
    expect((await scrape()).status).toBe(401);
    expect((await scrape(t.token)).status).toBe(401);
    expect((await scrape('x'.repeat(48))).status).toBe(401);
    const ok = await scrape(TOKEN);
    expect(ok.status).toBe(200);
    expect(ok.headers.get('content-type')).toMatch(/^text\/plain/);
  });

  it('shows the launches just made: new, attached and refused calls, the effect, store latency, sandbox refusals', async () => {
    const effect = effectCounter(t.home);
    const args = { ...effect.launch(), idempotency_key: 'metrics-1', wait_ms: 20_000 };
    expect((await call(client, 'capture_process_scenario', args)).status).toBe('succeeded');
    expect((await call(client, 'capture_process_scenario', args)).launch.attached).toBe(true);
    const reused = await call(client, 'capture_process_scenario', { ...args, args: ['other'] });
    expect(reused.error.code).toBe('idempotency_key_reused');
    // The sandbox refuses network for a capture on this cluster before anything runs: a launch that fails.
    const denied = await call(client, 'capture_process_scenario', {
      ...effect.launch(),
      network: true,
      idempotency_key: 'metrics-net',
    });
    expect(denied.error.code).toBe('policy_denied');
    await call(client, 'whoami', {});

    const text = await (await scrape(TOKEN)).text();
    const tool = 'capture_process_scenario';
    expect(sample(text, 'dossier_launch_calls_total', { tool, kind: 'new' })).toBe(2);
    expect(sample(text, 'dossier_launch_calls_total', { tool, kind: 'attached' })).toBe(1);
    expect(sample(text, 'dossier_launch_calls_total', { tool, kind: 'key_reused' })).toBe(1);
    // A launch's own failure is a reply (the call was answered): ok, with the error inside.
    expect(sample(text, 'dossier_tool_calls_total', { tool, outcome: 'ok' })).toBe(3);
    expect(sample(text, 'dossier_tool_calls_total', { tool, outcome: 'idempotency_key_reused' })).toBe(1);
    expect(sample(text, 'dossier_tool_calls_total', { tool: 'whoami', outcome: 'ok' })).toBe(1);
    expect(sample(text, 'dossier_effect_seconds_count', { tool, status: 'succeeded' })).toBe(1);
    expect(sample(text, 'dossier_effect_seconds_count', { tool, status: 'failed' })).toBe(1);
    expect(sample(text, 'dossier_launch_wait_seconds_count', { tool, ended: 'true' })).toBeGreaterThanOrEqual(
      1,
    );
    expect(
      sample(text, 'dossier_store_query_seconds_count', { backend: 'sqlite', kind: 'select' }),
    ).toBeGreaterThan(0);
    expect(sample(text, 'dossier_sandbox_refusals_total', { reason: 'network' })).toBe(1);
    // Every task queue's backlog, asked of Temporal at the scrape (nothing waits now).
    for (const queue of ['dossier-capture', 'dossier-extract', 'dossier-device', 'dossier-analysis'])
      for (const type of ['workflow', 'activity'])
        expect(text).toMatch(
          new RegExp(`^dossier_task_queue_backlog\\{queue="${queue}",type="${type}"\\} 0$`, 'm'),
        );
    expect(text).toMatch(/^dossier_task_queue_backlog\{queue="dossier",type="workflow"\} 0$/m);
    // The process's own metrics come with them.
    expect(text).toMatch(/^process_cpu_seconds_total /m);
    // No label names who did it.
    expect(text).not.toMatch(/team=|principal=|local/);
  });

  it('a made-up tool name is counted as unknown, so callers cannot grow the metric', async () => {
    for (let i = 0; i < 3; i++)
      await client.callTool({ name: `no_such_tool_${i}`, arguments: {} }).catch(() => undefined);
    const text = await (await scrape(TOKEN)).text();
    expect(text).not.toMatch(/no_such_tool/);
    expect(
      sample(text, 'dossier_tool_calls_total', { tool: 'unknown', outcome: 'invalid_params' }) +
        sample(text, 'dossier_tool_calls_total', { tool: 'unknown', outcome: 'not_found' }),
    ).toBe(3);
  });

  it("the Temporal SDK's own metrics are on DOSSIER_SDK_METRICS_ADDRESS", async () => {
    const text = await (await fetch(`http://${sdkMetrics}/metrics`)).text();
    // Polls and task latencies of this process's workers, by task queue.
    expect(text).toMatch(/^temporal_\w+/m);
    expect(text).toMatch(/task_queue="dossier-capture"/);
  });

  it("a worker's own listener serves GET /metrics with the same token, and nothing else", async () => {
    const port = await freePort();
    const listener = await startMetricsListener('127.0.0.1', port, TOKEN);
    try {
      const base = `http://127.0.0.1:${port}`;
      expect((await fetch(`${base}/metrics`)).status).toBe(401);
      const ok = await fetch(`${base}/metrics`, { headers: { Authorization: `Bearer ${TOKEN}` } });
      expect(ok.status).toBe(200);
      expect(await ok.text()).toMatch(/^dossier_effect_seconds_bucket/m);
      expect((await fetch(`${base}/mcp`)).status).toBe(404);
    } finally {
      await new Promise<void>((resolve) => listener.close(() => resolve()));
    }
  });
});
