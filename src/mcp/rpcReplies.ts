// The MCP endpoint's replies outside a session's transport: JSON-RPC errors,
// 429 with Retry-After, and the shapes of a JSON-RPC message it tells apart.
import type { ServerResponse } from 'node:http';
import { sendJson } from './rest.ts';

/** A JSON-RPC error reply with no id (the request was refused before any session read it). */
export function rpcError(res: ServerResponse, status: number, code: number, message: string, data?: unknown) {
  sendJson(res, status, { jsonrpc: '2.0', error: { code, message, ...(data ? { data } : {}) }, id: null });
}

/** 429 with Retry-After: the principal is over its rate. */
export function tooMany(res: ServerResponse, wait: { message: string; retry_after_ms: number }) {
  res.setHeader('Retry-After', String(Math.ceil(wait.retry_after_ms / 1000)));
  return sendJson(res, 429, {
    jsonrpc: '2.0',
    error: { code: -32000, message: wait.message, data: wait },
    id: null,
  });
}

export function isInitialized(body: unknown): boolean {
  return (body as { method?: unknown } | undefined)?.method === 'notifications/initialized';
}

/** A JSON-RPC request (a method and an id), as opposed to a notification or a response. */
export function isJsonRpcRequest(body: unknown): boolean {
  const m = body as { method?: unknown; id?: unknown } | undefined;
  return typeof m?.method === 'string' && m.id !== undefined && m.id !== null;
}
