// Streamable HTTP transport for the gateway. Checks, in order: route, Host and
// Origin (DNS-rebinding protection), bearer token, body size; then hands the
// request to the MCP session it belongs to (mcpEndpoint.ts) or to the routes
// beside it (rest.ts, codecEndpoint.ts, metricsRoute.ts).
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { DossierError, toToolError } from '../domain/errors.ts';
import { JSON_DEPTH } from '../domain/json.ts';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { TokenStore } from '../store/tokens.ts';
import type { Gateway } from '../gateway/gateway.ts';
import { serveCodec } from './codecEndpoint.ts';
import { Sessions } from './sessions.ts';
import { serveMetrics } from './metricsRoute.ts';
import { isRestRoute, sendJson, serveRest } from './rest.ts';
import { createModernHandler } from './modern.ts';
import {
  allowedHost,
  allowedOrigin,
  authenticate,
  type HttpContext,
  type HttpOptions,
} from './httpContext.ts';
import { serveMcpEndpoint } from './mcpEndpoint.ts';
import { rpcError } from './rpcReplies.ts';

export type { HttpOptions } from './httpContext.ts';

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
  const ctx: HttpContext = {
    gateway,
    tokens,
    opts,
    sessions: new Sessions(gateway, {
      idleMs: opts.sessionIdleMs ?? 30 * 60_000,
      maxSessions: opts.maxSessions ?? 10_000,
      perPrincipal: opts.maxSessionsPerPrincipal ?? 64,
      store: opts.sessionStore,
    }),
    modern: createModernHandler(gateway, { keys: opts.keys, maxRequestBytes: opts.maxRequestBytes }),
    bodyTimeoutMs: opts.bodyTimeoutMs ?? 30_000,
    maxJsonDepth: opts.maxJsonDepth ?? JSON_DEPTH.default,
    boundPort: opts.port,
  };

  // Requests being answered: closing waits for them (their waits end when their sessions close),
  // so none reads a store that is already closed.
  const inFlight = new Set<Promise<void>>();
  const httpServer = http.createServer((req, res) => {
    const answered = handle(ctx, req, res).catch((err) => {
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

  const reaper = setInterval(() => ctx.sessions.reap(), 60_000);
  reaper.unref();

  await new Promise<void>((resolve, reject) => {
    httpServer.once('error', reject);
    httpServer.listen(opts.port, opts.host, () => resolve());
  });
  ctx.boundPort = (httpServer.address() as AddressInfo).port;
  const hostForUrl = opts.host.includes(':') ? `[${opts.host}]` : opts.host;
  return {
    url: `http://${hostForUrl}:${ctx.boundPort}/mcp`,
    port: ctx.boundPort,
    sessions: () => ctx.sessions.size,
    async close() {
      clearInterval(reaper);
      await ctx.modern.close();
      await ctx.sessions.closeAll();
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

/**
 * What a request to exactly `/mcp` parses to (most requests). The routes only read a request's URL
 * (read-only by type from here on), so one serves them all, and the cheapest call does not parse its own.
 */
const MCP_URL: Readonly<URL> = new URL('/mcp', 'http://gateway');

/** One request: its route, then Host and Origin, then the bearer token; then the route answers. */
async function handle(ctx: HttpContext, req: IncomingMessage, res: ServerResponse) {
  const url = req.url === '/mcp' ? MCP_URL : new URL(req.url ?? '/', 'http://gateway');
  if (url.pathname === '/healthz' && req.method === 'GET') return sendJson(res, 200, { ok: true });
  if (url.pathname === '/metrics' && req.method === 'GET') {
    if (!allowedHost(ctx, req.headers.host))
      return rpcError(res, 403, -32000, `Host ${req.headers.host} is not allowed`);
    return serveMetrics(req, res, ctx.opts.metricsToken);
  }
  const codecRoute = ctx.opts.codec && url.pathname === '/codec/decode';
  if (url.pathname !== '/mcp' && !isRestRoute(url.pathname) && !codecRoute) {
    return sendJson(res, 404, {
      error: {
        code: 'not_found',
        message: `Nothing is served at ${url.pathname.slice(0, 200)}.`,
        remediation: 'The MCP endpoint is /mcp; beside it are POST /artifacts and GET|POST /bundles.',
      },
    });
  }
  if (!allowedHost(ctx, req.headers.host))
    return deny(
      res,
      url,
      'forbidden',
      `Host ${req.headers.host} is not allowed`,
      'Use the gateway by an address it serves (loopback, or one in DOSSIER_ALLOWED_HOSTS).',
    );
  if (!allowedOrigin(ctx, req.headers.origin))
    return deny(
      res,
      url,
      'forbidden',
      `Origin ${req.headers.origin} is not allowed`,
      'Call from a page on a loopback origin or one in DOSSIER_ALLOWED_ORIGINS, or from outside a browser.',
    );
  if (codecRoute) return serveCodec(ctx, req, res);

  const sessionId = req.headers['mcp-session-id'];
  const caller = await authenticate(ctx, req, typeof sessionId === 'string' ? sessionId : undefined);
  if (!caller) {
    res.setHeader('WWW-Authenticate', 'Bearer realm="dossier"');
    return deny(
      res,
      url,
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
    return serveRest(ctx.gateway, principal, req, res, url, {
      maxUploadBytes: ctx.opts.maxUploadBytes,
      bodyTimeoutMs: ctx.bodyTimeoutMs,
    });
  return serveMcpEndpoint(ctx, req, res, url, caller, auth);
}

/** A refusal before any route: the REST routes answer errors in dossier's shape, the MCP endpoint in JSON-RPC's. */
function deny(
  res: ServerResponse,
  url: Readonly<URL>,
  code: 'forbidden' | 'unauthorized',
  message: string,
  remediation: string,
) {
  const [status, rpcCode] = code === 'forbidden' ? [403, -32000] : [401, -32001];
  return isRestRoute(url.pathname)
    ? sendJson(res, status, { error: new DossierError(code, message, remediation).toToolError() })
    : rpcError(res, status, rpcCode, message);
}
