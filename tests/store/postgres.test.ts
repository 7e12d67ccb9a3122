// The PostgreSQL dossier starts (the process cluster's, and the suite's own)
// answers only with its password: a local user, or a sandboxed program given
// the host's network, that reaches its port gets nothing.
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { startLocalPostgres } from '../../src/dev/postgres.ts';
import { freePort } from '../helpers/ports.ts';

describe('the PostgreSQL dossier starts', () => {
  it('refuses a connection without its password, and keeps the password to itself', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'dossier-pgauth-'));
    const server = await startLocalPostgres({ dir, port: await freePort(), durable: false });
    try {
      const url = new URL(server.url);
      expect(url.password.length).toBeGreaterThanOrEqual(32);
      expect(statSync(path.join(dir, 'password')).mode & 0o077).toBe(0);
      url.password = '';
      const stranger = new pg.Client({ connectionString: url.toString() });
      await expect(stranger.connect()).rejects.toThrow(/password/);
      const owner = new pg.Client({ connectionString: server.url });
      await owner.connect();
      expect((await owner.query('SELECT 1 AS one')).rows[0]).toEqual({ one: 1 });
      await owner.end();
    } finally {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
