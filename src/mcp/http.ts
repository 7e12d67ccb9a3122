// Streamable HTTP transport for the gateway. Checks, in order: route, Host and
// Origin (DNS-rebinding protection), bearer token, body size; then hands the
// request to the MCP session it belongs to.
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { DossierError, toToolError } from '../domain/errors.ts';
import { JSON_DEPTH, JsonTooDeep, parseBoundedJson } from '../domain/json.ts';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { TokenStore } from '../store/tokens.ts';
import type { SessionStore } from '../store/sessions.ts';
import type { Principal } from '../domain/types.ts';
import type { Gateway } from '../gateway/gateway.ts';
import type { TeamPayloadCodec } from '../temporal/codec.ts';
import { decodeForTeam } from './codecEndpoint.ts';
import { initRecord, MAX_INIT_BYTES, Sessions, type Session } from './sessions.ts';
import { webRequest, writeResponse } from './webResponse.ts';
import { serveMetrics } from './metricsRoute.ts';
import { isRestRoute, sendJson, serveRest } from './rest.ts';
import { bearerToken, readBody } from './requests.ts';
import { isLegacyRequest, type McpHttpHandler } from '@modelcontextprotocol/server';
import { createModernHandler } from './modern.ts';
import type { PayloadKey } from '../temporal/keys.ts';
import { normalizeToolsets, parseToolsets, type Toolset } from '../tools/toolsets.ts';

export interface HttpOptions {
  host: string;
  port: number;
  maxRequestBytes: number;
  /** Largest artifact upload (POST /artifacts, src/mcp/rest.ts). */
  maxUploadBytes: number;
  /** How deeply a JSON body may nest arrays and objects (DOSSIER_MAX_JSON_DEPTH). */
  maxJsonDepth?: number;
  /** Host header values accepted besides the bound address (e.g. a load balancer name). */
  allowedHosts?: string[];
  /** Origins accepted from browsers; requests without an Origin header are not browsers and pass. */
  allowedOrigins?: string[];
  /** Sessions idle this long are closed (default 30 minutes). */
  sessionIdleMs?: number;
  /** Sessions open at once on this gateway, and per principal (the least recently used one goes first). */
  maxSessions?: number;
  maxSessionsPerPrincipal?: number;
  /** How long a request body may take to arrive (a client that trickles gets 408). */
  bodyTimeoutMs?: number;
  /** The cluster's payload keys: the stateless era's requestState is sealed under a key derived from them. */
  keys: PayloadKey[];
  /** Serves the codec endpoint (/codec/decode, for a bearer token; the audit UI's guard calls it) when given. */
  codec?: TeamPayloadCodec;
  /** The operator's token for GET /metrics (unset: the route is off). */
  metricsToken?: string;
  /**
   * Where sessions are recorded, so that another replica (or this one after a
   * restart) resumes them and the per-principal cap counts every replica's.
   * Every request reads its session's row there (in the token lookup's
   * statement), so a session closed by another replica ends here at once;
   * when each was last seen is written in batches (sessions.ts).
   */
  sessionStore?: SessionStore;
}

export interface HttpGateway {
  url: string;
  port: number;
  sessions(): number;
  close(): Promise<void>;
}

/** How long closing the gateway waits for requests still being answered, at most. */
const CLOSE_WAIT_MS = 5_000;

export async function startHttpGateway(
  gateway: Gateway,
  tokens: TokenStore,
  opts: HttpOptions,
): Promise<HttpGateway> {
  const sessions = new Sessions(gateway, {
    idleMs: opts.sessionIdleMs ?? 30 * 60_000,
    maxSessions: opts.maxSessions ?? 10_000,
    perPrincipal: opts.maxSessionsPerPrincipal ?? 64,
    store: opts.sessionStore,
  });
  const bodyTimeoutMs = opts.bodyTimeoutMs ?? 30_000;
  const maxJsonDepth = opts.maxJsonDepth ?? JSON_DEPTH.default;
  let boundPort = opts.port;
  // The stateless era (2026-07-28); everything else is the handshake era's, served by the sessions.
  const modern: McpHttpHandler = createModernHandler(gateway, {
    keys: opts.keys,
    maxRequestBytes: opts.maxRequestBytes,
  });

  // A loopback name with any port is no rebinding risk: the attack needs a foreign hostname.
  const LOOPBACK = /^(localhost|127\.0\.0\.1|\[::1\])(:\d+)?$/;
  const allowedHost = (host: string | undefined) => {
    if (!host) return false;
    const h = host.toLowerCase();
    return LOOPBACK.test(h) || h === `${opts.host}:${boundPort}` || (opts.allowedHosts ?? []).includes(h);
  };
  const allowedOrigin = (origin: string | undefined) => {
    if (origin === undefined) return true;
    const o = origin.toLowerCase();
    const hostPart = /^https?:\/\/(.+)$/.exec(o)?.[1];
    return (hostPart !== undefined && LOOPBACK.test(hostPart)) || (opts.allowedOrigins ?? []).includes(o);
  };

  /**
   * The bearer token's principal; for a request in session `sessionId`, with
   * whether the store holds that session live for it (read in the same
   * statement: every request of a session asks both).
   */
  async function authenticate(
    req: IncomingMessage,
    sessionId: string | undefined,
  ): Promise<{ principal: Principal; sessionLive?: boolean; sessionToolsets?: string[] } | undefined> {
    const token = bearerToken(req);
    if (!token) return undefined;
    const liveSince = sessionId === undefined ? undefined : sessions.liveSince();
    if (liveSince === undefined) {
      const principal = await tokens.resolve(token);
      return principal && { principal };
    }
    return tokens.resolveInSession(token, { id: sessionId!, liveSince });
  }

  async function handle(req: IncomingMessage, res: ServerResponse) {
    const url = new URL(req.url ?? '/', 'http://gateway');
    if (url.pathname === '/healthz' && req.method === 'GET') return sendJson(res, 200, { ok: true });
    if (url.pathname === '/metrics' && req.method === 'GET') {
      if (!allowedHost(req.headers.host))
        return rpcError(res, 403, -32000, `Host ${req.headers.host} is not allowed`);
      return serveMetrics(req, res, opts.metricsToken);
    }
    const codecRoute = opts.codec && url.pathname === '/codec/decode';
    if (url.pathname !== '/mcp' && !isRestRoute(url.pathname) && !codecRoute) {
      return sendJson(res, 404, {
        error: 'not found; the MCP endpoint is /mcp (and POST /artifacts, GET|POST /bundles)',
      });
    }
    // The REST routes answer errors in dossier's shape, the MCP endpoint in JSON-RPC's.
    const deny = (code: 'forbidden' | 'unauthorized', message: string, remediation: string) => {
      const [status, rpcCode] = code === 'forbidden' ? [403, -32000] : [401, -32001];
      return isRestRoute(url.pathname)
        ? sendJson(res, status, { error: new DossierError(code, message, remediation).toToolError() })
        : rpcError(res, status, rpcCode, message);
    };
    if (!allowedHost(req.headers.host))
      return deny(
        'forbidden',
        `Host ${req.headers.host} is not allowed`,
        'Use the gateway by an address it serves (loopback, or one in DOSSIER_ALLOWED_HOSTS).',
      );
    if (!allowedOrigin(req.headers.origin))
      return deny(
        'forbidden',
        `Origin ${req.headers.origin} is not allowed`,
        'Call from a page on a loopback origin or one in DOSSIER_ALLOWED_ORIGINS, or from outside a browser.',
      );
    if (codecRoute) return serveCodec(req, res);

    const sessionId = req.headers['mcp-session-id'];
    const caller = await authenticate(req, typeof sessionId === 'string' ? sessionId : undefined);
    if (!caller) {
      res.setHeader('WWW-Authenticate', 'Bearer realm="dossier"');
      return deny(
        'unauthorized',
        'Missing or invalid bearer token: send Authorization: Bearer <token>',
        'Send a live token of yours (`npx dossier token create`, or the one in dev.json).',
      );
    }
    const { principal } = caller;
    const auth: AuthInfo = {
      token: 'redacted',
      clientId: principal.principal,
      scopes: [principal.role],
      extra: { principal },
    };
    (req as IncomingMessage & { auth?: unknown }).auth = auth;

    if (isRestRoute(url.pathname))
      return serveRest(gateway, principal, req, res, url, {
        maxUploadBytes: opts.maxUploadBytes,
        bodyTimeoutMs,
      });

    // What tools/list shows: the URL's ?toolsets=, else the token's, else the server's.
    let toolsets: readonly Toolset[];
    try {
      const asked = url.searchParams.get('toolsets');
      toolsets =
        asked !== null
          ? parseToolsets(asked)
          : principal.toolsets
            ? normalizeToolsets(principal.toolsets)
            : gateway.defaultToolsets;
    } catch (err) {
      return rpcError(res, 400, -32602, `?toolsets=: ${(err as Error).message}`);
    }
    auth.extra = { principal, toolsets };

    let body: unknown;
    if (req.method === 'POST') {
      const read = await readBody(req, opts.maxRequestBytes, bodyTimeoutMs);
      if (read === 'too_slow') {
        res.setHeader('Connection', 'close');
        res.on('finish', () => req.destroy());
        return rpcError(
          res,
          408,
          -32600,
          `The request body did not arrive within ${bodyTimeoutMs} ms (DOSSIER_REQUEST_BODY_TIMEOUT_MS)`,
        );
      }
      if (read === 'too_large') {
        return rpcError(
          res,
          413,
          -32600,
          `Request body exceeds ${opts.maxRequestBytes} bytes (DOSSIER_MAX_REQUEST_BYTES)`,
        );
      }
      try {
        body = parseBoundedJson(read.toString('utf8'), maxJsonDepth);
      } catch (err) {
        if (err instanceof JsonTooDeep)
          return rpcError(
            res,
            400,
            -32700,
            `Parse error: ${err.message} (DOSSIER_MAX_JSON_DEPTH); send a value that nests less`,
            { limit: err.limit },
          );
        return rpcError(res, 400, -32700, 'Parse error: the body is not valid JSON');
      }
    }

    // A request that carries the stateless era's _meta envelope (or names its revision) is that era's.
    if (req.method === 'POST' && !(await isLegacyRequest(webRequest(req), body))) {
      return writeResponse(
        await modern.fetch(webRequest(req, abortedWith(res)), { authInfo: auth, parsedBody: body }),
        res,
      );
    }

    if (typeof sessionId === 'string') {
      // Requests are counted where they are handled (server.ts); what else a session posts
      // (notifications, responses) and DELETE are counted here, but for what every client sends
      // right after initialize: notifications/initialized and the GET of its event stream.
      if (req.method !== 'GET' && !isJsonRpcRequest(body) && !isInitialized(body)) {
        const wait = await gateway.throttle(principal);
        if (wait) return tooMany(res, wait);
      }
      const live =
        caller.sessionLive === undefined
          ? undefined
          : { live: caller.sessionLive, toolsets: caller.sessionToolsets };
      const session = await sessions.find(sessionId, principal, live, toolsets);
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
    if (req.method !== 'POST' || !isInitializeRequest(body)) {
      return rpcError(
        res,
        400,
        -32000,
        'No session: send an initialize request first (without Mcp-Session-Id)',
      );
    }
    // Opening sessions is a call like any other: it counts against the principal's rate.
    const wait = await gateway.throttle(principal);
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
    if (!sessions.admit(principal)) {
      res.setHeader('Retry-After', '1');
      return rpcError(res, 503, -32000, 'Too many sessions are being opened at once; retry in a moment');
    }
    try {
      const session = await sessions.open(principal, init, toolsets);
      await serveMcp(session, req, res, body);
    } finally {
      sessions.done(principal);
    }
  }

  async function serveCodec(req: IncomingMessage, res: ServerResponse) {
    if (req.method !== 'POST') return sendJson(res, 405, { error: 'POST {payloads: [...]}' });
    const token = bearerToken(req);
    const caller = token ? await tokens.resolve(token) : undefined;
    if (!caller) {
      return sendJson(res, 401, {
        error:
          'Send Authorization: Bearer <token>; payloads open only for their own team (in a browser, the audit UI opens them for its signed-in viewer).',
      });
    }
    const read = await readBody(req, opts.maxRequestBytes * 16, bodyTimeoutMs);
    if (read === 'too_slow') return sendJson(res, 408, { error: 'the request body did not arrive in time' });
    if (read === 'too_large') return sendJson(res, 413, { error: 'too many payloads in one request' });
    try {
      const decoded = decodeForTeam(
        opts.codec!,
        caller,
        parseBoundedJson(read.toString('utf8'), maxJsonDepth),
      );
      res.setHeader('x-dossier-withheld', String(decoded.withheld));
      return sendJson(res, 200, { payloads: decoded.payloads });
    } catch (err) {
      return sendJson(res, 400, { error: (err as Error).message });
    }
  }

  // Requests being answered: closing waits for them (their waits end when their sessions close),
  // so none reads a store that is already closed.
  const inFlight = new Set<Promise<void>>();
  const httpServer = http.createServer((req, res) => {
    const answered = handle(req, res).catch((err) => {
      // Never the failure's own text (database messages, paths): a reference the server log has.
      const { message } = toToolError(err);
      if (!res.headersSent) rpcError(res, 500, -32603, message);
      else res.end();
    });
    inFlight.add(answered);
    void answered.finally(() => inFlight.delete(answered));
  });
  httpServer.keepAliveTimeout = 65_000;
  httpServer.headersTimeout = 66_000;
  httpServer.requestTimeout = 0; // launch waits may hold a request for up to 110 s

  const reaper = setInterval(() => sessions.reap(), 60_000);
  reaper.unref();

  await new Promise<void>((resolve, reject) => {
    httpServer.once('error', reject);
    httpServer.listen(opts.port, opts.host, () => resolve());
  });
  boundPort = (httpServer.address() as AddressInfo).port;
  const hostForUrl = opts.host.includes(':') ? `[${opts.host}]` : opts.host;
  return {
    url: `http://${hostForUrl}:${boundPort}/mcp`,
    port: boundPort,
    sessions: () => sessions.size,
    async close() {
      clearInterval(reaper);
      await modern.close();
      await sessions.closeAll();
      httpServer.closeAllConnections();
      await new Promise<void>((resolve) => httpServer.close(() => resolve()));
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.allSettled([...inFlight]),
        new Promise((resolve) => (timer = setTimeout(resolve, CLOSE_WAIT_MS))),
      ]);
      clearTimeout(timer);
    },
  };
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

/** 429 with Retry-After: the principal is over its rate. */
function tooMany(res: ServerResponse, wait: { message: string; retry_after_ms: number }) {
  res.setHeader('Retry-After', String(Math.ceil(wait.retry_after_ms / 1000)));
  return sendJson(res, 429, {
    jsonrpc: '2.0',
    error: { code: -32000, message: wait.message, data: wait },
    id: null,
  });
}

function isInitialized(body: unknown): boolean {
  return (body as { method?: unknown } | undefined)?.method === 'notifications/initialized';
}

/** A JSON-RPC request (a method and an id), as opposed to a notification or a response. */
function isJsonRpcRequest(body: unknown): boolean {
  const m = body as { method?: unknown; id?: unknown } | undefined;
  return typeof m?.method === 'string' && m.id !== undefined && m.id !== null;
}

function rpcError(res: ServerResponse, status: number, code: number, message: string, data?: unknown) {
  sendJson(res, status, { jsonrpc: '2.0', error: { code, message, ...(data ? { data } : {}) }, id: null });
}
