// 10,000 malformed JSON-RPC messages and tool arguments against a live
// gateway: every one gets an answer, the gateway stays up, the store is
// unchanged. The generator is seeded, so a failure reproduces.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestStack, type TestStack } from '../helpers/stack.ts';

let t: TestStack;
let session: string;
const COUNT = 10_000;

function prng(seed: number) {
  return () => {
    seed = (seed * 1_103_515_245 + 12_345) & 0x7fffffff;
    return seed / 0x7fffffff;
  };
}

beforeAll(async () => {
  t = await startTestStack({ env: { DOSSIER_RATE_LIMIT_PER_MINUTE: '1000000' } });
  const init = await fetch(t.url, {
    method: 'POST',
    headers: headers(),
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 0,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'fuzz', version: '1' } },
    }),
  });
  session = init.headers.get('mcp-session-id')!;
  await init.text();
  await fetch(t.url, {
    method: 'POST',
    headers: { ...headers(), 'mcp-session-id': session },
    body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
  }).then((r) => r.text());
});
afterAll(async () => {
  await t?.stop(true);
});

function headers(): Record<string, string> {
  return {
    Authorization: `Bearer ${t.token}`,
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
  };
}

function deep(depth: number): string {
  return '['.repeat(depth) + ']'.repeat(depth);
}

function malformed(random: () => number, i: number): string | Uint8Array<ArrayBuffer> {
  const pick = <T>(xs: T[]) => xs[Math.floor(random() * xs.length)]!;
  const junk = () =>
    pick<unknown>([
      null,
      0,
      -1,
      1e308,
      '',
      'x'.repeat(Math.floor(random() * 5000)),
      [],
      {},
      true,
      { a: { b: [1] } },
    ]);
  const tool = pick([
    'capture_process_scenario',
    'extract_artifact',
    'inspect_analysis_view',
    'get_launch',
    'update_unknown',
    'import_evidence_bundle',
    'no_such_tool',
    '',
    '../../etc',
  ]);
  switch (i % 10) {
    case 0:
      return '{"jsonrpc": "2.0", "id": ' + i + ', "method": '; // truncated JSON
    case 1:
      return JSON.stringify({ jsonrpc: pick(['1.0', 2, null]), id: i, method: 'tools/list' });
    case 2:
      return JSON.stringify({
        jsonrpc: '2.0',
        id: i,
        method: pick(['tools/destroy', '', 'x'.repeat(300), 'resources/read']),
        params: junk(),
      });
    case 3:
      return JSON.stringify({
        jsonrpc: '2.0',
        id: i,
        method: 'tools/call',
        params: { name: tool, arguments: junk() },
      });
    case 4:
      return JSON.stringify({
        jsonrpc: '2.0',
        id: i,
        method: 'tools/call',
        params: {
          name: tool,
          arguments: {
            idempotency_key: junk(),
            executable: junk(),
            evidence_id: junk(),
            view: junk(),
            wait_ms: junk(),
          },
        },
      });
    case 5:
      return `{"jsonrpc":"2.0","id":${i},"method":"tools/call","params":{"name":"get_launch","arguments":{"idempotency_key":${deep(2_000 + Math.floor(random() * 5_000))}}}}`;
    case 6: {
      const bytes = Buffer.from(
        `{"jsonrpc":"2.0","id":${i},"method":"tools/call","params":{"name":"get_launch","arguments":{"idempotency_key":"\u0000`,
      );
      return Uint8Array.from([...bytes, 0xff, 0xfe, 0xc3, 0x28, ...Buffer.from('"}}}')]); // invalid UTF-8
    }
    case 7:
      return JSON.stringify({
        jsonrpc: '2.0',
        id: i,
        method: 'prompts/get',
        params: { name: junk(), arguments: junk() },
      });
    case 8:
      return JSON.stringify({
        jsonrpc: '2.0',
        id: i,
        method: 'completion/complete',
        params: { ref: junk(), argument: junk() },
      });
    default:
      return JSON.stringify([
        {
          jsonrpc: '2.0',
          id: i,
          method: 'tools/call',
          params: { name: tool, arguments: { x: 'y'.repeat(Math.floor(random() * 200_000)) } },
        },
      ]);
  }
}

async function snapshot() {
  const store = t.stack.store;
  return {
    launches: (await store.launches.list('local', { limit: 200 })).items.length,
    evidence: (await store.evidence.list('local', { limit: 200 })).items.length,
    unknowns: (await store.unknowns.list('local', { limit: 200 })).items.length,
    artifacts: (await store.artifacts.list('local', { limit: 200 })).items.length,
  };
}

describe('fuzzing the gateway', () => {
  it(
    `answers ${COUNT} malformed messages, stays up and leaves the store unchanged`,
    { timeout: 600_000 },
    async () => {
      const before = await snapshot();
      const random = prng(7400);
      const statuses = new Map<number, number>();
      let unanswered = 0;
      let next = 0;
      const worker = async () => {
        while (next < COUNT) {
          const i = next++;
          const body = malformed(random, i);
          const res = await fetch(t.url, {
            method: 'POST',
            headers: { ...headers(), 'mcp-session-id': session },
            body,
          });
          const text = await res.text();
          statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
          if (res.status >= 500 || text.length === 0) unanswered++;
          if (res.status === 200 && !/"error"|isError/.test(text)) unanswered++; // every one of them is wrong
        }
      };
      await Promise.all(Array.from({ length: 8 }, worker));
      expect(unanswered).toBe(0);
      expect([...statuses.keys()].every((s) => [200, 400, 404, 413].includes(s))).toBe(true);
      expect((await fetch(t.url.replace(/\/mcp$/, '/healthz'))).status).toBe(200);
      expect(await snapshot()).toEqual(before);
    },
  );
});
