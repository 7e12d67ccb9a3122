// The team bound on a worker's disk over a real store and real folders: two
// workers sharing one disk that finish launches at once reclaim the team's
// oldest folders and no others, and the hourly sweep keeps the count true.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { TeamDisk } from '../../src/activities/workspaces/teamDisk.ts';
import { openStore, type Store } from '../../src/store/store.ts';
import { BACKENDS, freshStoreLocation } from '../helpers/backends.ts';

const MiB = 1024 * 1024;

describe.each(BACKENDS)('the team bound on %s', (backend) => {
  let home: string;
  let stores: Store[];
  let cleanup: () => void;
  let disks: TeamDisk[];
  beforeEach(async () => {
    home = mkdtempSync(path.join(os.tmpdir(), 'dossier-team-disk-'));
    const fresh = await freshStoreLocation(backend);
    cleanup = fresh.cleanup;
    // Two workers on one host: each its own store connection, one DOSSIER_HOME.
    stores = [await openStore(fresh.location), await openStore(fresh.location)];
    disks = stores.map(
      (store) => new TeamDisk({ store, home, boundBytes: 3.5 * MiB, retentionMs: 3_600_000 }),
    );
  });
  afterEach(async () => {
    for (const s of stores) await s.close();
    cleanup();
    rmSync(home, { recursive: true, force: true });
  });

  /** A finished launch's workspace holding `mib` MiB. */
  const workspace = (name: string, mib: number) => {
    const ws = path.join(home, 'workspaces', name, 'attempt');
    mkdirSync(ws, { recursive: true });
    writeFileSync(path.join(ws, 'blob'), Buffer.alloc(mib * MiB, 1));
    return ws;
  };
  const homeId = () => readFileSync(path.join(home, 'home-id'), 'utf8');

  it("finishing at once, they reclaim only the team's oldest, until it is back under the bound", async () => {
    const other = workspace('b-1', 2);
    await disks[0]!.retain('b', 'launch/b/p/1', other);
    const old = ['a-1', 'a-2', 'a-3'].map((n) => workspace(n, 1));
    for (const [i, ws] of old.entries()) await disks[0]!.retain('a', `launch/a/p/${i}`, ws);
    expect(old.every((ws) => existsSync(ws))).toBe(true);

    const fresh = ['a-4', 'a-5', 'a-6', 'a-7'].map((n) => workspace(n, 1));
    await Promise.all(fresh.map((ws, i) => disks[i % 2]!.retain('a', `launch/a/p/${i + 3}`, ws)));
    const all = [...old, ...fresh];
    const kept = all.map((ws) => existsSync(ws));
    // The oldest went first: the three retained one after another went in their order, and before
    // any of the four retained at once (whose order among themselves is the order their rows got).
    const keptOld = kept.slice(0, old.length);
    const firstKept = keptOld.indexOf(true);
    if (firstKept >= 0) {
      expect(keptOld.slice(firstKept).every(Boolean)).toBe(true);
      expect(kept.slice(old.length).every(Boolean)).toBe(true);
    }
    expect(kept.filter(Boolean).length).toBeGreaterThanOrEqual(2);
    expect(kept.filter(Boolean).length).toBeLessThanOrEqual(3);
    expect(existsSync(other)).toBe(true);

    // What is counted is what is on disk.
    const held = await stores[0]!.retained.held(homeId(), 'workspace');
    expect(held.map((f) => f.path).sort()).toEqual([other, ...all.filter((ws) => existsSync(ws))].sort());
    expect(await stores[0]!.retained.total(homeId(), 'a')).toBeLessThanOrEqual(3.5 * MiB);
  });

  it('the sweep forgets folders that are gone and finishes a reclaim a dead worker began', async () => {
    const ws = workspace('a-1', 1);
    await disks[0]!.retain('a', 'launch/a/p/1', ws);
    const output = path.join(home, 'extractions', 'a', 'x', 'attempt');
    mkdirSync(output, { recursive: true });
    writeFileSync(path.join(output, 'entry'), Buffer.alloc(MiB, 2));
    await disks[0]!.retain('a', 'launch/a/p/2', path.join(home, 'workspaces', 'x', 'attempt'));
    expect((await stores[0]!.retained.held(homeId(), 'output')).map((f) => f.path)).toEqual([output]);

    // The retention sweep removed the first workspace; a worker claimed the output and died.
    rmSync(ws, { recursive: true });
    expect(await stores[0]!.retained.claim(homeId(), output, new Date().toISOString())).toBe(true);
    await disks[1]!.sweep();
    expect(existsSync(output)).toBe(false);
    expect((await stores[0]!.retained.held(homeId(), 'workspace')).map((f) => f.path)).not.toContain(ws);
    expect(await stores[0]!.retained.reclaimed('a', [output])).toMatchObject({ path: output });
    expect(await stores[0]!.retained.reclaimed('b', [output])).toBeUndefined();
  });
});
