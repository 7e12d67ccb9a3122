// One step of the versioned schema (migrations.ts, migrationsKnowledge.ts).
import type { SqlExecutor } from './sql.ts';

export interface Migration {
  version: number;
  name: string;
  sql: string;
  /** Work SQL cannot do (values computed in JavaScript), in the same transaction. */
  after?: (tx: SqlExecutor) => Promise<void>;
}
