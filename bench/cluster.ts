// Sustained launches on the process cluster (`dossier cluster up`: a real
// Temporal server on PostgreSQL, 2 gateways, 3 workers) against the embedded
// stack (`npm start`: the dev server on SQLite, one process), same harness,
// same machine, alternating within one run: 8 callers launching /usr/bin/true
// back to back, spread over the cluster's gateways.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { ClusterJson } from '../src/dev/devJson.ts';
import { startPostgres } from '../tests/helpers/postgres.ts';
import { freeLowPorts } from '../tests/helpers/ports.ts';
import { spawnDossier } from '../tests/helpers/processes.ts';
import { serverPorts } from '../src/dev/temporalServer.ts';
import { startProduct, sustained, sustainedOn } from './breakdown.ts';
import { benchEnv, freePort, ms } from './lib.ts';

const CALLERS = 8;
const SECONDS = 15;

async function connectTo(url: string, token: string): Promise<Client> {
  const client = new Client({ name: 'dossier-bench', version: '1' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(url), {
      requestInit: { headers: { Authorization: `Bearer ${token}` } },
    }),
  );
  return client;
}

async function onCluster(postgresUrl: string, round: number) {
  const frontend = await freeLowPorts(
    Object.values(serverPorts(10_000))
      .flat()
      .map((p) => p - 10_000),
  );
  const env = await benchEnv({
    DOSSIER_TEMPORAL_PORT: String(frontend),
    DOSSIER_PORT: String(await freeLowPorts([0, 1])),
    DOSSIER_NAMESPACE: `bench${round}`,
  });
  const cluster = await spawnDossier(
    ['cluster', 'up', '--postgres', postgresUrl],
    env,
    'dossier cluster is ready',
  );
  try {
    const info = JSON.parse(
      readFileSync(path.join(env.DOSSIER_HOME!, 'cluster.json'), 'utf8'),
    ) as ClusterJson;
    // Callers spread over the gateways, as a load balancer would; sustainedOn closes them at the end.
    const callers = (n: number) =>
      Promise.all(
        Array.from({ length: n }, (_, i) => connectTo(info.mcp_urls[i % info.mcp_urls.length]!, info.token)),
      );
    await sustainedOn(await callers(2), 3, `warm-${round}`);
    return await sustainedOn(await callers(CALLERS), SECONDS, `load-${round}`);
  } finally {
    await cluster.kill('SIGINT');
  }
}

async function onEmbedded(round: number) {
  const stack = await startProduct();
  try {
    await sustained(stack, 2, 3, `warm-${round}`);
    return await sustained(stack, CALLERS, SECONDS, `load-${round}`);
  } finally {
    await stack.stop();
  }
}

/** `npm run bench -- cluster`. */
export async function benchCluster(): Promise<string[]> {
  // Durable like a real deployment (fsync on), as the embedded stack's SQLite is.
  const postgres = await startPostgres(await freePort(), true);
  const rows = [
    `| ${CALLERS} callers for ${SECONDS} s, /usr/bin/true | launches/s | p50 | p99 |`,
    '|---|---|---|---|',
  ];
  try {
    for (const round of [1, 2]) {
      const embedded = await onEmbedded(round);
      rows.push(
        `| embedded (\`npm start\`: dev server on SQLite, one process), round ${round} | ${embedded.rate.toFixed(1)} | ${ms(embedded.p50)} | ${ms(embedded.p99)} |`,
      );
      const cluster = await onCluster(postgres.url, round);
      rows.push(
        `| cluster (\`cluster up\`: Temporal 1.29.1 on PostgreSQL, 2 gateways, 3 workers), round ${round} | ${cluster.rate.toFixed(1)} | ${ms(cluster.p50)} | ${ms(cluster.p99)} |`,
      );
      rows.push(
        `| ratio cluster / embedded, round ${round} | ${(cluster.rate / embedded.rate).toFixed(2)} | | |`,
      );
    }
  } finally {
    await postgres.stop();
  }
  return rows;
}
