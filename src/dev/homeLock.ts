// One embedded stack per DOSSIER_HOME. Its Temporal dev server owns
// temporal.db and the stack writes dev.json: a second stack on the same home
// would run a second server on the same database (shards claimed by both)
// and point dev.json at itself. The lock is an exclusive SQLite transaction
// on a file in the home, an fcntl lock the kernel drops when its process
// dies however it dies, so a killed stack never leaves a stale lock.
import Database from 'better-sqlite3';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { ConfigError } from '../config.ts';

/** Takes `home` for this process's stack, or refuses while another process holds it; returns the release. */
export function lockHome(home: string): () => void {
  // No busy wait: a home in use is refused at once.
  const db = new Database(path.join(home, 'stack.lock'), { timeout: 0 });
  try {
    db.pragma('locking_mode = EXCLUSIVE');
    db.exec('BEGIN EXCLUSIVE');
  } catch (err) {
    db.close();
    if ((err as { code?: string }).code !== 'SQLITE_BUSY') throw err;
    let holder = '';
    try {
      holder = ` (pid ${Number(readFileSync(path.join(home, 'stack.pid'), 'utf8'))})`;
    } catch {
      // it has not written its pid yet
    }
    throw new ConfigError(
      [
        `another dossier stack${holder} is running on DOSSIER_HOME=${home}: stop it first, or give this one its own DOSSIER_HOME`,
      ],
      'DOSSIER_HOME is in use',
    );
  }
  writeFileSync(path.join(home, 'stack.pid'), String(process.pid));
  return () => db.close();
}
