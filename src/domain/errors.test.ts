import { describe, expect, it } from 'vitest';
import { screenArguments, toToolError } from './errors.ts';

describe('screenArguments', () => {
  it('names where a NUL is, and lets stdin carry one', () => {
    expect(() => screenArguments({ args: ['a', 'b\u0000'], stdin: 'ok' })).toThrow(/^args\.1 contains a NUL/);
    expect(() => screenArguments({ env: { ['K\u0000']: 'v' } })).toThrow(/has a key with a NUL/);
    expect(() => screenArguments({ stdin: 'bytes\u0000here' })).not.toThrow();
  });

  it('refuses a key named __proto__ anywhere, which validation would drop without a word', () => {
    const parsed = JSON.parse('{"variables": {"v1": "ok", "__proto__": "evil"}}') as unknown;
    expect(() => screenArguments(parsed)).toThrow(/^variables has a key named __proto__/);
    const deep = JSON.parse('{"view": {"where": [{"__proto__": ["a"]}]}}') as unknown;
    expect(() => screenArguments(deep)).toThrow(/^view\.where\.0 has a key named __proto__/);
    expect(() => screenArguments({ variables: { constructor: 'ok', proto: 'ok' } })).not.toThrow();
  });

  it('takes linear time on hostile shapes and bounds how many values it looks at', () => {
    let deep: unknown = '';
    for (let i = 0; i < 1_000; i++) deep = [deep, ...Array(300).fill('')];
    const t0 = performance.now();
    expect(() => screenArguments(deep)).toThrow(/more than 200000 values/);
    let nested: unknown = 'x';
    for (let i = 0; i < 100_000; i++) nested = [nested];
    expect(() => screenArguments(nested)).not.toThrow(); // no recursion: no stack overflow
    expect(performance.now() - t0).toBeLessThan(2_000);
  });
});

describe('toToolError', () => {
  it('answers an unexpected failure with a reference, never its own text', () => {
    const error = toToolError(
      new Error('invalid byte sequence for encoding "UTF8": 0x00 at /var/lib/dossier'),
    );
    expect(error.code).toBe('internal');
    expect(error.message).not.toMatch(/byte sequence|\/var\/lib/);
    expect(error.details.reference).toMatch(/^int_/);
  });
});
