// The PostgreSQL of `dossier cluster up`: Debian's, started for the cluster
// (or an existing server the operator names), with the databases of
// Temporal, its visibility store and dossier's store made on it.
import { createHash } from 'node:crypto';
import path from 'node:path';
import type { Config } from '../config.ts';
import { startLocalPostgres, type LocalPostgres } from './postgres.ts';
import { visibilityDatabase, type PostgresTarget } from './temporalServer.ts';

/** Things started so far, stopped in reverse order. */
export type Stoppers = (() => Promise<void>)[];

/** Where the cluster's own PostgreSQL keeps its data: the `postgres` user must reach it when dossier runs as root. */
function postgresDir(config: Config): string {
  if (process.getuid?.() !== 0) return path.join(config.home, 'cluster', 'postgres');
  const tag = createHash('sha256').update(path.resolve(config.home)).digest('hex').slice(0, 12);
  return path.join('/var/lib/postgresql', `dossier-${tag}`);
}

async function databasesOn(url: string, names: string[]): Promise<void> {
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    for (const name of names) {
      const found = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
      if (found.rowCount === 0) await client.query(`CREATE DATABASE "${name}"`);
    }
  } finally {
    await client.end();
  }
}

function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

/** The cluster's PostgreSQL (its own, or `postgresUrl`) with Temporal's and the store's databases on it. */
export async function clusterDatabases(
  config: Config,
  opts: { postgresUrl?: string; postgresPort?: number },
  stoppers: Stoppers,
) {
  let postgres: LocalPostgres | undefined;
  let superuserUrl = opts.postgresUrl;
  if (!superuserUrl) {
    postgres = await startLocalPostgres({
      dir: postgresDir(config),
      port: opts.postgresPort ?? 7432,
      maxConnections: 300,
    });
    stoppers.push(() => postgres!.stop());
    superuserUrl = postgres.url;
  }
  const base = new URL(superuserUrl);
  const temporalDb = `${config.namespace.replace(/[^a-z0-9_]/g, '_')}_temporal`;
  const pgTarget: PostgresTarget = {
    host: base.hostname,
    port: Number(base.port || 5432),
    user: decodeURIComponent(base.username),
    password: decodeURIComponent(base.password),
    database: temporalDb,
  };
  const storeDb = `${config.namespace.replace(/[^a-z0-9_]/g, '_')}_store`;
  await databasesOn(superuserUrl, [temporalDb, visibilityDatabase(pgTarget), storeDb]);
  return { pgTarget, storeUrl: withDatabase(superuserUrl, storeDb) };
}
