// A PostgreSQL server from Debian's binaries, owned by the process that starts
// it: initdb into a folder (once), pg_ctl start on a loopback port, stopped on
// demand. As root it runs as the `postgres` user, since PostgreSQL refuses to
// run as root. The process-level cluster keeps Temporal's and dossier's
// databases here; the tests start a throwaway one.
import { execFile } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';

const run = promisify(execFile);

export interface LocalPostgres {
  /** The superuser's URL on the `postgres` database. */
  url: string;
  host: string;
  port: number;
  user: string;
  /** The URL of database `name`, made if it does not exist yet. */
  database(name: string): Promise<string>;
  stop(): Promise<void>;
}

export interface LocalPostgresOptions {
  /** Holds `data/`, the socket and `log`; made if missing. */
  dir: string;
  port: number;
  /** Default 127.0.0.1. */
  host?: string;
  /** `false` (tests) trades crash safety for speed. Default true. */
  durable?: boolean;
  maxConnections?: number;
}

export function postgresBinDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.DOSSIER_PG_BIN) return env.DOSSIER_PG_BIN;
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root) ? readdirSync(root).sort((a, b) => Number(b) - Number(a)) : [];
  for (const v of versions)
    if (existsSync(path.join(root, v, 'bin', 'pg_ctl'))) return path.join(root, v, 'bin');
  throw new Error(
    'PostgreSQL server binaries not found: run `bash scripts/system-packages.sh test` as root (or apt-get install postgresql), or set DOSSIER_PG_BIN',
  );
}

const USER = 'dossier';

export async function startLocalPostgres(opts: LocalPostgresOptions): Promise<LocalPostgres> {
  const bin = postgresBinDir();
  const host = opts.host ?? '127.0.0.1';
  const data = path.join(opts.dir, 'data');
  const asRoot = process.getuid?.() === 0;
  const pgTool = async (cmd: string, args: string[]) => {
    try {
      await run(
        asRoot ? 'runuser' : path.join(bin, cmd),
        asRoot ? ['-u', 'postgres', '--', path.join(bin, cmd), ...args] : args,
      );
    } catch (err) {
      const e = err as { stderr?: string; message: string };
      throw new Error(`PostgreSQL ${cmd} failed: ${(e.stderr || e.message).trim()}`);
    }
  };
  mkdirSync(opts.dir, { recursive: true, mode: 0o700 });
  if (asRoot) {
    const id = async (flag: string) => Number((await run('id', [flag, 'postgres'])).stdout.trim());
    chownSync(opts.dir, await id('-u'), await id('-g'));
  }
  if (!existsSync(path.join(data, 'PG_VERSION'))) {
    await pgTool('initdb', [
      '-D',
      data,
      '-A',
      'trust',
      '-U',
      USER,
      '-E',
      'UTF8',
      ...(opts.durable === false ? ['--no-sync'] : []),
    ]);
  }
  const settings = [
    `-p ${opts.port}`,
    `-k ${opts.dir}`,
    `-c listen_addresses=${host}`,
    `-c max_connections=${opts.maxConnections ?? 200}`,
    ...(opts.durable === false ? ['-c fsync=off', '-c synchronous_commit=off'] : []),
  ].join(' ');
  await pgTool('pg_ctl', ['-D', data, '-l', path.join(opts.dir, 'log'), '-w', '-o', settings, 'start']);
  const urlOf = (db: string) => `postgres://${USER}@${host}:${opts.port}/${db}`;
  let stopped = false;
  return {
    url: urlOf('postgres'),
    host,
    port: opts.port,
    user: USER,
    async database(name: string) {
      if (!/^[a-z0-9_-]{1,63}$/.test(name)) throw new Error(`not a database name: ${name}`);
      const client = new pg.Client({ connectionString: urlOf('postgres') });
      await client.connect();
      try {
        const found = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
        if (found.rowCount === 0) await client.query(`CREATE DATABASE "${name}"`);
      } finally {
        await client.end();
      }
      return urlOf(name);
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      // `fast`: disconnect clients and write a checkpoint, so the next start needs no recovery.
      await pgTool('pg_ctl', ['-D', data, '-m', opts.durable === false ? 'immediate' : 'fast', 'stop']);
    },
  };
}
