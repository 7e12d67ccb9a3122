// Sandbox uid leases on a real folder: one holder per uid, and a dead holder's lease taken back.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { IdentityPool } from './identities.ts';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
/** A pool of exactly one uid, 5000, and its lease folder. */
function onlyUid() {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'dossier-leases-'));
  dirs.push(dir);
  return { pool: new IdentityPool({ first: 5000, last: 5000 }, dir), lease: path.join(dir, '5000') };
}
const exhausted = { code: 'resource_constraint' };

describe('sandbox uid leases', () => {
  it('hand a uid to one holder at a time, named by its pid and start time, and take it back on release', () => {
    const { pool, lease } = onlyUid();
    const held = pool.acquire();
    expect(held.uid).toBe(5000);
    expect(readFileSync(lease, 'utf8')).toMatch(new RegExp(`^${process.pid} \\d+\\n$`));
    expect(() => new IdentityPool({ first: 5000, last: 5000 }, path.dirname(lease)).acquire()).toThrow(
      expect.objectContaining(exhausted),
    );
    held.release();
    expect(pool.acquire().uid).toBe(5000);
  });

  it('take back the lease of a holder that is gone, or whose pid another process now has', () => {
    const gone = spawnSync('/bin/true').pid!;
    for (const holder of [`${gone} 1`, `${gone}`, `${process.pid} 1`]) {
      const { pool, lease } = onlyUid();
      writeFileSync(lease, `${holder}\n`);
      expect(pool.acquire().uid, holder).toBe(5000);
    }
  });

  it('leave the lease of a live holder alone, in either form', () => {
    const started = readFileSync(lease0(), 'utf8');
    for (const holder of [started.trim(), `${process.pid}`]) {
      const { pool, lease } = onlyUid();
      writeFileSync(lease, `${holder}\n`);
      expect(() => pool.acquire(), holder).toThrow(expect.objectContaining(exhausted));
    }
  });
});

/** A lease this process writes, as a live holder's. */
function lease0(): string {
  const { pool, lease } = onlyUid();
  pool.acquire();
  return lease;
}
