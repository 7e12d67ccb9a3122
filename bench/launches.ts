// Launch figures (issues 2 and 3): stack start, fresh launch vs direct spawn,
// retry of a finished key vs a no-op gateway call, 100 concurrent duplicates,
// sustained launches per second. Everything runs on this machine, on loopback.
import { effectCounter } from '../tests/helpers/mcp.ts';
import { spawnDossier } from '../tests/helpers/processes.ts';
import { benchEnv, benchStack, callTool, connect, median, ms, percentile, spawnTrue, timed } from './lib.ts';

const RUNS = 20;
/** Retries and `whoami` calls take ~2 ms: more of them, for a stable median. */
const RETRY_RUNS = 100;

async function startOnce(env: Record<string, string>): Promise<number> {
  const [elapsed, product] = await timed(() => spawnDossier('start', env, 'dossier is ready'));
  await product.kill('SIGINT');
  return elapsed;
}

export async function benchLaunches(): Promise<string[]> {
  const lines: string[] = [];

  // Stack start, CLI cached: a fresh DOSSIER_HOME each time, then restarts on an existing one.
  const fresh: number[] = [];
  const restart: number[] = [];
  for (let i = 0; i < 5; i++) {
    const env = await benchEnv();
    fresh.push(await startOnce(env));
    restart.push(await startOnce(env));
  }
  lines.push(`| \`npm start\` to ready, fresh DOSSIER_HOME (5 runs) | ${ms(median(fresh))} |`);
  lines.push(`| \`npm start\` to ready, existing DOSSIER_HOME (5 runs) | ${ms(median(restart))} |`);

  const stack = await benchStack({
    DOSSIER_WORKER_CONCURRENCY: '16',
    // 100 clients of one principal at once: above the default per-principal session cap.
    DOSSIER_MAX_SESSIONS_PER_PRINCIPAL: '256',
    DOSSIER_RATE_LIMIT_PER_MINUTE: '1000000',
  });
  try {
    const client = await connect(stack);
    for (let i = 0; i < 5; i++) {
      await callTool(client, 'capture_process_scenario', {
        executable: '/usr/bin/true',
        idempotency_key: `warm-${i}`,
      });
      await callTool(client, 'whoami', {});
    }

    // Each figure alternates with its floor, one after the other, so both meet the same moment
    // of a noisy machine: a fresh launch with a direct spawn, a retry with a `whoami`.
    const direct: number[] = [];
    const launches: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      direct.push(await spawnTrue());
      const [t, r] = await timed(() =>
        callTool(client, 'capture_process_scenario', {
          executable: '/usr/bin/true',
          idempotency_key: `fresh-${i}`,
        }),
      );
      if (r.status !== 'succeeded') throw new Error(`launch ${i} ended ${r.status}`);
      launches.push(t);
    }

    const retries: number[] = [];
    const noops: number[] = [];
    const retry = async () => {
      const [t, r] = await timed(() =>
        callTool(client, 'capture_process_scenario', {
          executable: '/usr/bin/true',
          idempotency_key: 'fresh-0',
        }),
      );
      if (!r.launch.attached) throw new Error('retry did not attach');
      retries.push(t);
    };
    const noop = async () => noops.push((await timed(() => callTool(client, 'whoami', {})))[0]);
    // Which goes first alternates too: neither always follows the other.
    for (let i = 0; i < RETRY_RUNS; i++) for (const f of i % 2 ? [retry, noop] : [noop, retry]) await f();

    lines.push(`| direct \`spawn\` of /usr/bin/true (${RUNS} runs) | ${ms(median(direct))} |`);
    lines.push(
      `| fresh launch of /usr/bin/true through the gateway (${RUNS} runs) | ${ms(median(launches))} |`,
    );
    lines.push(`| fresh launch overhead over direct spawn | ${ms(median(launches) - median(direct))} |`);
    lines.push(`| retry of a finished key (${RETRY_RUNS} runs) | ${ms(median(retries))} |`);
    lines.push(
      `| no-op gateway tool call (\`whoami\`, ${RETRY_RUNS} runs, alternating with the retries) | ${ms(median(noops))} |`,
    );
    lines.push(
      `| retry ÷ no-op (issue 15 target ≤ 1.2×) | ${(median(retries) / median(noops)).toFixed(2)}× |`,
    );

    // 100 concurrent duplicates from 100 separate clients; each effect leaves a marker in its workspace.
    const effect = effectCounter(stack.config.home);
    const clients = await Promise.all(Array.from({ length: 100 }, () => connect(stack)));
    const args = { ...effect.launch(), idempotency_key: 'dup-100' };
    const [allAnswered, replies] = await timed(() =>
      Promise.all(clients.map((c) => callTool(c, 'capture_process_scenario', args))),
    );
    const effects = effect.count();
    const ids = new Set(replies.map((r) => r.evidence_id));
    lines.push(`| 100 concurrent duplicates: all answered | ${ms(allAnswered)} |`);
    lines.push(`| 100 concurrent duplicates: effects / distinct evidence_ids | ${effects} / ${ids.size} |`);
    await Promise.all(clients.map((c) => c.close()));

    // Sustained launches: 8 clients launching back to back for 20 s.
    const workers = await Promise.all(Array.from({ length: 8 }, () => connect(stack)));
    const deadline = performance.now() + 20_000;
    const latencies: number[] = [];
    let n = 0;
    const t0 = performance.now();
    await Promise.all(
      workers.map(async (c, w) => {
        while (performance.now() < deadline) {
          const [t, r] = await timed(() =>
            callTool(c, 'capture_process_scenario', {
              executable: '/usr/bin/true',
              idempotency_key: `sustained-${w}-${n++}`,
            }),
          );
          if (r.status !== 'succeeded') throw new Error(`sustained launch ended ${r.status}`);
          latencies.push(t);
        }
      }),
    );
    const seconds = (performance.now() - t0) / 1000;
    lines.push(
      `| sustained launches/s (8 concurrent callers, 20 s; 1 worker process, activity concurrency 16) | ${(latencies.length / seconds).toFixed(1)}/s (p50 ${ms(median(latencies))}, p99 ${ms(percentile(latencies, 99))}) |`,
    );
    await Promise.all(workers.map((c) => c.close()));
    await client.close();
  } finally {
    await stack.stop();
  }
  return lines;
}
