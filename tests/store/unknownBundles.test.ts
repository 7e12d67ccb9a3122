// Residual unknowns as bundles carry them, on both backends: an export picks
// the unknowns naming its Evidence or belonging to its investigation, with
// every revision; an import takes what the store lacks, moves an unknown
// forward only along its own history, keeps what is ahead, and reports a
// history that went apart instead of overwriting it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Store } from '../../src/store/store.ts';
import type { BundledUnknown } from '../../src/store/unknownBundles.ts';
import { BACKENDS, freshStore } from '../helpers/backends.ts';

const team = 't';
const tooMany = () => new Error('too many unknowns');

describe.each(BACKENDS)('unknowns in bundles on %s', (backend) => {
  let here: Store;
  let there: Store;
  const closers: (() => Promise<void>)[] = [];

  beforeAll(async () => {
    for (const target of [0, 1]) {
      const opened = await freshStore(backend);
      closers.push(opened.close);
      if (target === 0) here = opened.store;
      else there = opened.store;
    }
  });
  afterAll(async () => {
    await Promise.all(closers.map((c) => c()));
  });

  const bundle = (store: Store) => store.unknowns.forBundle(team, new Set(['ev_a']), 'inv', 100, tooMany);
  const importInto = async (store: Store, unknowns: BundledUnknown[]) =>
    (await store.evidence.importAll(team, [], (tx) => store.unknowns.importIn(tx, team, unknowns))).then!;

  it('exports the unknowns naming the Evidence or of the investigation, each with its revisions', async () => {
    await here.unknowns.record(team, 'alice', { unknown_id: 'u1', question: 'q1', scope: 's' }, null, [
      'ev_a',
    ]);
    await here.unknowns.update(team, 'u1', 1, { status: 'resolved', note: 'settled' }, 'bob');
    await here.unknowns.record(team, 'alice', { unknown_id: 'u2', question: 'q2', scope: 's' }, 'inv', []);
    await here.unknowns.record(team, 'alice', { unknown_id: 'u3', question: 'q3', scope: 's' }, 'other', [
      'ev_z',
    ]);
    await here.unknowns.record('rival', 'mallory', { unknown_id: 'u4', question: 'q4', scope: 's' }, 'inv', [
      'ev_a',
    ]);
    const carried = await bundle(here);
    expect(carried.map((u) => u.unknown_id)).toEqual(['u1', 'u2']);
    expect(carried[0]).toMatchObject({
      status: 'resolved',
      revision: 2,
      note: 'settled',
      created_by: 'alice',
    });
    expect(carried[0]!.revisions.map((r) => [r.revision, r.status, r.changed_by])).toEqual([
      [1, 'open', 'alice'],
      [2, 'resolved', 'bob'],
    ]);
    await expect(here.unknowns.forBundle(team, new Set(['ev_a']), 'inv', 1, tooMany)).rejects.toThrow(
      'too many unknowns',
    );
  });

  it('imports what the store lacks, and the same bundle again changes nothing', async () => {
    const carried = await bundle(here);
    expect(await importInto(there, carried)).toEqual({
      imported: 2,
      updated: 0,
      already_present: 0,
      conflicts: [],
    });
    expect(await there.unknowns.get(team, 'u1')).toMatchObject({ status: 'resolved', revision: 2 });
    expect((await bundle(there)).map((u) => u.revisions.length)).toEqual([2, 1]);
    expect(await importInto(there, carried)).toMatchObject({ imported: 0, updated: 0, already_present: 2 });
  });

  it('moves an unknown forward along its own history, keeps one that is ahead, and reports one that went apart', async () => {
    // The other store moves u2 on; an older bundle of it is behind, not a conflict.
    const older = await bundle(here);
    await there.unknowns.update(team, 'u2', 1, { status: 'resolved' }, 'carol');
    expect(await importInto(there, older)).toMatchObject({ updated: 0, already_present: 2, conflicts: [] });
    expect(await there.unknowns.get(team, 'u2')).toMatchObject({ status: 'resolved', revision: 2 });
    // This store moves u2 on too: the bundle's revision 1 is the other store's, so it goes forward there.
    const ahead = await bundle(there);
    expect(await importInto(here, ahead)).toMatchObject({ updated: 1, conflicts: [] });
    expect(await here.unknowns.get(team, 'u2')).toMatchObject({
      status: 'resolved',
      revision: 2,
      updated_by: 'carol',
    });
    // Both stores change u1 differently from revision 2: neither overwrites the other.
    await here.unknowns.update(team, 'u1', 2, { status: 'superseded' }, 'alice');
    await there.unknowns.update(team, 'u1', 2, { status: 'open', note: 'reopened' }, 'carol');
    expect(await importInto(there, await bundle(here))).toMatchObject({ updated: 0, conflicts: ['u1'] });
    expect(await there.unknowns.get(team, 'u1')).toMatchObject({ status: 'open', note: 'reopened' });
  });
});
