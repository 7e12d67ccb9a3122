// Which era a POST to /mcp belongs to: the handshake era's (a session, through
// the SDK's transports) or the stateless era's (2026-07-28). The SDK's
// `isLegacyRequest` decides by parsing the body against its JSON-RPC schemas,
// which cost more than the rest of answering the cheapest call. Most requests a
// session sends are plain: a request with an id and a method, params without a
// `_meta`, and no MCP-Protocol-Version of the new era. Those are the handshake
// era's whatever else they hold, and are told so here without a parse; anything
// else is left to the SDK.
import type { IncomingMessage } from 'node:http';
import { isLegacyRequest } from '@modelcontextprotocol/server';
import { webRequest } from './webResponse.ts';

/** The first revision of the stateless era (the SDK compares revisions as strings, as here). */
const FIRST_STATELESS_REVISION = '2026-07-28';
/** The keys a JSON-RPC request may have (the SDK's schema is strict). */
const REQUEST_KEYS = new Set(['jsonrpc', 'id', 'method', 'params']);

const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === 'object' && !Array.isArray(v);

/**
 * True only where the SDK's classification is sure to say "legacy": a request
 * (not a response, a notification or a batch) other than `initialize`, whose
 * params carry no `_meta` (so no envelope claim), sent without a header naming
 * a revision of the new era. False means "ask the SDK", not "stateless".
 */
export function plainLegacyRequest(req: IncomingMessage, body: unknown): boolean {
  if (!isPlainObject(body) || body.jsonrpc !== '2.0') return false;
  for (const key in body) if (!REQUEST_KEYS.has(key)) return false;
  const { id, method, params } = body;
  if (typeof id !== 'string' && !(typeof id === 'number' && Number.isSafeInteger(id))) return false;
  if (typeof method !== 'string' || method === 'initialize') return false;
  if (params !== undefined && (!isPlainObject(params) || '_meta' in params)) return false;
  const header = req.headers['mcp-protocol-version'];
  if (header === undefined) return true;
  if (typeof header !== 'string') return false;
  return header.replace(/^[ \t]+|[ \t]+$/g, '') < FIRST_STATELESS_REVISION;
}

/** Whether a POST with this parsed body is the handshake era's (the SDK decides what is not plain). */
export async function handshakeEra(req: IncomingMessage, body: unknown): Promise<boolean> {
  return plainLegacyRequest(req, body) || (await isLegacyRequest(webRequest(req), body));
}
