// The cheapest tool call (`whoami`) on dossier's gateway against its floor, a
// bare MCP SDK server (bench/bareServer.ts) driven by the same harness: 1, 8
// and 64 clients, each its own session over Streamable HTTP, back to back in
// 1-second slices that alternate between the two servers. Both servers run as
// their own processes; the embedded stack's Temporal and worker run beside the
// gateway, idle. The ratio is the median of each round's ratio (the two slices
// of a round meet nearly the same machine), beside the pooled figures.
import { spawn } from 'node:child_process';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startProduct } from './breakdown.ts';
import { callTool, freePort, median, ms, timed } from './lib.ts';

/** Each server gets ROUNDS slices of SLICE_SECONDS, taking turns, so both meet the same noise. */
const ROUNDS = 10;
const SLICE_SECONDS = 1;

interface Load {
  calls: number;
  seconds: number;
  latencies: number[];
}

async function load(url: string, token: string | undefined, n: number): Promise<Load> {
  const clients = await Promise.all(
    Array.from({ length: n }, async () => {
      const client = new Client({ name: 'bench', version: '1' });
      await client.connect(
        new StreamableHTTPClientTransport(new URL(url), {
          requestInit: token ? { headers: { Authorization: `Bearer ${token}` } } : {},
        }),
      );
      return client;
    }),
  );
  for (const c of clients) for (let i = 0; i < 20; i++) await callTool(c, 'whoami', {});
  const latencies: number[] = [];
  const t0 = performance.now();
  const deadline = t0 + SLICE_SECONDS * 1000;
  await Promise.all(
    clients.map(async (c) => {
      while (performance.now() < deadline) {
        const [t, r] = await timed(() => callTool(c, 'whoami', {}));
        if (!r.principal) throw new Error('whoami failed under load');
        latencies.push(t);
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  await Promise.all(clients.map((c) => c.close()));
  return { calls: latencies.length, seconds, latencies };
}

function combined(loads: Load[]) {
  const calls = loads.reduce((a, l) => a + l.calls, 0);
  const seconds = loads.reduce((a, l) => a + l.seconds, 0);
  return { rps: calls / seconds, p50: median(loads.flatMap((l) => l.latencies)) };
}

export async function benchCalls(): Promise<string[]> {
  const port = await freePort();
  const bare = spawn(process.execPath, ['--import', 'tsx', 'bench/bareServer.ts', String(port)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve) => bare.stdout.once('data', () => resolve()));
  const product = await startProduct({ DOSSIER_RATE_LIMIT_PER_MINUTE: '1000000' });
  const lines = [
    '| clients | bare SDK server | dossier `whoami` | ratio (rps; p50), median of the rounds |',
    '|---|---|---|---|',
  ];
  try {
    for (const n of [1, 8, 64]) {
      const floors: Load[] = [];
      const oursAll: Load[] = [];
      for (let round = 0; round < ROUNDS; round++) {
        // Which goes first alternates, so neither always meets a warmer machine.
        const runFloor = async () => floors.push(await load(`http://127.0.0.1:${port}/mcp`, undefined, n));
        const runOurs = async () =>
          oursAll.push(await load(product.devJson.mcp_url, product.devJson.token, n));
        for (const f of round % 2 ? [runOurs, runFloor] : [runFloor, runOurs]) await f();
      }
      const floor = combined(floors);
      const ours = combined(oursAll);
      const rpsRatio = median(oursAll.map((o, i) => combined([o]).rps / combined([floors[i]!]).rps));
      const p50Ratio = median(oursAll.map((o, i) => combined([o]).p50 / combined([floors[i]!]).p50));
      lines.push(
        `| ${n} | ${floor.rps.toFixed(0)}/s, p50 ${ms(floor.p50)} | ${ours.rps.toFixed(0)}/s, p50 ${ms(ours.p50)} | ${rpsRatio.toFixed(2)}×; ${p50Ratio.toFixed(2)}× |`,
      );
    }
  } finally {
    bare.kill();
    await product.stop();
  }
  return lines;
}
