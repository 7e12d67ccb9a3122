// The audit UI's front door. Temporal's UI server listens on a private
// loopback port and this proxy serves the address users open:
// - only a signed-in principal passes (a dossier token: the sign-in form at
//   /dossier/sign-in opens a session kept here, whose random id alone the
//   browser holds in an HttpOnly cookie; or an Authorization header),
//   and it sees its own team's workflows only: every API read is checked and
//   rewritten by uiScope.ts, and workflow lists are filtered on the way back;
// - its front page is the audit view (uiAuditView.ts): the list with each
//   workflow's tool, principal, target and outcome;
// - the UI's codec endpoint is here too (/codec/decode, uiCodec.ts): the guard
//   forwards a viewer's payloads to the gateway with the session's token;
// - only reads pass (GET and HEAD). The UI server's own write switch
//   (disableWriteActions) is not enough: it lets through any POST whose decoded
//   path names a workflow query, and its API router matches the raw path, so a
//   name holding `%2F` (a batch job's id, a signal's name) smuggles a batch
//   terminate or a signal-with-start past it.
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pipeline } from 'node:stream/promises';
import { randomBytes } from 'node:crypto';
import { bearerToken } from '../mcp/requests.ts';
import { ownExecutions, pageTokens, scopeUiRequest, type PageTokens, type ScopedRequest } from './uiScope.ts';
import { DECODE_PATH, forwardDecode } from './uiCodec.ts';
import { AUDIT_LANDING, AUDIT_VIEW_PATH, auditViewPage } from './uiAuditView.ts';
import {
  cookieValue,
  fromOwnPages,
  nextPage,
  SIGN_IN_PATH,
  SIGN_OUT_PATH,
  signInPage,
  uiCookie,
  UiSessions,
  type SignIn,
  type UiViewer,
} from './uiSignIn.ts';

/** Methods that reach the UI server; every other one is answered 405 here. */
export const UI_READ_METHODS = ['GET', 'HEAD'] as const;

/** How long the UI server may take to answer one request before the browser gets 502. */
const UPSTREAM_TIMEOUT_MS = 60_000;

/** Headers of one hop, never passed on (RFC 9110 §7.6.1), and a body's framing, which Node sets anew. */
const HOP_BY_HOP = [
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'content-length',
];

/** The gRPC status code of each HTTP status the guard answers with. */
const GRPC_CODES: Record<number, number> = { 400: 3, 401: 16, 403: 7, 405: 12, 500: 13, 502: 14 };

/** Request headers the UI server never gets: the viewer's token stays here. */
const CREDENTIALS = ['authorization', 'cookie'];

/** The most a filtered workflow list or history page may hold, in bytes, before the browser gets 502. */
const MAX_FILTERED_REPLY_BYTES = 64 * 1024 * 1024;

function endToEnd(headers: http.IncomingHttpHeaders): http.OutgoingHttpHeaders {
  const named = String(headers.connection ?? '')
    .toLowerCase()
    .split(',')
    .map((h) => h.trim());
  return Object.fromEntries(
    Object.entries(headers).filter(([k]) => !HOP_BY_HOP.includes(k) && !named.includes(k)),
  );
}

export type { UiViewer } from './uiSignIn.ts';

export interface UiGuard {
  url: string;
  stop(): Promise<void>;
}

/** A free port on loopback, for a server this process starts next. */
export async function freeLoopbackPort(): Promise<number> {
  const probe = http.createServer();
  await new Promise<void>((resolve, reject) => probe.once('error', reject).listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

function refuse(res: ServerResponse, status: number, message: string, headers: Record<string, string> = {}) {
  // The shape of Temporal's HTTP API errors (a gRPC status code and a message), which the UI shows.
  const body = JSON.stringify({ code: GRPC_CODES[status] ?? 2, message, error: message });
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': String(Buffer.byteLength(body)),
    ...headers,
  });
  res.end(body);
}

/**
 * The viewer's token: the Authorization header, or the token of the browser's session. Two sign-in
 * cookies (one set for a narrower path by another service on this host, say) sign nobody in.
 */
function viewerToken(req: IncomingMessage, signIn: SignIn): string | undefined {
  const bearer = bearerToken(req);
  if (bearer) return bearer;
  const session = cookieValue(req, signIn.cookie);
  return session ? signIn.sessions.token(session) : undefined;
}

/** The UI's codec requests: a signed-in viewer's, from this UI's own pages, POST only. */
async function decode(req: IncomingMessage, res: ServerResponse, signIn: SignIn, codec: string | undefined) {
  if (req.method !== 'POST') {
    req.resume();
    return refuse(res, 405, 'POST the payloads to open: {"payloads": [...]}.', { allow: 'POST' });
  }
  // A page of another site, or of another port of this host, opens nothing in the viewer's name.
  if (!fromOwnPages(req)) {
    req.resume();
    return refuse(res, 403, 'Payloads open only for this audit UI’s own pages.');
  }
  const token = viewerToken(req, signIn);
  if (!token || !(await signIn.viewer(token))) {
    req.resume();
    return refuse(res, 401, `Sign in at ${SIGN_IN_PATH} to read your team's payloads.`);
  }
  return forwardDecode(req, res, codec, token);
}

/** Passes a scoped read to the UI server without the viewer's credentials, rewriting lists and history pages. */
function forward(
  req: IncomingMessage,
  res: ServerResponse,
  to: {
    upstream: { host: string; port: number };
    scoped: Exclude<ScopedRequest, { refuse: number }>;
    team: string;
    tokens: PageTokens;
  },
) {
  const { scoped } = to;
  const headers = endToEnd(req.headers);
  for (const h of CREDENTIALS) delete headers[h];
  // A list or history page is read whole and rewritten: it must come back uncompressed.
  if (scoped.filter) delete headers['accept-encoding'];
  const upstream = http.request(
    {
      host: to.upstream.host,
      port: to.upstream.port,
      method: req.method,
      path: scoped.forward,
      headers,
      timeout: UPSTREAM_TIMEOUT_MS,
    },
    (reply) => {
      if (scoped.filter && reply.statusCode === 200 && req.method === 'GET') {
        const bound = scoped.bound ?? '';
        return void rewritten(reply, res, (body) =>
          scoped.filter === 'executions' ? ownExecutions(body, to.team) : sealPage(body, bound, to.tokens),
        );
      }
      const { 'content-length': length } = reply.headers;
      res.writeHead(reply.statusCode ?? 502, {
        ...endToEnd(reply.headers),
        ...(length !== undefined ? { 'content-length': length } : {}),
      });
      // A reply cut short upstream ends the browser's too, rather than leaving it waiting.
      pipeline(reply, res).catch(() => res.destroy());
    },
  );
  upstream.on('timeout', () => upstream.destroy(new Error('timeout')));
  upstream.on('error', () => {
    if (!res.headersSent) refuse(res, 502, 'The audit UI server did not answer; is it running?');
    else res.destroy();
  });
  res.on('close', () => upstream.destroy());
  upstream.end();
}

/**
 * Serves `host:port` for the UI server at `upstream`: signed-in viewers only, each seeing the
 * workflows of its own team in `namespace`, reads only.
 */
export async function startUiGuard(opts: {
  host: string;
  port: number;
  upstream: { host: string; port: number };
  namespace: string;
  viewer: UiViewer;
  /** The gateway's codec endpoint (…/codec) as this guard reaches it: decodes go there with the viewer's token. */
  codec?: string;
}): Promise<UiGuard> {
  // History page tokens are sealed under a key of this guard's own: a restart asks pages anew.
  const tokens = pageTokens(randomBytes(32));
  const signIn: SignIn = { viewer: opts.viewer, sessions: new UiSessions(), cookie: uiCookie(opts.port) };
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const pathname = (req.url ?? '/').split('?')[0];
    if (pathname === SIGN_IN_PATH || pathname === SIGN_OUT_PATH) return signInPage(req, res, signIn);
    if (pathname === DECODE_PATH) return decode(req, res, signIn, opts.codec);
    if (!(UI_READ_METHODS as readonly string[]).includes(req.method ?? '')) {
      req.resume();
      return refuse(res, 405, 'The audit UI is read-only: only GET and HEAD reach it.', {
        allow: UI_READ_METHODS.join(', '),
      });
    }
    req.resume();
    const token = viewerToken(req, signIn);
    const viewer = token ? await opts.viewer(token) : undefined;
    if (!viewer) {
      if (pathname?.startsWith('/api/'))
        return refuse(
          res,
          401,
          `Sign in at ${SIGN_IN_PATH} with your dossier token (or send Authorization: Bearer <token>).`,
        );
      // Back to the page asked for once signed in (a launch's ui_url, say).
      const location = `${SIGN_IN_PATH}?${new URLSearchParams({ next: nextPage(req.url) })}`;
      res.writeHead(303, { location, 'content-length': '0' });
      return void res.end();
    }
    // The UI's front page and the audit link open the list with the audit columns (uiAuditView.ts).
    if (pathname === AUDIT_VIEW_PATH) return auditViewPage(req, res, opts.namespace);
    if (pathname === '/') {
      res.writeHead(303, { location: AUDIT_LANDING, 'content-length': '0' });
      return void res.end();
    }
    const scoped = scopeUiRequest(req.url ?? '/', viewer.team, opts.namespace, tokens);
    if ('refuse' in scoped) return refuse(res, scoped.refuse, scoped.message);
    forward(req, res, { upstream: opts.upstream, scoped, team: viewer.team, tokens });
  };
  const server = http.createServer((req, res) => {
    handle(req, res).catch(() => {
      if (!res.headersSent) refuse(res, 500, 'The audit UI guard failed on this request; see its log.');
      else res.destroy();
    });
  });
  await new Promise<void>((resolve, reject) =>
    server.once('error', reject).listen(opts.port, opts.host, () => resolve()),
  );
  return {
    url: `http://${opts.host}:${opts.port}`,
    stop: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** A history page with its page token sealed for the workflow it pages. */
function sealPage(body: unknown, bound: string, tokens: PageTokens): unknown {
  const page = body as { nextPageToken?: unknown };
  return typeof page?.nextPageToken === 'string' && page.nextPageToken
    ? { ...page, nextPageToken: tokens.seal(page.nextPageToken, bound) }
    : body;
}

/** A JSON reply from the UI server, read whole and passed on as `rewrite` makes it. */
async function rewritten(reply: IncomingMessage, res: ServerResponse, rewrite: (body: unknown) => unknown) {
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of reply as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > MAX_FILTERED_REPLY_BYTES) throw new Error('too large');
      chunks.push(chunk);
    }
    const body = JSON.stringify(rewrite(JSON.parse(Buffer.concat(chunks).toString('utf8'))));
    res.writeHead(200, {
      'content-type': 'application/json',
      'content-length': String(Buffer.byteLength(body)),
      'cache-control': 'no-store',
    });
    res.end(body);
  } catch {
    reply.destroy();
    if (!res.headersSent) refuse(res, 502, 'The audit UI server sent a reply that could not be read.');
    else res.destroy();
  }
}
