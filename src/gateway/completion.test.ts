import { describe, expect, it } from 'vitest';
import { complete, COMPLETION_LIMITS } from './completion.ts';

describe('complete', () => {
  it('matches by case-insensitive prefix after Unicode normalization, deduplicated, in code-point order', () => {
    const result = complete(['beta', 'Alpha', 'alpha', 'ALPHA-2', 'ａｌｐｈａ３', 'alpha'], 'ALP');
    expect(result.values).toEqual(['ALPHA-2', 'Alpha', 'alpha', 'ａｌｐｈａ３']);
    expect(result).toMatchObject({ total: 4, hasMore: false });
  });

  it('returns at most 100 values with the total, and scans at most 10,000 candidates', () => {
    const candidates = Array.from({ length: 20_000 }, (_, i) => `k${String(i).padStart(5, '0')}`);
    const result = complete(candidates, 'k');
    expect(result.values).toHaveLength(COMPLETION_LIMITS.values);
    expect(result.total).toBe(COMPLETION_LIMITS.scanned);
    expect(result.hasMore).toBe(true);
    expect(result.values[0]).toBe('k00000');
  });

  it('refuses values over 4,096 characters and skips such candidates', () => {
    expect(complete(['a'], 'a'.repeat(4_097))).toEqual({ values: [], total: 0, hasMore: false });
    expect(complete(['a'.repeat(4_097), 'ab'], 'a').values).toEqual(['ab']);
  });
});
