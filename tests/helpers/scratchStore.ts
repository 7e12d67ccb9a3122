// A real store (a SQLite file) in a scratch folder for one test file: opened
// before its tests, closed and removed after them.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { openStore, type Store } from '../../src/store/store.ts';

export function scratchStore(prefix: string): { readonly store: Store; readonly file: string } {
  let dir = '';
  let store: Store | undefined;
  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), `dossier-${prefix}-`));
    store = await openStore(path.join(dir, 'store.db'));
  });
  afterAll(async () => {
    await store?.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return {
    get store() {
      return store!;
    },
    get file() {
      return path.join(dir, 'store.db');
    },
  };
}
