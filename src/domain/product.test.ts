import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { PRODUCT } from './product.ts';

describe('the product name and version', () => {
  it('is the package version, so a release changes both together', () => {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
      name: string;
      version: string;
    };
    expect(PRODUCT).toEqual({ name: pkg.name, version: pkg.version });
  });
});
