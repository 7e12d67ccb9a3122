// Soak (issue 13): two teams on one embedded stack, as `npm start` runs it. The
// quiet team calls whoami, a small capture and list_evidence in a loop; its
// latency and errors are measured alone, then again while the other team
// floods the stack with max-size captures (16 MiB of newlines each, retained
// at the row bound) and a storm of new sessions. Same stack, same run.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { benchStack, callTool, median, ms, percentile } from './lib.ts';

const PHASE_MS = 20_000;

async function open(url: string, token: string) {
  const client = new Client({ name: 'soak', version: '1' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(url), {
      requestInit: { headers: { Authorization: `Bearer ${token}` } },
    }),
  );
  return client;
}

/** The quiet team's loop for `forMs`: latencies of each call, and how many failed. */
async function quietLoop(client: Client, forMs: number, tag: string) {
  const latencies: number[] = [];
  const byCall: Record<string, number[]> = {};
  let errors = 0;
  let n = 0;
  const end = performance.now() + forMs;
  while (performance.now() < end) {
    const calls: [string, Record<string, unknown>][] = [
      ['whoami', {}],
      ['capture_process_scenario', { executable: '/usr/bin/true', idempotency_key: `${tag}-${n++}` }],
      ['list_evidence', { limit: 20 }],
    ];
    for (const [name, args] of calls) {
      const t0 = performance.now();
      try {
        const reply = await callTool(client, name, args);
        if (reply.error || reply.status === 'failed') errors++;
      } catch {
        errors++;
      }
      latencies.push(performance.now() - t0);
      (byCall[name] ??= []).push(performance.now() - t0);
    }
  }
  return { latencies, errors, byCall };
}

export async function benchSoak(): Promise<string[]> {
  const stack = await benchStack();
  const url = stack.devJson.mcp_url;
  const quietToken = await stack.store.tokens.create({
    principal: 'quiet',
    team: 'quiet-team',
    role: 'operator',
  });
  const floodToken = await stack.store.tokens.create({
    principal: 'flood',
    team: 'flood-team',
    role: 'operator',
  });
  // The storm is another principal of the flooding team: the per-principal cap closes its own sessions only.
  const stormToken = await stack.store.tokens.create({
    principal: 'storm',
    team: 'flood-team',
    role: 'viewer',
  });
  const lines = ['| figure | quiet team alone | while the other team floods |', '|---|---|---|'];
  try {
    const quiet = await open(url, quietToken);
    await quietLoop(quiet, 3_000, 'warm');
    const alone = await quietLoop(quiet, PHASE_MS, 'alone');

    let stop = false;
    let floods = 0;
    let floodErrors = 0;
    let sessions = 0;
    const flooder = async (i: number) => {
      const client = await open(url, floodToken);
      for (let k = 0; !stop; k++) {
        const reply = await callTool(client, 'capture_process_scenario', {
          executable: '/usr/bin/python3',
          args: ['-c', `import sys; sys.stdout.write("\\n" * ${16 * 1024 * 1024})`],
          max_output_bytes: 16 * 1024 * 1024,
          detail: 'summary',
          wait_ms: 100_000,
          idempotency_key: `flood-${i}-${k}`,
        }).catch(() => ({ error: true }) as Record<string, unknown>);
        if (reply.error || reply.status !== 'succeeded') floodErrors++;
        else floods++;
      }
      await client.close();
    };
    const storm = async () => {
      while (!stop) {
        const c = await open(url, stormToken).catch(() => undefined);
        if (c) sessions++;
        // The clients are dropped without closing: the gateway must cap them, not us.
      }
    };
    const load = [flooder(0), flooder(1), storm()];
    await new Promise((r) => setTimeout(r, 2_000));
    const loaded = await quietLoop(quiet, PHASE_MS, 'loaded');
    stop = true;
    await Promise.allSettled(load);

    type Run = typeof alone;
    const row = (label: string, f: (x: Run) => string) =>
      lines.push(`| ${label} | ${f(alone)} | ${f(loaded)} |`);
    row('quiet calls made', (x) => String(x.latencies.length));
    row('quiet p50', (x) => ms(median(x.latencies)));
    row('quiet p99', (x) => ms(percentile(x.latencies, 99)));
    row('quiet max', (x) => ms(Math.max(...x.latencies)));
    row('quiet errors', (x) => String(x.errors));
    for (const name of ['whoami', 'list_evidence', 'capture_process_scenario'])
      row(
        `quiet \`${name}\` p50 / p99`,
        (x) => `${ms(median(x.byCall[name]!))} / ${ms(percentile(x.byCall[name]!, 99))}`,
      );
    lines.push(
      `| p99 ratio, loaded / alone | | ${(percentile(loaded.latencies, 99) / percentile(alone.latencies, 99)).toFixed(2)}× |`,
    );
    lines.push(
      `| flood: 16 MiB captures retained (250,000 rows each) / failed | | ${floods} / ${floodErrors} |`,
    );
    lines.push(`| flood: sessions opened and abandoned (per-principal cap 64) | | ${sessions} |`);
    await quiet.close();
  } finally {
    await stack.stop();
  }
  return lines;
}
