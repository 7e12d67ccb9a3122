// Gateway figures (issue 6): tools/call of a cheap ledger tool over HTTP with
// 1, 8 and 64 concurrent clients, and the gateway process's memory (RSS) idle
// and under the 64-client load. The gateway runs as its own process
// (`dossier gateway`) so its RSS is its own.
import { readFileSync } from 'node:fs';
import { loadConfig } from '../src/config.ts';
import { spawnDossier } from '../tests/helpers/processes.ts';
import { startStack } from '../src/dev/stack.ts';
import { benchEnv, callTool, freePort, median, ms, percentile, timed } from './lib.ts';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const SECONDS = 10;

function rssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) / 1024;
}

export async function benchGateway(): Promise<string[]> {
  const env = await benchEnv({ DOSSIER_RATE_LIMIT_PER_MINUTE: '1000000' });
  const backend = await startStack(loadConfig(env), { gateway: false, log: () => undefined });
  const port = await freePort();
  const gatewayEnv = {
    ...env,
    DOSSIER_TEMPORAL_ADDRESS: backend.devJson.temporal_address,
    DOSSIER_PORT: String(port),
  };
  const token = await backend.store.tokens.create({ principal: 'bench', team: 'bench', role: 'operator' });
  const proc = await spawnDossier('gateway', gatewayEnv, 'dossier is ready');
  const gateway = proc.child;
  const url = `http://127.0.0.1:${port}/mcp`;
  const connect = async () => {
    const client = new Client({ name: 'bench', version: '1' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(url), {
        requestInit: { headers: { Authorization: `Bearer ${token}` } },
      }),
    );
    return client;
  };
  const lines = ['| figure | value |', '|---|---|'];
  try {
    const seed = await connect();
    const launched = await callTool(seed, 'capture_process_scenario', {
      executable: '/usr/bin/true',
      idempotency_key: 'seed',
    });
    const args = { evidence_id: launched.evidence_id };
    for (let i = 0; i < 200; i++) await callTool(seed, 'get_evidence', args);
    await new Promise((r) => setTimeout(r, 2_000));
    lines.push(`| gateway RSS, idle after warm-up | ${rssMiB(gateway.pid!).toFixed(0)} MiB |`);

    for (const n of [1, 8, 64]) {
      const clients = await Promise.all(Array.from({ length: n }, connect));
      const latencies: number[] = [];
      let peak = 0;
      const sampler = setInterval(() => (peak = Math.max(peak, rssMiB(gateway.pid!))), 250);
      const deadline = performance.now() + SECONDS * 1000;
      const t0 = performance.now();
      await Promise.all(
        clients.map(async (c) => {
          while (performance.now() < deadline) {
            const [t, r] = await timed(() => callTool(c, 'get_evidence', args));
            if (!r.evidence) throw new Error('get_evidence failed under load');
            latencies.push(t);
          }
        }),
      );
      clearInterval(sampler);
      const seconds = (performance.now() - t0) / 1000;
      lines.push(
        `| get_evidence, ${n} concurrent client${n > 1 ? 's' : ''} (${SECONDS} s) | ${(latencies.length / seconds).toFixed(0)} calls/s, p50 ${ms(median(latencies))}, p99 ${ms(percentile(latencies, 99))} |`,
      );
      if (n === 64) lines.push(`| gateway RSS, peak under the 64-client load | ${peak.toFixed(0)} MiB |`);
      await Promise.all(clients.map((c) => c.close()));
    }
    await seed.close();
  } finally {
    await proc.kill('SIGTERM');
    await backend.stop();
  }
  return lines;
}
