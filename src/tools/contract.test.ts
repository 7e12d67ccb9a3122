import { z } from 'zod';
import { describe, expect, it } from 'vitest';
import { callSchema, defineTool } from './contract.ts';

const effect = {
  idempotent: false,
  readOnly: false,
  destructive: false,
  openWorld: true,
  effects: ['writes'],
};

describe('the call schema', () => {
  it('gives a launch written without detail, idempotency_key or wait_ms all three', () => {
    const launch = defineTool({
      name: 'write_something',
      title: 'Write something',
      description: 'test',
      input: z.strictObject({ text: z.string() }),
      effect,
      runsOn: 'capture',
      toolset: 'capture',
      limits: {},
      collections: {},
    });
    const schema = callSchema(launch);
    expect(schema.parse({ text: 'a', idempotency_key: 'k1', detail: 'complete' })).toMatchObject({
      text: 'a',
      idempotency_key: 'k1',
      detail: 'complete',
      wait_ms: 20_000,
    });
    expect(schema.safeParse({ text: 'a', idempotency_key: 'k1', detail: 'everything' }).success).toBe(false);
    expect(schema.safeParse({ text: 'a', idempotency_key: 'k1', other: 1 }).success).toBe(false);
  });
});
