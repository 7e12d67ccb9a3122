// Analysis databases as content-addressed files under DOSSIER_HOME/analysis
// (0444 in a 0700 folder no sandboxed program sees), proven against their
// digest the first time a process opens one. On a store that hosts share, the
// builder publishes a database and a host that lacks it fetches it by digest.
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

/** Where this host keeps the database of `digest`. */
export function databaseFile(home: string, digest: string): string {
  const hex = digest.replace(/^sha256:/, '');
  if (!/^[0-9a-f]{64}$/.test(hex)) throw new Error(`not a database digest: ${digest}`);
  return path.join(analysisDir(home), 'sha256', hex.slice(0, 2), `${hex}.sqlite`);
}

/** The store's shared bytes (another host built the database), read by digest. */
export interface SharedDatabases {
  /** Writes the blob into a new file; the sha256 hex of what it wrote, or undefined if there is none. */
  copyTo(digest: string, file: string): Promise<string | undefined>;
}

/** Moves a finished database into the content-addressed folder; returns where it lives and its digest. */
export async function keepDatabase(home: string, built: string) {
  const hex = await sha256Of(built);
  const file = databaseFile(home, `sha256:${hex}`);
  await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  if (existsSync(file)) await rm(built, { force: true });
  else {
    await chmod(built, 0o444);
    await rename(built, file);
  }
  return { file, digest: `sha256:${hex}`, bytes: statSync(file).size };
}

const opened = new Map<string, AnalysisDatabase>();

/** Brings a database another host built from the store into this host's folder; nothing if the store has none. */
async function fetchDatabase(home: string, digest: string, shared: SharedDatabases, file: string) {
  const scratch = await scratchFile(home);
  try {
    // Proven below like any database a process opens: a changed blob is refused there.
    if ((await shared.copyTo(digest, scratch)) === undefined) return;
    await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
    await chmod(scratch, 0o444);
    await rename(scratch, file);
  } finally {
    await rm(scratch, { force: true });
  }
}

/**
 * Opens the database of `digest` read-only, proving its bytes the first time
 * this process opens it; fetched from `shared` first when this host has none.
 */
export async function openDatabase(
  home: string,
  digest: string,
  shared?: SharedDatabases,
): Promise<AnalysisDatabase> {
  const cached = opened.get(digest);
  if (cached) return cached;
  const file = databaseFile(home, digest);
  if (shared && !existsSync(file)) await fetchDatabase(home, digest, shared, file);
  const actual = existsSync(file) ? `sha256:${await sha256Of(file)}` : 'missing';
  if (actual !== digest) {
    // A fetched copy that does not prove out is not kept.
    if (shared && actual !== 'missing') await rm(file, { force: true });
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
