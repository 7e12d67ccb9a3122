// Opens a fresh, real store on either backend: a SQLite file in a temp folder,
// or a new database on the run's PostgreSQL cluster.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { inject } from 'vitest';
import { openStore } from '../../src/store/store.ts';
import type { Store } from '../../src/store/store.ts';

export const BACKENDS = ['sqlite', 'postgres'] as const;
export type Backend = (typeof BACKENDS)[number];

export async function freshStoreLocation(backend: Backend): Promise<{ location: string; cleanup(): void }> {
  if (backend === 'sqlite') {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'dossier-store-'));
    return {
      location: path.join(dir, 'dossier.db'),
      cleanup: () => rmSync(dir, { recursive: true, force: true }),
    };
  }
  const base = inject('postgresUrl');
  const name = `t_${randomUUID().replace(/-/g, '').slice(0, 16)}`;
  const client = new pg.Client({ connectionString: base });
  await client.connect();
  await client.query(`CREATE DATABASE ${name}`);
  await client.end();
  return { location: base.replace(/\/[^/]*$/, `/${name}`), cleanup: () => undefined };
}

export async function freshStore(
  backend: Backend,
): Promise<{ store: Store; location: string; close(): Promise<void> }> {
  const { location, cleanup } = await freshStoreLocation(backend);
  const store = await openStore(location);
  return {
    store,
    location,
    async close() {
      await store.close();
      cleanup();
    },
  };
}
