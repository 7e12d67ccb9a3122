// Fresh launches of two (or more) builds' products at once, alternating
// between them, so each meets the same machine: this machine's speed drifts
// by tens of percent within minutes, far more than most changes move a launch.
// The builds are checkouts named in DOSSIER_BENCH_CHECKOUTS (comma-separated;
// default this one), each built with `npm run build`, e.g. a worktree of the
// commit before:
//   git worktree add /tmp/before HEAD~1 && ln -s "$PWD/node_modules" /tmp/before/
//   (cd /tmp/before && npm run build)
//   DOSSIER_BENCH_CHECKOUTS=/tmp/before,. npm run bench -- sidebyside
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { benchEnv, callTool, connect, median, ms } from './lib.ts';

const ROUNDS = 60;
const WARM_UP = 5;

async function startProduct(checkout: string): Promise<{ child: ChildProcess; client: Client }> {
  const env = await benchEnv();
  const child = spawn(process.execPath, [path.join(checkout, 'bin/dossier.js'), 'start'], {
    cwd: checkout,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  await new Promise<void>((resolve, reject) => {
    let output = '';
    const on = (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('dossier is ready')) resolve();
    };
    child.stdout!.on('data', on);
    child.stderr!.on('data', on);
    child.once('exit', (code) => reject(new Error(`${checkout}: dossier start exited ${code}:\n${output}`)));
  });
  const devJson = JSON.parse(readFileSync(path.join(env.DOSSIER_HOME!, 'dev.json'), 'utf8'));
  return { child, client: await connect({ devJson }) };
}

export async function benchSideBySide(): Promise<string[]> {
  const checkouts = (process.env.DOSSIER_BENCH_CHECKOUTS ?? '.').split(',').map((c) => path.resolve(c));
  const products: { child: ChildProcess; client: Client }[] = [];
  try {
    for (const checkout of checkouts) products.push(await startProduct(checkout));
    const times: number[][] = checkouts.map(() => []);
    let key = 0;
    for (let round = 0; round < ROUNDS; round++) {
      // Which goes first alternates, so none always meets a warmer machine.
      const order = [...products.keys()];
      if (round % 2) order.reverse();
      for (const k of order) {
        const t0 = performance.now();
        const reply = await callTool(products[k]!.client, 'capture_process_scenario', {
          executable: '/usr/bin/true',
          idempotency_key: `side-by-side-${key++}`,
        });
        if (reply.status !== 'succeeded')
          throw new Error(`a launch did not succeed: ${JSON.stringify(reply)}`);
        if (round >= WARM_UP) times[k]!.push(performance.now() - t0);
      }
    }
    return [
      `| checkout | fresh launch of /usr/bin/true, p50 of ${ROUNDS - WARM_UP} (alternating) |`,
      '|---|---|',
      ...checkouts.map((c, k) => `| ${c} | ${ms(median(times[k]!))} |`),
    ];
  } finally {
    await Promise.all(
      products.map(async ({ child, client }) => {
        await client.close().catch(() => undefined);
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGINT');
        await exited;
      }),
    );
  }
}
