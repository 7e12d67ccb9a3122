// What every route of the HTTP gateway reads: its options, the parts it was
// started with, and the checks made before any route (Host and Origin against
// DNS rebinding, the bearer token).
import type { IncomingMessage } from 'node:http';
import type { McpHttpHandler } from '@modelcontextprotocol/server';
import type { Principal } from '../domain/types.ts';
import type { Gateway } from '../gateway/gateway.ts';
import type { TokenStore } from '../store/tokens.ts';
import type { SessionStore } from '../store/sessions.ts';
import type { TeamPayloadCodec } from '../temporal/codec.ts';
import type { PayloadKey } from '../temporal/keys.ts';
import type { Sessions } from './sessions.ts';
import { bearerToken } from './requests.ts';

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

/** One running HTTP gateway's parts, handed to each route. */
export interface HttpContext {
  gateway: Gateway;
  tokens: TokenStore;
  opts: HttpOptions;
  sessions: Sessions;
  /** The stateless era (2026-07-28); everything else is the handshake era's, served by the sessions. */
  modern: McpHttpHandler;
  bodyTimeoutMs: number;
  maxJsonDepth: number;
  /** The port listened on (opts.port until bound: 0 picks one). */
  boundPort: number;
}

/** Who called: the token's principal, and what the store says of the session named, if any. */
export interface Caller {
  principal: Principal;
  sessionLive?: boolean;
  sessionToolsets?: string[];
}

// A loopback name with any port is no rebinding risk: the attack needs a foreign hostname.
const LOOPBACK = /^(localhost|127\.0\.0\.1|\[::1\])(:\d+)?$/;

export function allowedHost(ctx: HttpContext, host: string | undefined): boolean {
  if (!host) return false;
  const h = host.toLowerCase();
  return (
    LOOPBACK.test(h) || h === `${ctx.opts.host}:${ctx.boundPort}` || (ctx.opts.allowedHosts ?? []).includes(h)
  );
}

export function allowedOrigin(ctx: HttpContext, origin: string | undefined): boolean {
  if (origin === undefined) return true;
  const o = origin.toLowerCase();
  const hostPart = /^https?:\/\/(.+)$/.exec(o)?.[1];
  return (hostPart !== undefined && LOOPBACK.test(hostPart)) || (ctx.opts.allowedOrigins ?? []).includes(o);
}

/**
 * The bearer token's principal; for a request in session `sessionId`, with
 * whether the store holds that session live for it (read in the same
 * statement: every request of a session asks both).
 */
export async function authenticate(
  ctx: HttpContext,
  req: IncomingMessage,
  sessionId: string | undefined,
): Promise<Caller | undefined> {
  const token = bearerToken(req);
  if (!token) return undefined;
  const liveSince = sessionId === undefined ? undefined : ctx.sessions.liveSince();
  if (liveSince === undefined) {
    const principal = await ctx.tokens.resolve(token);
    return principal && { principal };
  }
  return ctx.tokens.resolveInSession(token, { id: sessionId!, liveSince });
}
