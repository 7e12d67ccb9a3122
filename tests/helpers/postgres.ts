// A throwaway PostgreSQL cluster from Debian's binaries: initdb into a temp
// folder, pg_ctl start on a free port, stopped and removed at the end. As root
// it runs as the `postgres` user, since PostgreSQL refuses to run as root.
import { execFileSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';

export interface Postgres {
  url: string;
  /** A fresh, empty database on this cluster. */
  createDatabase(name: string): Promise<string>;
  stop(): void;
}

function binDir(): string {
  if (process.env.DOSSIER_PG_BIN) return process.env.DOSSIER_PG_BIN;
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root) ? readdirSync(root).sort((a, b) => Number(b) - Number(a)) : [];
  for (const v of versions)
    if (existsSync(path.join(root, v, 'bin', 'pg_ctl'))) return path.join(root, v, 'bin');
  throw new Error('PostgreSQL server binaries not found: apt-get install postgresql (or set DOSSIER_PG_BIN)');
}

/** `durable: false` (tests) trades crash safety for speed; benchmarks keep PostgreSQL's defaults. */
export async function startPostgres(port: number, durable = false): Promise<Postgres> {
  const bin = binDir();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'dossier-pg-'));
  const data = path.join(dir, 'data');
  const asRoot = process.getuid?.() === 0;
  const run = (cmd: string, args: string[]) =>
    execFileSync(
      asRoot ? 'runuser' : path.join(bin, cmd),
      asRoot ? ['-u', 'postgres', '--', path.join(bin, cmd), ...args] : args,
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
  if (asRoot) {
    const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres']).toString().trim());
    chownSync(dir, id('-u'), id('-g'));
  }
  run('initdb', ['-D', data, '-A', 'trust', '-U', 'dossier', '--no-sync', '-E', 'UTF8']);
  run('pg_ctl', [
    '-D',
    data,
    '-l',
    path.join(dir, 'log'),
    '-w',
    '-o',
    `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c max_connections=200` +
      (durable ? '' : ' -c fsync=off -c synchronous_commit=off'),
    'start',
  ]);
  const url = `postgres://dossier@127.0.0.1:${port}/postgres`;
  return {
    url,
    async createDatabase(name: string) {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        await client.query(`CREATE DATABASE "${name}"`);
      } finally {
        await client.end();
      }
      return `postgres://dossier@127.0.0.1:${port}/${name}`;
    },
    stop() {
      try {
        run('pg_ctl', ['-D', data, '-m', 'immediate', 'stop']);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}
