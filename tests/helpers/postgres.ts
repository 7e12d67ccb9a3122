// A throwaway PostgreSQL server for the test run: Debian's binaries through
// the product's own starter, in a temp folder, without fsync; removed at the end.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startLocalPostgres } from '../../src/dev/postgres.ts';

export interface Postgres {
  url: string;
  stop(): Promise<void>;
}

/** `durable: false` (tests) trades crash safety for speed; benchmarks keep PostgreSQL's defaults. */
export async function startPostgres(port: number, durable = false): Promise<Postgres> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'dossier-pg-'));
  const pg = await startLocalPostgres({ dir, port, durable });
  return {
    url: pg.url,
    async stop() {
      try {
        await pg.stop();
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}
