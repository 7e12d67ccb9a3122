import type { IncomingMessage } from 'node:http';
import { isLegacyRequest } from '@modelcontextprotocol/server';
import { describe, expect, it } from 'vitest';
import { plainLegacyRequest } from './era.ts';
import { webRequest } from './webResponse.ts';

/** A POST to /mcp with these headers, as the gateway hands it on. */
const post = (headers: Record<string, string | string[]> = {}) =>
  ({ method: 'POST', url: '/mcp', headers }) as unknown as IncomingMessage;

const sdkSays = (req: IncomingMessage, body: unknown) => isLegacyRequest(webRequest(req), body);

/** A small deterministic generator, so a failure names a case that comes back. */
function generator(seed: number) {
  let s = seed;
  const next = () => ((s = (s * 1103515245 + 12345) & 0x7fffffff), s / 0x7fffffff);
  // The first entry of each list is what a session sends; it comes up half the time, so that the
  // requests of the fast path and their near misses are both common.
  return <T>(xs: readonly T[]): T => (next() < 0.5 ? xs[0]! : xs[Math.floor(next() * xs.length)]!);
}

const ABSENT = Symbol('absent');
const IDS = [1, 0, -3, 7.5, 2 ** 60, 'a', '', null, true, {}, [], ABSENT];
const METHODS = ['tools/call', 'tools/list', 'initialize', 'ping', '', 7, null, ABSENT];
const VERSIONS = ['2.0', '1.0', 2, null, ABSENT];
const META = [
  ABSENT,
  {},
  { progressToken: 1 },
  { progressToken: {} },
  { 'io.modelcontextprotocol/protocolVersion': '2026-07-28' },
  'x',
  null,
];
const HEADERS = [
  '2025-11-25',
  undefined,
  '2025-06-18',
  ' 2025-06-18\t',
  '2026-07-28',
  '2026-07-28 ',
  '2027-01-01',
  'garbage',
  '',
  ['2025-06-18', '2026-07-28'],
];
const EXTRA = [ABSENT, { result: {} }, { error: { code: 1, message: 'm' } }, { other: 1 }];

function body(pick: ReturnType<typeof generator>): unknown {
  const shape = pick(['object', 'array', 'string', 'null']);
  if (shape === 'array') return [{ jsonrpc: '2.0', id: 1, method: 'ping' }];
  if (shape === 'string') return 'tools/call';
  if (shape === 'null') return null;
  const out: Record<string, unknown> = {};
  const put = (key: string, value: unknown) => value !== ABSENT && (out[key] = value);
  put('jsonrpc', pick(VERSIONS));
  put('id', pick(IDS));
  put('method', pick(METHODS));
  const params = pick(['object', 'absent', 'array', 'null'] as const);
  if (params === 'array') out.params = [1];
  else if (params === 'null') out.params = null;
  else if (params === 'object') {
    const p: Record<string, unknown> = { name: 'whoami', arguments: {} };
    const meta = pick(META);
    if (meta !== ABSENT) p._meta = meta;
    out.params = p;
  }
  const extra = pick(EXTRA);
  if (extra !== ABSENT) Object.assign(out, extra);
  return out;
}

describe('plainLegacyRequest', () => {
  it('tells the requests a session sends most without the SDK', () => {
    const call = { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'whoami', arguments: {} } };
    expect(plainLegacyRequest(post({ 'mcp-protocol-version': '2025-11-25' }), call)).toBe(true);
    expect(plainLegacyRequest(post(), { jsonrpc: '2.0', id: 'a', method: 'tools/list' })).toBe(true);
  });

  it('leaves initialize, notifications, responses, _meta and the new era to the SDK', () => {
    const call = { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'whoami' } };
    expect(plainLegacyRequest(post(), { ...call, method: 'initialize' })).toBe(false);
    expect(plainLegacyRequest(post(), { jsonrpc: '2.0', method: 'notifications/initialized' })).toBe(false);
    expect(plainLegacyRequest(post(), { jsonrpc: '2.0', id: 3, result: {} })).toBe(false);
    expect(plainLegacyRequest(post(), { ...call, params: { _meta: { progressToken: 1 } } })).toBe(false);
    expect(plainLegacyRequest(post({ 'mcp-protocol-version': '2026-07-28' }), call)).toBe(false);
    expect(plainLegacyRequest(post(), [call])).toBe(false);
  });

  it('never says "legacy" where the SDK would not, over 10,000 generated requests', async () => {
    const pick = generator(20261204);
    let plain = 0;
    for (let i = 0; i < 10_000; i++) {
      const header = pick(HEADERS);
      const req = post(header === undefined ? {} : { 'mcp-protocol-version': header });
      const b = body(pick);
      if (!plainLegacyRequest(req, b)) continue;
      plain++;
      expect({ case: i, body: b, header, legacy: await sdkSays(req, b) }).toMatchObject({ legacy: true });
    }
    // The generator reaches the fast path often enough for the check to mean something.
    expect(plain, `${plain} of 10,000 were plain`).toBeGreaterThan(500);
  });
});
