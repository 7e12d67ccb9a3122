// Gateway bounds a client meets: the per-principal rate limit, sessions per
// principal, the request body cap and the time a body may take to arrive; and
// what a client is told when the store fails under it.
import Database from 'better-sqlite3';
import http from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call } from '../helpers/mcp.ts';
import { startTestStack, type TestStack } from '../helpers/stack.ts';

/** One JSON-RPC message POSTed as a raw Streamable HTTP client would (no SDK, so nothing is added). */
function post(url: string, token: string, message: unknown, session?: string) {
  return fetch(url, {
    method: 'POST',
    headers: {
      Authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...(session ? { 'mcp-session-id': session } : {}),
    },
    body: JSON.stringify(message),
  });
}

const initialize = (params: unknown) => ({ jsonrpc: '2.0', id: 1, method: 'initialize', params });

let t: TestStack;
beforeAll(async () => {
  t = await startTestStack({
    env: { DOSSIER_RATE_LIMIT_PER_MINUTE: '6', DOSSIER_MAX_REQUEST_BYTES: '4096' },
  });
});
afterAll(async () => {
  await t?.stop(true);
});

describe('gateway limits', () => {
  it('answers calls past the per-principal rate with resource_constraint and a retry hint, per principal', async () => {
    const client = await t.connect(); // initialize counts: opening sessions is a request like any other
    for (let i = 0; i < 5; i++) expect((await call(client, 'whoami')).principal).toBe('local');
    const limited = await call(client, 'whoami');
    expect(limited.error).toMatchObject({ code: 'resource_constraint', retryable: true });
    expect(limited.error.details.retry_after_ms).toBeGreaterThan(0);
    expect(limited.error.remediation).toMatch(/Retry after \d+ ms/);
    const other = await t.connect(await t.tokenFor('paula', 'local'));
    expect((await call(other, 'whoami')).principal).toBe('paula');

    // Completion, prompts and resources count too; their refusal carries retry_after_ms in data.
    for (const request of [
      () => client.listPrompts(),
      () => client.getPrompt({ name: 'trace_crash', arguments: {} }),
      () =>
        client.complete({
          ref: { type: 'ref/prompt', name: 'investigate_feature' },
          argument: { name: 'artifact', value: 's' },
        }),
      () => client.listResources(),
      () => client.listResourceTemplates(),
    ]) {
      const refused = (await request().then(
        () => undefined,
        (err: unknown) => err,
      )) as { code: number; data: { code: string; retry_after_ms: number } } | undefined;
      expect(refused?.data).toMatchObject({ code: 'resource_constraint' });
      expect(refused!.data.retry_after_ms).toBeGreaterThan(0);
    }
  });

  it('counts what a session sends besides requests: notifications past the rate get 429', async () => {
    const token = await t.tokenFor('notifier', 'local');
    const init = await post(
      t.url,
      token,
      initialize({
        protocolVersion: '2025-11-25',
        capabilities: {},
        clientInfo: { name: 'n', version: '1' },
      }),
    );
    expect(init.status).toBe(200);
    await init.text();
    const session = init.headers.get('mcp-session-id')!;
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) {
      const res = await post(
        t.url,
        token,
        { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 99 } },
        session,
      );
      await res.text();
      statuses.push(res.status);
    }
    // 6 a minute: the initialize took one, five notifications pass, the rest wait.
    expect(statuses).toEqual([202, 202, 202, 202, 202, 429, 429, 429]);
  });

  it('refuses a request body over DOSSIER_MAX_REQUEST_BYTES with 413 and a JSON-RPC error', async () => {
    const res = await post(t.url, t.token, initialize({ pad: 'x'.repeat(8_000) }));
    expect(res.status).toBe(413);
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(
      /DOSSIER_MAX_REQUEST_BYTES/,
    );
  });
});

describe('sessions and slow bodies', () => {
  let s: TestStack;
  beforeAll(async () => {
    s = await startTestStack({
      env: { DOSSIER_MAX_SESSIONS_PER_PRINCIPAL: '3', DOSSIER_REQUEST_BODY_TIMEOUT_MS: '1000' },
    });
  });
  afterAll(async () => {
    await s?.stop(true);
  });

  it('caps one principal’s sessions: its least recently used one goes, another principal keeps its own', async () => {
    const bob = await s.connect(await s.tokenFor('bob', 'other-team'));
    const mine = [];
    for (let i = 0; i < 5; i++) mine.push(await s.connect());
    // The two oldest of five were closed to make room; the newest three work.
    for (const client of mine.slice(2)) expect((await call(client, 'whoami')).principal).toBe('local');
    for (const client of mine.slice(0, 2)) {
      await expect(call(client, 'whoami')).rejects.toThrow(/Session not found|404/);
    }
    expect((await call(bob, 'whoami')).principal).toBe('bob');
  });

  it('counts a session used a moment ago as recently used when the cap closes one, and records when each was seen', async () => {
    const token = await s.tokenFor('lru', 'lru-team');
    const [a, b, c] = [await s.connect(token), await s.connect(token), await s.connect(token)];
    // a is the oldest, but used just now: opening a fourth closes b, the least recently used.
    expect((await call(a, 'whoami')).principal).toBe('lru');
    const d = await s.connect(token);
    await expect(call(b, 'whoami')).rejects.toThrow(/Session not found|404/);
    for (const client of [a, c, d]) expect((await call(client, 'whoami')).principal).toBe('lru');
    // What another replica would see: the store has a's last use within a quarter second.
    const used = Date.now();
    expect((await call(a, 'whoami')).principal).toBe('lru');
    const id = (a.transport as { sessionId?: string }).sessionId!;
    const owner = { team: 'lru-team', principal: 'lru' };
    await new Promise((r) => setTimeout(r, 400));
    expect((await s.stack.store.sessions.get(id, owner, 0))!.last_seen_at).toBeGreaterThanOrEqual(used);
  });

  it('holds the cap under a burst: 20 sessions opened at once leave at most 3 for that principal', async () => {
    const token = await s.tokenFor('burst', 'burst-team');
    const before = s.stack.http.sessions();
    const opened = await Promise.allSettled(Array.from({ length: 20 }, () => s.connect(token)));
    expect(opened.some((o) => o.status === 'fulfilled')).toBe(true);
    expect(s.stack.http.sessions() - before).toBeLessThanOrEqual(3);
  });

  it('refuses an initialize whose capabilities and client info exceed 16 KiB: nothing of it is kept', async () => {
    const res = await post(
      s.url,
      s.token,
      initialize({
        protocolVersion: '2025-11-25',
        capabilities: {},
        clientInfo: { name: 'x'.repeat(20_000), version: '1' },
      }),
    );
    expect(res.status).toBe(400);
    expect(res.headers.get('mcp-session-id')).toBeNull();
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(/16384 bytes/);
  });

  it('answers an initialize the store cannot record with an internal-error reference, never the database’s text', async () => {
    const token = await s.tokenFor('dora', 'store-team');
    const db = new Database(path.join(s.home, 'dossier.db'));
    db.exec('ALTER TABLE mcp_sessions RENAME TO mcp_sessions_away');
    try {
      const res = await post(
        s.url,
        token,
        initialize({
          protocolVersion: '2025-11-25',
          capabilities: {},
          clientInfo: { name: 't', version: '1' },
        }),
      );
      const text = await res.text();
      expect(text).toMatch(/Internal error \(reference int_\w+\)/);
      expect(text).not.toMatch(/mcp_sessions|no such table|sqlite/i);
    } finally {
      db.exec('ALTER TABLE mcp_sessions_away RENAME TO mcp_sessions');
      db.close();
    }
    // The store is back: the same principal opens a session and is answered.
    expect((await call(await s.connect(token), 'whoami')).principal).toBe('dora');
  });

  it('answers a request body that trickles in with 408 once DOSSIER_REQUEST_BODY_TIMEOUT_MS passes', async () => {
    const url = new URL(s.url);
    const status = await new Promise<number>((resolve, reject) => {
      const req = http.request(
        {
          host: url.hostname,
          port: url.port,
          path: url.pathname,
          method: 'POST',
          headers: {
            Authorization: `Bearer ${s.token}`,
            'content-type': 'application/json',
            'content-length': '1000',
            accept: 'application/json, text/event-stream',
          },
        },
        (res) => resolve(res.statusCode ?? 0),
      );
      req.on('error', reject);
      req.write('{"jsonrpc":"2.0",'); // and nothing more
    });
    expect(status).toBe(408);
  });
});

describe('values nested past DOSSIER_MAX_JSON_DEPTH', () => {
  let s: TestStack;
  beforeAll(async () => {
    s = await startTestStack();
  });
  afterAll(async () => {
    await s?.stop(true);
  });

  /** Raw text, as a client that builds its own JSON sends it: `levels` arrays inside one another. */
  const nested = (levels: number) => `${'['.repeat(levels)}${']'.repeat(levels)}`;
  const rawPost = (url: string, token: string, text: string, session?: string) =>
    fetch(url, {
      method: 'POST',
      headers: {
        Authorization: `Bearer ${token}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        ...(session ? { 'mcp-session-id': session } : {}),
      },
      body: text,
    });
  const init = (experimental: string) =>
    `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","clientInfo":{"name":"deep","version":"1"},"capabilities":{"experimental":{"x":${experimental}}}}}`;
  const parseError = async (res: Response) => {
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: { code: number; message: string; data?: unknown } };
    expect(body.error.code).toBe(-32700);
    expect(body.error.message).toMatch(/deeper than 64 levels \(DOSSIER_MAX_JSON_DEPTH\)/);
    expect(body.error.data).toEqual({ limit: 64 });
  };

  it('an initialize 100,000 levels deep is a parse error (400) that names the bound, never a 500', async () => {
    await parseError(await rawPost(s.url, s.token, init(nested(100_000))));
    // Just under the bound is an ordinary request: the bound leaves real clients room.
    const fits = await rawPost(s.url, s.token, init(nested(56)));
    expect(fits.status).toBe(200);
    await fits.text();
  });

  it('tools/call arguments 100,000 levels deep in a live session: 400 with the bound, and the session goes on', async () => {
    const opened = await rawPost(s.url, s.token, init('{}'));
    expect(opened.status).toBe(200);
    await opened.text();
    const session = opened.headers.get('mcp-session-id')!;
    const initialized = await rawPost(
      s.url,
      s.token,
      '{"jsonrpc":"2.0","method":"notifications/initialized"}',
      session,
    );
    await initialized.text();
    const deep = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list_evidence","arguments":{"tool":${nested(100_000)}}}}`;
    await parseError(await rawPost(s.url, s.token, deep, session));
    const fine = await rawPost(
      s.url,
      s.token,
      '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"whoami","arguments":{}}}',
      session,
    );
    expect(fine.status).toBe(200);
    expect(await fine.text()).toContain('"principal');
  });

  it('a bundle posted to /bundles 100,000 levels deep is refused whole with 400 and the bound, nothing imported', async () => {
    const bundle = `{"format":"dossier.evidence-bundle/1","evidence":[{"record":{},"document":{"x":${nested(100_000)}},"collections":{}}]}`;
    const res = await fetch(s.url.replace(/\/mcp$/, '/bundles'), {
      method: 'POST',
      headers: { Authorization: `Bearer ${s.token}`, 'content-type': 'application/json' },
      body: bundle,
    });
    expect(res.status).toBe(400);
    const { error } = (await res.json()) as { error: { code: string; message: string } };
    expect(error.code).toBe('invalid_params');
    expect(error.message).toMatch(/deeper than 64 levels \(DOSSIER_MAX_JSON_DEPTH\)/);
    expect((await call(await s.connect(), 'list_evidence', {})).evidence).toEqual([]);
  });
});
