// A PostgreSQL server from Debian's binaries, owned by the process that starts
// it: initdb into a folder (once), then `postgres` in the foreground on a
// loopback port, under the parent-death signal like every server dossier
// owns, so it never outlives its owner (a leftover would hold the data folder
// and fail the next start). As root it runs as the `postgres` user, since
// PostgreSQL refuses to run as root. The process-level cluster keeps
// Temporal's and dossier's databases here; the tests start a throwaway one.
import { execFile } from 'node:child_process';
import { startOwned, type OwnedProcess } from './owned.ts';
import { randomBytes } from 'node:crypto';
import { chownSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';

const run = promisify(execFile);

export interface LocalPostgres {
  /** The superuser's URL (with its password) on the `postgres` database. */
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

/** Runs a PostgreSQL program (as the `postgres` user when dossier runs as root). */
async function pgTool(bin: string, asRoot: boolean, cmd: string, args: string[]) {
  try {
    await run(
      asRoot ? 'runuser' : path.join(bin, cmd),
      asRoot ? ['-u', 'postgres', '--', path.join(bin, cmd), ...args] : args,
    );
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`PostgreSQL ${cmd} failed: ${(e.stderr || e.message).trim()}`);
  }
}

/** Makes the data folder on first use (initdb, with its password) and returns the password. */
async function dataFolder(bin: string, opts: LocalPostgresOptions, data: string, asRoot: boolean) {
  mkdirSync(opts.dir, { recursive: true, mode: 0o700 });
  const ids = asRoot
    ? await Promise.all(
        ['-u', '-g'].map(async (flag) => Number((await run('id', [flag, 'postgres'])).stdout.trim())),
      )
    : undefined;
  if (ids) chownSync(opts.dir, ids[0]!, ids[1]!);
  // Every connection needs the password, made at initdb and kept beside the data (0600): a local
  // user, or a sandboxed program given the host's network, that reaches the port gets nothing.
  const passwordFile = path.join(opts.dir, 'password');
  if (!existsSync(path.join(data, 'PG_VERSION'))) {
    writeFileSync(passwordFile, `${randomBytes(24).toString('base64url')}\n`, { mode: 0o600 });
    if (ids) chownSync(passwordFile, ids[0]!, ids[1]!);
    await pgTool(bin, asRoot, 'initdb', [
      '-D',
      data,
      '-A',
      'scram-sha-256',
      '--pwfile',
      passwordFile,
      '-U',
      USER,
      '-E',
      'UTF8',
      ...(opts.durable === false ? ['--no-sync'] : []),
    ]);
  }
  if (!existsSync(passwordFile))
    throw new Error(
      `${data} was made without a password file (${passwordFile}); remove ${opts.dir} to start a new PostgreSQL there, or pass --postgres with the URL of a server to use.`,
    );
  return readFileSync(passwordFile, 'utf8').trim();
}

export async function startLocalPostgres(opts: LocalPostgresOptions): Promise<LocalPostgres> {
  const bin = postgresBinDir();
  const host = opts.host ?? '127.0.0.1';
  const data = path.join(opts.dir, 'data');
  const asRoot = process.getuid?.() === 0;
  const password = await dataFolder(bin, opts, data, asRoot);
  const urlOf = (db: string) =>
    `postgres://${USER}:${encodeURIComponent(password)}@${host}:${opts.port}/${db}`;
  const start = () =>
    startOwned({
      name: 'PostgreSQL',
      command: path.join(bin, 'postgres'),
      args: [
        '-D',
        data,
        '-p',
        String(opts.port),
        '-k',
        opts.dir,
        '-c',
        `listen_addresses=${host}`,
        '-c',
        `max_connections=${opts.maxConnections ?? 200}`,
        ...(opts.durable === false ? ['-c', 'fsync=off', '-c', 'synchronous_commit=off'] : []),
      ],
      logFile: path.join(opts.dir, 'log'),
      setpriv: asRoot ? ['--reuid=postgres', '--regid=postgres', '--init-groups'] : [],
      hint: `is port ${opts.port} in use, or another server running on ${data}?`,
      // SIGINT is PostgreSQL's fast shutdown (clients disconnected, a checkpoint written); SIGQUIT skips the checkpoint.
      stopSignal: opts.durable === false ? 'SIGQUIT' : 'SIGINT',
      ready: () => acceptsConnections(urlOf('postgres'), 60_000),
    });
  const proc = await startAfterLeaver(start, data);
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
      await proc.stop(30_000);
    },
  };
}

/**
 * A server that died with its owner a moment ago may still be leaving (its backends notice the
 * postmaster's death within a second or so): PostgreSQL refuses to start until it has, then
 * clears the stale lock itself. Anything else fails at once.
 */
async function startAfterLeaver(start: () => Promise<OwnedProcess>, data: string): Promise<OwnedProcess> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await start();
    } catch (err) {
      const leaving = /lock file "postmaster\.pid" already exists|shared memory block is still in use/.test(
        (err as Error).message,
      );
      if (!leaving || attempt >= 40 || postmasterAlive(data)) throw err;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}

/** Whether the postmaster named in the data folder's lock file is alive (not gone, not a zombie). */
function postmasterAlive(data: string): boolean {
  try {
    const pid = Number(readFileSync(path.join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

/** Resolves once a client can connect (after start-up and any crash recovery). */
async function acceptsConnections(url: string, timeoutMs: number) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2_000 });
    try {
      await client.connect();
      await client.end();
      return;
    } catch (err) {
      await client.end().catch(() => undefined);
      if (Date.now() > deadline)
        throw new Error(`it did not accept connections within ${timeoutMs} ms: ${err}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}
