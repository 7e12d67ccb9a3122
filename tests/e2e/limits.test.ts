// Gateway bounds a client meets: the per-principal rate limit and the request body cap.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call } from '../helpers/mcp.ts';
import { startTestStack, type TestStack } from '../helpers/stack.ts';

let t: TestStack;
beforeAll(async () => {
  t = await startTestStack({
    env: { DOSSIER_RATE_LIMIT_PER_MINUTE: '5', DOSSIER_MAX_REQUEST_BYTES: '4096' },
  });
});
afterAll(async () => {
  await t?.stop(true);
});

describe('gateway limits', () => {
  it('answers calls past the per-principal rate with resource_constraint and a retry hint, per principal', async () => {
    const client = await t.connect();
    for (let i = 0; i < 5; i++) expect((await call(client, 'whoami')).principal).toBe('local');
    const limited = await call(client, 'whoami');
    expect(limited.error).toMatchObject({ code: 'resource_constraint', retryable: true });
    expect(limited.error.details.retry_after_ms).toBeGreaterThan(0);
    expect(limited.error.remediation).toMatch(/Retry after \d+ ms/);
    const other = await t.connect(await t.tokenFor('paula', 'local'));
    expect((await call(other, 'whoami')).principal).toBe('paula');
  });

  it('refuses a request body over DOSSIER_MAX_REQUEST_BYTES with 413 and a JSON-RPC error', async () => {
    const res = await fetch(t.url, {
      method: 'POST',
      headers: {
        Authorization: `Bearer ${t.token}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { pad: 'x'.repeat(8_000) },
      }),
    });
    expect(res.status).toBe(413);
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(
      /DOSSIER_MAX_REQUEST_BYTES/,
    );
  });
});
