// Annotations on both backends: compare-and-swap under concurrent writers,
// history, revert and the team's log; names carried from build to build
// through diff links; histories carried by bundles merge or are kept apart.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { annotationId, type AnnotationKey } from '../../src/domain/annotations.ts';
import { effectiveAnnotations, suggestedAnnotations } from '../../src/gateway/carried.ts';
import type { Store } from '../../src/store/store.ts';
import { BACKENDS, freshStore } from '../helpers/backends.ts';

const digest = (n: number) => `sha256:${String(n).repeat(64).slice(0, 64)}`;
const [A1, A2, A3] = [digest(1), digest(2), digest(3)];
const fn = (artifact: string, item: string): AnnotationKey => ({ artifact, kind: 'function', item });
const WRITE = { origin: 'write' } as const;

describe.each(BACKENDS)('annotations on %s', (backend) => {
  let store: Store;
  let close: () => Promise<void>;
  beforeAll(async () => {
    ({ store, close } = await freshStore(backend));
  });
  afterAll(async () => {
    await close();
  });

  it('of 20 concurrent writes on one revision exactly one lands; the others learn the current revision and who changed it', async () => {
    const key = fn(A1, '0x401000');
    expect((await store.annotations.write('t', 'alice', key, 0, { name: 'start' }, WRITE)).outcome).toBe(
      'applied',
    );
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        store.annotations.write('t', `p${i}`, key, 1, { name: `name_${i}` }, WRITE),
      ),
    );
    const applied = results.filter((r) => r.outcome === 'applied');
    expect(applied).toHaveLength(1);
    for (const r of results.filter((x) => x.outcome === 'conflict')) {
      if (r.outcome !== 'conflict') continue;
      expect(r.annotation?.revision).toBe(2);
      expect(r.since).toEqual([expect.objectContaining({ revision: 2, changed: ['name'] })]);
    }
    expect((await store.annotations.get('t', key))?.revision).toBe(2);
    expect(await store.annotations.get('other', key)).toBeUndefined();
  });

  it('keeps every revision, reverts as a new one, and logs the team’s changes newest first', async () => {
    const key = fn(A1, '0x402000');
    await store.annotations.write('t', 'alice', key, 0, { name: 'a', tags: ['x', 'x', 'b'] }, WRITE);
    await store.annotations.write('t', 'bob', key, 1, { comment: 'why', name: null }, WRITE);
    const first = await store.annotations.revision('t', annotationId(key), 1);
    expect(first).toMatchObject({ name: 'a', tags: ['b', 'x'], changed: ['name', 'tags'] });
    const reverted = await store.annotations.write('t', 'carol', key, 2, first!, {
      origin: 'revert',
      revertedTo: 1,
    });
    expect(reverted).toMatchObject({
      outcome: 'applied',
      annotation: { revision: 3, name: 'a', comment: null },
    });
    const history = await store.annotations.history('t', annotationId(key), { limit: 10 });
    expect(history.map((h) => [h.revision, h.changed_by, h.origin, h.reverted_to])).toEqual([
      [3, 'carol', 'revert', 1],
      [2, 'bob', 'write', null],
      [1, 'alice', 'write', null],
    ]);
    const page = await store.annotations.events('t', { artifact: A1, limit: 2 });
    expect(page.items.map((e) => e.event_id)).toEqual([`${annotationId(key)}@3`, `${annotationId(key)}@2`]);
    const rest = await store.annotations.events('t', { artifact: A1, limit: 50, cursor: page.nextCursor! });
    expect(rest.items.length).toBeGreaterThan(0);
    expect((await store.annotations.list('t', { artifact: A1, tag: 'x', limit: 10 })).items).toHaveLength(1);
    expect((await store.annotations.list('t', { artifact: A1, tag: 'y', limit: 10 })).items).toHaveLength(0);
  });

  it('carries a name forward through identical links, across two builds, and suggests it through changed ones', async () => {
    await store.annotations.write('t', 'alice', fn(A1, '0x10'), 0, { name: 'parse' }, WRITE);
    await store.annotations.write('t', 'alice', fn(A1, '0x20'), 0, { name: 'hash' }, WRITE);
    await store.functions.recordLinks('t', [
      {
        artifact: A2,
        address: '0x11',
        base: A1,
        base_address: '0x10',
        match_class: 'identical',
        similarity: 1,
        confidence: 1,
      },
      {
        artifact: A2,
        address: '0x21',
        base: A1,
        base_address: '0x20',
        match_class: 'changed',
        similarity: 0.7,
        confidence: 0.6,
      },
      {
        artifact: A3,
        address: '0x12',
        base: A2,
        base_address: '0x11',
        match_class: 'identical',
        similarity: 1,
        confidence: 1,
      },
    ]);
    const v3 = await effectiveAnnotations(store, 't', A3, ['0x12']);
    expect(v3.get('0x12')).toMatchObject({
      annotation: { name: 'parse' },
      propagated_from: { artifact: A1, address: '0x10', revision: 1, by: 'alice' },
    });
    expect((await effectiveAnnotations(store, 'other', A3, ['0x12'])).size).toBe(0);
    const offered = await suggestedAnnotations(store, 't', A2, ['0x21']);
    expect(offered.get('0x21')).toEqual([
      expect.objectContaining({ annotation: expect.objectContaining({ name: 'hash' }), similarity: 0.7 }),
    ]);
    // The build's own annotation wins over what is carried.
    await store.annotations.write('t', 'bob', fn(A2, '0x11'), 0, { name: 'parse_v2' }, WRITE);
    expect((await effectiveAnnotations(store, 't', A3, ['0x12'])).get('0x12')?.annotation.name).toBe(
      'parse_v2',
    );
  });

  it('imports carried histories: new ones whole, continued ones extended, diverged ones kept apart', async () => {
    const carried = await store.annotations.carried('t', [A1]);
    expect(carried.length).toBeGreaterThan(0);
    const { store: other, close: closeOther } = await freshStore(backend);
    try {
      expect(await other.annotations.importCarried('t', 'dave', carried)).toMatchObject({
        created: carried.length,
      });
      expect(await other.annotations.importCarried('t', 'dave', carried)).toMatchObject({
        unchanged: carried.length,
      });
      const key = fn(A1, '0x10');
      await store.annotations.write('t', 'alice', key, 1, { comment: 'more' }, WRITE);
      await store.annotations.write('t', 'alice', fn(A1, '0x20'), 1, { comment: 'ours' }, WRITE);
      await other.annotations.write('t', 'erin', fn(A1, '0x20'), 1, { comment: 'theirs' }, WRITE);
      await other.annotations.write('t', 'erin', fn(A1, '0x402000'), 3, { comment: 'ahead' }, WRITE);
      const next = await store.annotations.carried('t', [A1]);
      const merged = await other.annotations.importCarried('t', 'dave', next);
      expect(merged).toMatchObject({ extended: 1, diverged: [annotationId(fn(A1, '0x20'))] });
      expect(merged.unchanged).toBe(carried.length - 2);
      expect(await other.annotations.get('t', fn(A1, '0x20'))).toMatchObject({ comment: 'theirs' });
      expect(await other.annotations.get('t', key)).toMatchObject({ revision: 2, comment: 'more' });
      expect((await other.annotations.history('t', annotationId(key), { limit: 5 }))[0]).toMatchObject({
        changed_by: 'alice',
        imported: { by: 'dave' },
      });
    } finally {
      await closeOther();
    }
  });
});
