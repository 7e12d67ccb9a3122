// Analysis databases as content-addressed files under DOSSIER_HOME/analysis
// (0444 in a 0700 folder no sandboxed program sees), proven against their
// digest the first time a process opens one.
import { createHash, randomUUID } from 'node:crypto';
import { createReadStream, existsSync, statSync } from 'node:fs';
import { chmod, mkdir, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { DossierError } from '../domain/errors.ts';
import { AnalysisDatabase } from './database.ts';

export function analysisDir(home: string): string {
  return path.join(home, 'analysis');
}

/** A fresh path to build a database at, in the analysis folder's scratch space. */
export async function scratchFile(home: string): Promise<string> {
  const dir = path.join(analysisDir(home), 'tmp');
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await chmod(analysisDir(home), 0o700);
  return path.join(dir, `${randomUUID()}.sqlite`);
}

async function sha256Of(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/** Moves a finished database into the content-addressed folder; returns where it lives and its digest. */
export async function keepDatabase(home: string, built: string) {
  const hex = await sha256Of(built);
  const file = path.join(analysisDir(home), 'sha256', hex.slice(0, 2), `${hex}.sqlite`);
  await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  if (existsSync(file)) await rm(built, { force: true });
  else {
    await chmod(built, 0o444);
    await rename(built, file);
  }
  return { file, digest: `sha256:${hex}`, bytes: statSync(file).size };
}

const opened = new Map<string, AnalysisDatabase>();

/** Opens a database read-only, proving its bytes the first time this process opens it. */
export async function openDatabase(file: string, digest: string): Promise<AnalysisDatabase> {
  const cached = opened.get(digest);
  if (cached) return cached;
  const actual = existsSync(file) ? `sha256:${await sha256Of(file)}` : 'missing';
  if (actual !== digest) {
    throw new DossierError(
      'integrity_error',
      `The analysis database ${digest} is ${actual === 'missing' ? 'missing' : 'changed'} on this worker.`,
      'Report it to an admin; the database is built again once its record is cleared.',
      { digest, actual },
    );
  }
  const db = new AnalysisDatabase(file);
  opened.set(digest, db);
  return db;
}
