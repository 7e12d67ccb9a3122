// Opens the configured store: a SQLite file path, or a postgres:// URL.
import { PostgresDriver, SqliteDriver } from './sql.ts';
import { SqlStore } from './sqlStore.ts';
import type { EvidenceStore } from './store.ts';

export function isPostgresUrl(location: string): boolean {
  return /^postgres(ql)?:\/\//.test(location);
}

export async function openStore(location: string): Promise<EvidenceStore> {
  return SqlStore.open(isPostgresUrl(location) ? new PostgresDriver(location) : new SqliteDriver(location));
}
