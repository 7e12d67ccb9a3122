// The HTTP routes beside /mcp, for what does not fit a JSON-RPC message:
//   POST /artifacts?name=N     the request body becomes an artifact (201 + its record; 200 if known)
//   GET  /bundles              the caller's team's exported bundles
//   GET  /bundles/NAME         one of them, as the file export_evidence_bundle wrote
//   POST /bundles              a bundle in the body, verified and imported whole (200)
// The caller is authenticated and rate-limited like any tool call; errors have
// the tools' shape under "error".
import type { IncomingMessage, ServerResponse } from 'node:http';
import { pipeline } from 'node:stream/promises';
import { DossierError, type ToolError } from '../domain/errors.ts';
import type { Principal } from '../domain/types.ts';
import type { Gateway } from '../gateway/gateway.ts';
import { BUNDLE_LIMITS } from '../tools/ledger.ts';

export interface RestOptions {
  maxUploadBytes: number;
  bodyTimeoutMs: number;
}

/** Bundle imports (POST /bundles) verified at once on this gateway; each may hold 256 MiB. */
const MAX_CONCURRENT_IMPORTS = 3;
/** Imports in flight by principal: one each, so no one caller holds every slot. */
const importing = new Map<string, number>();
/** A bundle body must arrive whole within this, however slowly it trickles. */
const BUNDLE_ARRIVAL_MS = 5 * 60_000;

export const isRestRoute = (pathname: string) =>
  pathname === '/artifacts' || pathname === '/bundles' || pathname.startsWith('/bundles/');

const STATUS: Record<string, number> = {
  forbidden: 403,
  not_found: 404,
  resource_constraint: 413,
  policy_denied: 403,
  integrity_error: 422,
  invalid_params: 400,
};

/** A JSON reply; the MCP endpoint's non-RPC answers (404, /healthz) use it too. */
export function sendJson(res: ServerResponse, status: number, body: unknown) {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

/** Answers an error while a body may still be arriving: the connection closes rather than drains it. */
function refuse(req: IncomingMessage, res: ServerResponse, status: number, error: ToolError | DossierError) {
  res.setHeader('Connection', 'close');
  res.on('finish', () => req.destroy());
  req.resume();
  sendJson(res, status, { error: error instanceof DossierError ? error.toToolError() : error });
}

/** Longest artifact name kept (`name`). */
const MAX_NAME_CHARS = 256;

/** One REST request, authenticated, with what its routes read. */
interface RestCall {
  gateway: Gateway;
  principal: Principal;
  req: IncomingMessage;
  res: ServerResponse;
  url: Readonly<URL>;
  opts: RestOptions;
  /** The body's declared length (Content-Length; 0 when absent). */
  declared: number;
}

/** The routes by `METHOD /path`; the bundle named in the path is `/bundles/NAME`. */
const ROUTES: Record<string, (call: RestCall) => Promise<void>> = {
  'POST /artifacts': uploadArtifact,
  'GET /bundles': listBundles,
  'GET /bundles/NAME': downloadBundle,
  'POST /bundles': importBundle,
};

export async function serveRest(
  gateway: Gateway,
  principal: Principal,
  req: IncomingMessage,
  res: ServerResponse,
  url: Readonly<URL>,
  opts: RestOptions,
) {
  const limited = await gateway.throttle(principal);
  if (limited) {
    res.setHeader('Retry-After', String(Math.ceil(limited.retry_after_ms / 1000)));
    return refuse(req, res, 429, limited as unknown as ToolError);
  }
  // A body may be long, but not silent: no byte for DOSSIER_REQUEST_BODY_TIMEOUT_MS ends it.
  req.setTimeout(opts.bodyTimeoutMs, () => req.destroy(new Error('the upload stalled')));
  const declared = Number(req.headers['content-length'] ?? 0);
  const route = `${req.method} ${url.pathname === '/artifacts' || url.pathname === '/bundles' ? url.pathname : '/bundles/NAME'}`;
  const serve = ROUTES[route];
  if (serve) return serve({ gateway, principal, req, res, url, opts, declared });
  req.resume();
  return sendJson(res, 405, {
    error: new DossierError(
      'invalid_params',
      `${req.method} ${url.pathname} is not served.`,
      'The routes beside MCP are POST /artifacts, GET /bundles, GET /bundles/NAME and POST /bundles.',
    ).toToolError(),
  });
}

/** Why an artifact name is refused (what it has, what to send instead), or undefined when it is kept. */
function badArtifactName(name: string | undefined): [string, string] | undefined {
  if (name?.includes('\u0000')) return ['contains a NUL character', 'without NUL characters'];
  if (name !== undefined && name.length > MAX_NAME_CHARS)
    return [
      `has ${name.length} characters, over ${MAX_NAME_CHARS}`,
      `of at most ${MAX_NAME_CHARS} characters, or none`,
    ];
  return undefined;
}

/** POST /artifacts?name=N: the body becomes an artifact. */
async function uploadArtifact({ gateway, principal, req, res, url, opts, declared }: RestCall) {
  const name = url.searchParams.get('name') ?? undefined;
  const badName = badArtifactName(name);
  if (/^multipart\//i.test(req.headers['content-type'] ?? ''))
    return refuse(
      req,
      res,
      415,
      new DossierError(
        'invalid_params',
        'The upload is a multipart form; the body must be the file itself. Nothing was stored.',
        'Send the bytes as the body (application/octet-stream), e.g. curl --data-binary @FILE, or `npx dossier upload FILE`.',
      ),
    );
  if (badName)
    return refuse(
      req,
      res,
      400,
      new DossierError(
        'invalid_params',
        `name ${badName[0]}; nothing was stored.`,
        `Send a name ${badName[1]}.`,
        {
          limit: MAX_NAME_CHARS,
        },
      ),
    );
  if (principal.role !== 'viewer' && declared > opts.maxUploadBytes) {
    return refuse(
      req,
      res,
      413,
      new DossierError(
        'resource_constraint',
        `The upload declares ${declared} bytes, over the limit of ${opts.maxUploadBytes} (DOSSIER_MAX_UPLOAD_BYTES).`,
        'Upload a smaller file, or ask an operator to raise DOSSIER_MAX_UPLOAD_BYTES.',
        { declared, limit: opts.maxUploadBytes },
      ),
    );
  }
  const result = await gateway.rest(principal, 'upload artifacts', (intake) =>
    intake.uploadArtifact(principal, req, name),
  );
  // 201 for new content; 200 for content already known, answered with its first record.
  if (result.ok)
    return sendJson(res, (result.value as { created?: boolean }).created ? 201 : 200, result.value);
  return refuse(req, res, STATUS[result.error.code] ?? 400, result.error);
}

/** GET /bundles: the caller's team's exported bundles. */
async function listBundles({ gateway, principal, req, res }: RestCall) {
  req.resume();
  const result = await gateway.rest(principal, null, (intake) => intake.listBundles(principal));
  return result.ok
    ? sendJson(res, 200, result.value)
    : sendJson(res, STATUS[result.error.code] ?? 400, { error: result.error });
}

/** GET /bundles/NAME: one bundle, streamed as export_evidence_bundle wrote it. */
async function downloadBundle({ gateway, principal, req, res, url }: RestCall) {
  req.resume();
  let name: string;
  try {
    name = decodeURIComponent(url.pathname.slice('/bundles/'.length));
  } catch {
    return sendJson(res, 404, {
      error: new DossierError(
        'not_found',
        'No such bundle: the name is not valid percent-encoding.',
        'GET /bundles lists the bundles by name.',
      ).toToolError(),
    });
  }
  const result = await gateway.rest(principal, null, (intake) => intake.openBundle(principal, name));
  if (!result.ok) return sendJson(res, STATUS[result.error.code] ?? 400, { error: result.error });
  const { handle, stat } = result.value;
  res.writeHead(200, {
    'content-type': 'application/json',
    'content-length': String(stat.size),
    'content-disposition': `attachment; filename="${name}"`,
  });
  try {
    await pipeline(handle.createReadStream({ start: 0, end: Math.max(0, stat.size - 1) }), res);
  } catch {
    res.destroy();
  } finally {
    await handle.close().catch(() => undefined);
  }
}

/** POST /bundles: a bundle in the body, verified and imported whole. */
async function importBundle({ gateway, principal, req, res, declared }: RestCall) {
  const limit = BUNDLE_LIMITS.bytes.max;
  if (declared > limit)
    return refuse(
      req,
      res,
      413,
      new DossierError(
        'resource_constraint',
        `The bundle declares ${declared} bytes; a bundle may have at most ${limit}.`,
        'Export smaller bundles (fewer evidence_ids per bundle).',
        { declared, limit },
      ),
    );
  const who = `${principal.team}/${principal.principal}`;
  const busy = importSlotTaken(who);
  if (busy) {
    res.setHeader('Retry-After', '5');
    return refuse(req, res, 503, busy);
  }
  importing.set(who, 1);
  res.once('close', () => importing.delete(who));
  const arrival = setTimeout(
    () => req.destroy(new Error('the bundle did not arrive in time')),
    BUNDLE_ARRIVAL_MS,
  );
  res.once('close', () => clearTimeout(arrival));
  const result = await gateway.rest(principal, 'import bundles', async (intake) =>
    intake.importBundleText(principal, await readBundle(req, limit)),
  );
  if (result.ok) return sendJson(res, 200, result.value);
  return refuse(req, res, STATUS[result.error.code] ?? 400, result.error);
}

/**
 * Why `who` may not import now, or undefined. A bundle is held in memory while it is verified: a
 * few at once on this gateway, one per caller, each arriving within a deadline, so no caller can
 * hold the slots of the others.
 */
function importSlotTaken(who: string): DossierError | undefined {
  const inFlight = [...importing.values()].reduce((a, b) => a + b, 0);
  if (!importing.has(who) && inFlight < MAX_CONCURRENT_IMPORTS) return undefined;
  return new DossierError(
    'resource_constraint',
    importing.has(who)
      ? 'Your previous bundle import is still running.'
      : `${inFlight} bundle imports are running on this gateway.`,
    importing.has(who)
      ? 'Send the next bundle when the previous one has answered.'
      : 'Try again in a few seconds (Retry-After).',
    { retry_after_ms: 5_000 },
    true,
  );
}

/** The bundle's text, read whole; more than `limit` bytes throws (nothing is imported). */
async function readBundle(req: IncomingMessage, limit: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > limit) {
      throw new DossierError(
        'resource_constraint',
        `The bundle has more than ${limit} bytes; nothing was imported.`,
        'Export smaller bundles (fewer evidence_ids per bundle).',
        { limit },
      );
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}
