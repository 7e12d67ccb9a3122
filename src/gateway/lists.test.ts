import { describe, expect, it } from 'vitest';
import { fitList } from './lists.ts';

const bytes = (v: unknown) => Buffer.byteLength(JSON.stringify(v));

describe('fitList', () => {
  it('keeps what fits the budget, whatever the length of the cursor it ends on, and continues after it', () => {
    // Entries whose cursors differ widely in length (keys of 1 to 128 characters).
    const items = Array.from({ length: 300 }, (_, i) => ({
      key: 'k'.repeat(1 + ((i * 37) % 128)),
      pad: 'x'.repeat(200 + (i % 50)),
    }));
    const page = { items, nextCursor: 'END', cursorAfter: (i: number) => `cursor:${items[i]!.key}` };
    for (const budget of [2_000, 5_000, 12_345, 40_000]) {
      const reply = fitList('things', page, budget);
      expect(bytes(reply)).toBeLessThanOrEqual(budget);
      expect(reply.things.length).toBeGreaterThan(0);
      expect(reply.next_cursor).toBe(`cursor:${items[reply.things.length - 1]!.key}`);
    }
    expect(fitList('things', { ...page, items: items.slice(0, 3) }, 40_000).next_cursor).toBe('END');
  });

  it('refuses, with what to do, only when a single entry is larger than the budget', () => {
    const page = { items: [{ blob: 'x'.repeat(5_000) }], nextCursor: null, cursorAfter: () => 'c' };
    expect(() => fitList('things', page, 4_096)).toThrow(/larger than the reply budget/);
  });
});
