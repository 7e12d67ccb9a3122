// An unknown's compare-and-swap (a real SQLite file): a stale revision is a
// conflict, except the same change again by the author of the revision it
// made, which is a retried call whose reply was lost.
import { describe, expect, it } from 'vitest';
import { scratchStore } from '../../tests/helpers/scratchStore.ts';

const scratch = scratchStore('unknowns');
const store = () => scratch.store;

describe('update of an unknown', () => {
  it('answers a retry of the same change by its author as applied, once; anything else stale is a conflict', async () => {
    const id = 'unk_0123456789abcdef0123456789abcdef';
    await store().unknowns.record('t', 'alice', { unknown_id: id, question: 'Why?', scope: 's' }, null, []);
    const change = { note: 'looked at it' };
    expect(await store().unknowns.update('t', id, 1, change, 'alice')).toMatchObject({
      applied: true,
      unknown: { revision: 2, note: 'looked at it' },
    });
    // The reply was lost; the same call again.
    expect(await store().unknowns.update('t', id, 1, change, 'alice')).toMatchObject({
      applied: true,
      unknown: { revision: 2 },
    });
    expect((await store().unknowns.history('t', id, { limit: 10 })).map((r) => r.revision)).toEqual([2, 1]);
    // Another author's same change, or the author's different one, from revision 1: stale.
    expect((await store().unknowns.update('t', id, 1, change, 'bob')).applied).toBe(false);
    expect((await store().unknowns.update('t', id, 1, { note: 'something else' }, 'alice')).applied).toBe(
      false,
    );
    // Once someone else wrote after it, the old change is stale for its author too.
    expect((await store().unknowns.update('t', id, 2, { note: 'bob was here' }, 'bob')).applied).toBe(true);
    expect((await store().unknowns.update('t', id, 1, change, 'alice')).applied).toBe(false);
  });
});
