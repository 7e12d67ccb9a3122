// The MCP endpoint (/mcp) once its caller is known: the toolsets it lists, its
// body read within bounds, then the stateless era's handler, the session the
// request belongs to, or a new session for an initialize request.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { JsonTooDeep, parseBoundedJson } from '../domain/json.ts';
import { handshakeEra } from './era.ts';
import { PROTOCOL_KEY_META } from './tasks.ts';
import type { Principal } from '../domain/types.ts';
import { normalizeToolsets, parseToolsets, type Toolset } from '../tools/toolsets.ts';
import type { Caller, HttpContext } from './httpContext.ts';
import { readBody } from './requests.ts';
import { isInitialized, isJsonRpcRequest, rpcError, tooMany } from './rpcReplies.ts';
import { initRecord, MAX_INIT_BYTES, type Session } from './sessions.ts';
import { webRequest, writeResponse } from './webResponse.ts';

/** Answers one request to /mcp from an authenticated caller (`auth` is the request's, filled in here). */
export async function serveMcpEndpoint(
  ctx: HttpContext,
  req: IncomingMessage,
  res: ServerResponse,
  url: Readonly<URL>,
  caller: Caller,
  auth: AuthInfo,
) {
  const { principal } = caller;
  let toolsets: readonly Toolset[];
  try {
    toolsets = chooseToolsets(ctx, url, principal);
  } catch (err) {
    return rpcError(res, 400, -32602, `?toolsets=: ${(err as Error).message}`);
  }
  auth.extra = { principal, toolsets };

  let body: unknown;
  if (req.method === 'POST') {
    const read = await readJsonBody(ctx, req, res);
    if (!read) return;
    body = read.body;
  }

  // A request that carries the stateless era's _meta envelope (or names its revision) is that era's.
  if (req.method === 'POST' && !(await handshakeEra(req, body))) {
    return writeResponse(
      await ctx.modern.fetch(webRequest(req, abortedWith(res)), {
        authInfo: auth,
        parsedBody: carryProtocolKey(body),
      }),
      res,
    );
  }
  const sessionId = req.headers['mcp-session-id'];
  if (typeof sessionId === 'string')
    return serveInSession(ctx, req, res, { sessionId, caller, toolsets, body });
  return openSession(ctx, req, res, principal, toolsets, body);
}

/**
 * A tools/call's `params.idempotencyKey` (SEP-3182), moved into its `_meta` under PROTOCOL_KEY_META:
 * the stateless era's SDK drops params it does not know before the handler sees them.
 */
function carryProtocolKey(body: unknown): unknown {
  const message = body as { method?: unknown; params?: Record<string, unknown> } | null;
  const params = message?.params;
  if (message?.method !== 'tools/call' || !params || typeof params !== 'object') return body;
  const meta = (params._meta && typeof params._meta === 'object' ? params._meta : {}) as Record<
    string,
    unknown
  >;
  // Only params.idempotencyKey sets it: a client's own value there is not a second way in.
  const { [PROTOCOL_KEY_META]: _sent, ...rest } = meta;
  if (params.idempotencyKey === undefined && _sent === undefined) return body;
  const carried =
    params.idempotencyKey === undefined ? rest : { ...rest, [PROTOCOL_KEY_META]: params.idempotencyKey };
  return { ...message, params: { ...params, _meta: carried } };
}

/** What tools/list shows: the URL's ?toolsets=, else the token's, else the server's (throws on a bad list). */
function chooseToolsets(ctx: HttpContext, url: Readonly<URL>, principal: Principal): readonly Toolset[] {
  const asked = url.searchParams.get('toolsets');
  if (asked !== null) return parseToolsets(asked);
  return principal.toolsets ? normalizeToolsets(principal.toolsets) : ctx.gateway.defaultToolsets;
}

/** The POST body as JSON, or undefined once the refusal is answered (too slow, too large, not JSON, too deep). */
async function readJsonBody(
  ctx: HttpContext,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<{ body: unknown } | undefined> {
  const { maxRequestBytes } = ctx.opts;
  const read = await readBody(req, maxRequestBytes, ctx.bodyTimeoutMs);
  if (read === 'too_slow') {
    res.setHeader('Connection', 'close');
    res.on('finish', () => req.destroy());
    rpcError(
      res,
      408,
      -32600,
      `The request body did not arrive within ${ctx.bodyTimeoutMs} ms (DOSSIER_REQUEST_BODY_TIMEOUT_MS)`,
    );
    return undefined;
  }
  if (read === 'too_large') {
    rpcError(
      res,
      413,
      -32600,
      `Request body exceeds ${maxRequestBytes} bytes (DOSSIER_MAX_REQUEST_BYTES). Send less in one request: a large input goes in a file (upload it with POST /artifacts or register_artifact, then name its digest).`,
    );
    return undefined;
  }
  try {
    return { body: parseBoundedJson(read.toString('utf8'), ctx.maxJsonDepth) };
  } catch (err) {
    if (err instanceof JsonTooDeep)
      rpcError(
        res,
        400,
        -32700,
        `Parse error: ${err.message} (DOSSIER_MAX_JSON_DEPTH); send a value that nests less`,
        { limit: err.limit },
      );
    else rpcError(res, 400, -32700, 'Parse error: the body is not valid JSON');
    return undefined;
  }
}

/** A request naming its session (Mcp-Session-Id): found here, resumed from the store, or 404. */
async function serveInSession(
  ctx: HttpContext,
  req: IncomingMessage,
  res: ServerResponse,
  asked: { sessionId: string; caller: Caller; toolsets: readonly Toolset[]; body: unknown },
) {
  const { sessionId, caller, toolsets, body } = asked;
  const { principal } = caller;
  // Requests are counted where they are handled (server.ts); what else a session posts
  // (notifications, responses) and DELETE are counted here, but for what every client sends
  // right after initialize: notifications/initialized and the GET of its event stream.
  if (req.method !== 'GET' && !isJsonRpcRequest(body) && !isInitialized(body)) {
    const wait = await ctx.gateway.throttle(principal);
    if (wait) return tooMany(res, wait);
  }
  const live =
    caller.sessionLive === undefined
      ? undefined
      : { live: caller.sessionLive, toolsets: caller.sessionToolsets };
  const session = await ctx.sessions.find(sessionId, principal, live, toolsets);
  if (session === 'busy') {
    res.setHeader('Retry-After', '1');
    return rpcError(
      res,
      503,
      -32000,
      'This gateway is resuming too many sessions at once; retry in a moment',
    );
  }
  if (!session) return rpcError(res, 404, -32001, 'Session not found; initialize a new session');
  return serveMcp(session, req, res, body);
}

/** A request with no session: an initialize request opens one (within the caps), anything else is refused. */
async function openSession(
  ctx: HttpContext,
  req: IncomingMessage,
  res: ServerResponse,
  principal: Principal,
  toolsets: readonly Toolset[],
  body: unknown,
) {
  if (req.method !== 'POST' || !isInitializeRequest(body)) {
    return rpcError(
      res,
      400,
      -32000,
      'No session: send an initialize request first (without Mcp-Session-Id)',
    );
  }
  // Opening sessions is a call like any other: it counts against the principal's rate.
  const wait = await ctx.gateway.throttle(principal);
  if (wait) return tooMany(res, wait);
  const init = initRecord((body as { params?: unknown }).params);
  if (init === undefined) {
    return rpcError(
      res,
      400,
      -32602,
      `The initialize request's capabilities and clientInfo exceed ${MAX_INIT_BYTES} bytes; send less.`,
    );
  }
  if (!ctx.sessions.admit(principal)) {
    res.setHeader('Retry-After', '1');
    return rpcError(res, 503, -32000, 'Too many sessions are being opened at once; retry in a moment');
  }
  try {
    const session = await ctx.sessions.open(principal, init, toolsets);
    await serveMcp(session, req, res, body);
  } finally {
    ctx.sessions.done(principal);
  }
}

/** Hands one request to its session's transport and writes the reply. */
async function serveMcp(session: Session, req: IncomingMessage, res: ServerResponse, body: unknown) {
  const { auth } = req as IncomingMessage & { auth?: AuthInfo };
  const response = await session.transport.handleRequest(webRequest(req), {
    authInfo: auth,
    parsedBody: body,
  });
  await writeResponse(response, res);
}

/** A signal aborted when the client goes away before its reply is written: a wait ends, never a launch. */
function abortedWith(res: ServerResponse): AbortSignal {
  const controller = new AbortController();
  res.once('close', () => {
    if (!res.writableFinished) controller.abort();
  });
  return controller.signal;
}
