// What a tool's published input schema says of a bound is what the server takes: no hidden minimum.
import { describe, expect, it } from 'vitest';
import { TOOLS_BY_NAME } from './catalog.ts';
import { callSchema, type ToolContract } from './contract.ts';
import { inputJsonSchema } from './outputs.ts';

type Props = Record<string, { minimum?: number; properties?: Props }>;
const tool = (name: string) => TOOLS_BY_NAME.get(name) as ToolContract;

describe('published bounds', () => {
  it('capture limits: the schema’s minimum is the least value a call may give', () => {
    const contract = tool('capture_process_scenario');
    const props = (inputJsonSchema(contract) as { properties: Props }).properties;
    const base = { executable: '/usr/bin/true', idempotency_key: 'k' };
    const cases: [path: string[], min: number][] = [
      [['timeout_ms'], 100],
      [['limits', 'address_space_mb'], 16],
      [['limits', 'open_files'], 16],
      [['limits', 'processes'], 1],
    ];
    for (const [path, min] of cases) {
      const published = path.reduce<Props[string] | undefined>(
        (p, key, i) => (i === 0 ? props[key] : p?.properties?.[key]),
        undefined,
      );
      expect(published?.minimum, path.join('.')).toBe(min);
      const withValue = (v: number) =>
        path.length === 1 ? { ...base, [path[0]!]: v } : { ...base, [path[0]!]: { [path[1]!]: v } };
      expect(callSchema(contract).safeParse(withValue(min)).success, `${path.join('.')}=${min}`).toBe(true);
      expect(callSchema(contract).safeParse(withValue(min - 1)).success, `${path.join('.')}=${min - 1}`).toBe(
        false,
      );
    }
  });
});
