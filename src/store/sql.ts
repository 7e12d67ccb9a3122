// One small SQL surface over both backends, so the store is written once.
// Statements use `?` placeholders; the PostgreSQL driver numbers them.
import Database from 'better-sqlite3';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { statementKind, storeSeconds } from '../metrics/metrics.ts';

/** Runs one statement, timing it for dossier_store_query_seconds. */
async function timed<T>(backend: 'sqlite' | 'postgres', sql: string, fn: () => T | Promise<T>): Promise<T> {
  const end = storeSeconds.startTimer({ backend, kind: statementKind(sql) });
  try {
    return await fn();
  } finally {
    end();
  }
}

export interface SqlExecutor {
  all<T = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<T[]>;
  get<T = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<T | undefined>;
  run(sql: string, params?: unknown[]): Promise<{ changes: number }>;
}

export interface SqlDriver extends SqlExecutor {
  readonly dialect: 'sqlite' | 'postgres';
  /** Runs `fn` in one transaction; nothing else on this driver interleaves with it. */
  transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T>;
  /** Runs several statements (migrations) under a lock that other processes respect. */
  migrate(fn: (tx: SqlExecutor & { exec(sql: string): Promise<void> }) => Promise<void>): Promise<void>;
  close(): Promise<void>;
}

/** SQLite through better-sqlite3: synchronous calls, serialized by an async lock. */
export class SqliteDriver implements SqlDriver {
  readonly dialect = 'sqlite' as const;
  private readonly db: Database.Database;
  private readonly statements = new Map<string, Database.Statement>();
  private queue: Promise<unknown> = Promise.resolve();

  constructor(file: string) {
    mkdirSync(path.dirname(file), { recursive: true });
    this.db = new Database(file);
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('busy_timeout = 10000');
    this.db.pragma('synchronous = NORMAL');
    this.db.pragma('foreign_keys = ON');
  }

  private statement(sql: string): Database.Statement {
    let s = this.statements.get(sql);
    if (!s) {
      s = this.db.prepare(sql);
      this.statements.set(sql, s);
    }
    return s;
  }

  private readonly direct: SqlExecutor = {
    all: <T>(sql: string, params: unknown[] = []) =>
      timed('sqlite', sql, () => this.statement(sql).all(...params) as T[]),
    get: <T>(sql: string, params: unknown[] = []) =>
      timed('sqlite', sql, () => this.statement(sql).get(...params) as T | undefined),
    run: (sql: string, params: unknown[] = []) =>
      timed('sqlite', sql, () => ({ changes: this.statement(sql).run(...params).changes })),
  };

  private locked<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.queue.then(fn, fn);
    this.queue = next.catch(() => undefined);
    return next;
  }

  all<T>(sql: string, params?: unknown[]) {
    return this.locked(() => this.direct.all<T>(sql, params));
  }
  get<T>(sql: string, params?: unknown[]) {
    return this.locked(() => this.direct.get<T>(sql, params));
  }
  run(sql: string, params?: unknown[]) {
    return this.locked(() => this.direct.run(sql, params));
  }

  transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    return this.locked(async () => {
      this.db.exec('BEGIN IMMEDIATE');
      try {
        const result = await fn(this.direct);
        this.db.exec('COMMIT');
        return result;
      } catch (err) {
        this.db.exec('ROLLBACK');
        throw err;
      }
    });
  }

  migrate(fn: (tx: SqlExecutor & { exec(sql: string): Promise<void> }) => Promise<void>) {
    return this.transaction((tx) => fn({ ...tx, exec: async (sql) => void this.db.exec(sql) }));
  }

  async close() {
    await this.queue;
    this.db.close();
  }
}

const numbered = (sql: string) => {
  let n = 0;
  return sql.replace(/\?/g, () => `$${++n}`);
};

/** PostgreSQL through a pg pool. */
export class PostgresDriver implements SqlDriver {
  readonly dialect = 'postgres' as const;
  private readonly pool: pg.Pool;

  constructor(url: string, max = 10) {
    this.pool = new pg.Pool({ connectionString: url, max });
    this.pool.on('error', () => undefined); // an idle client's broken connection is replaced on next use
  }

  private executor(client: pg.Pool | pg.PoolClient): SqlExecutor {
    const query = (sql: string, params: unknown[]) =>
      timed('postgres', sql, () => client.query(numbered(sql), params));
    return {
      all: async <T>(sql: string, params: unknown[] = []) => (await query(sql, params)).rows as T[],
      get: async <T>(sql: string, params: unknown[] = []) =>
        (await query(sql, params)).rows[0] as T | undefined,
      run: async (sql: string, params: unknown[] = []) => ({
        changes: (await query(sql, params)).rowCount ?? 0,
      }),
    };
  }

  all<T>(sql: string, params?: unknown[]) {
    return this.executor(this.pool).all<T>(sql, params);
  }
  get<T>(sql: string, params?: unknown[]) {
    return this.executor(this.pool).get<T>(sql, params);
  }
  run(sql: string, params?: unknown[]) {
    return this.executor(this.pool).run(sql, params);
  }

  async transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    try {
      await client.query('BEGIN');
      const result = await fn(this.executor(client));
      await client.query('COMMIT');
      return result;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      client.release();
    }
  }

  async migrate(fn: (tx: SqlExecutor & { exec(sql: string): Promise<void> }) => Promise<void>) {
    await this.transaction(async (tx) => {
      // Serializes concurrent starts of gateways and workers on one database.
      await tx.run('SELECT pg_advisory_xact_lock(7400)');
      await fn({ ...tx, exec: async (sql) => void (await tx.run(sql)) });
    });
  }

  async close() {
    await this.pool.end();
  }
}
