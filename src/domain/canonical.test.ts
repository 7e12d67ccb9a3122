import { describe, expect, it } from 'vitest';
import { canonicalJson, digestOf } from './canonical.ts';

describe('canonicalJson (RFC 8785)', () => {
  it('sorts keys by UTF-16 code units and drops whitespace', () => {
    expect(canonicalJson({ b: 1, a: [true, null, 'x'], '\u20ac': 0, '\ud83d\ude00': 1, A: 2 })).toBe(
      '{"A":2,"a":[true,null,"x"],"b":1,"\u20ac":0,"\ud83d\ude00":1}',
    );
  });

  it('serializes numbers as ECMAScript does', () => {
    expect(canonicalJson([1e21, 0.1, -0, 1.0, 333333333.3333333, 1e-7])).toBe(
      '[1e+21,0.1,0,1,333333333.3333333,1e-7]',
    );
  });

  it('matches the RFC 8785 example of string escaping', () => {
    expect(canonicalJson({ s: '\u20ac$\u000f\nA\'B"\\\\"/' })).toBe(
      '{"s":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}',
    );
  });

  it('omits undefined members and refuses non-finite numbers', () => {
    expect(canonicalJson({ a: undefined, b: 2 })).toBe('{"b":2}');
    expect(() => canonicalJson({ n: Number.NaN })).toThrow(/non-finite/);
  });

  it('gives the same digest whatever the key order', () => {
    expect(digestOf({ x: 1, y: { b: 2, a: 1 } })).toBe(digestOf({ y: { a: 1, b: 2 }, x: 1 }));
  });
});
