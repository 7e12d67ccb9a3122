import { describe, expect, it } from 'vitest';
import { JsonTooDeep, nestsDeeperThan, parseBoundedJson } from './json.ts';

describe('JSON from outside, bounded in depth', () => {
  it('counts arrays and objects, and nothing inside strings or their escapes', () => {
    expect(nestsDeeperThan('[[[]]]', 3)).toBe(false);
    expect(nestsDeeperThan('[[[[]]]]', 3)).toBe(true);
    expect(nestsDeeperThan('{"a":{"b":[1]}}', 3)).toBe(false);
    expect(nestsDeeperThan(`{"a":"${'['.repeat(100)}"}`, 1)).toBe(false);
    expect(nestsDeeperThan(`["\\"[[[[", "\\\\", []]`, 2)).toBe(false);
    expect(nestsDeeperThan(`["\\\\"[[[]]]]`, 3)).toBe(true);
  });

  it('refuses 100,000 levels before parsing, and parses what fits', () => {
    const deep = `${'['.repeat(100_000)}${']'.repeat(100_000)}`;
    expect(() => parseBoundedJson(deep, 64)).toThrow(JsonTooDeep);
    expect(() => parseBoundedJson(deep, 64)).toThrow(/deeper than 64 levels/);
    expect(parseBoundedJson('{"a":[{"b":null}]}', 64)).toEqual({ a: [{ b: null }] });
    expect(() => parseBoundedJson('{"a":', 64)).toThrow(SyntaxError);
  });
});
