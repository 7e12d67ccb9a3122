// Folders a test file writes into, removed once its tests are done, so a run
// of npm test leaves nothing behind in the temporary folder.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll } from 'vitest';

/**
 * A new folder `dossier-<name>-…` in the temporary folder, removed after the
 * tests of the file (or the describe block) that asked for it. Call it while
 * tests are collected: at a file's top level or in a describe block.
 */
export function scratchDir(name: string): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), `dossier-${name}-`));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}
