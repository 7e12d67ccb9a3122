// The audit UI's codec route. The Temporal UI's codec endpoint is the guard's
// own /codec (a path on the pages' origin, whatever host the browser used), and
// the guard, which holds the signed-in viewer's token (the browser holds only
// its session's random id), forwards each decode to the gateway's codec
// endpoint with that token in Authorization. No cookie carries a token: a
// browser sends a host's cookies to every port of it, so a server on another
// port would receive one.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { readBody } from '../mcp/requests.ts';

/** Where the UI posts payloads to open (its codec endpoint is `CODEC_ROOT`). */
export const CODEC_ROOT = '/codec';
export const DECODE_PATH = `${CODEC_ROOT}/decode`;

/** The most one decode may carry, in bytes, and how long it may take to arrive and to be answered. */
const MAX_DECODE_BYTES = 16 * 1024 * 1024;
const DECODE_BODY_MS = 30_000;
const DECODE_REPLY_MS = 60_000;

function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': String(Buffer.byteLength(text)),
    'cache-control': 'no-store',
    ...headers,
  });
  res.end(text);
}

/**
 * Answers POST /codec/decode for the viewer whose token is `token` (checked by the caller): the
 * gateway's codec endpoint at `codec` opens that token's team's payloads and leaves others sealed.
 */
export async function forwardDecode(
  req: IncomingMessage,
  res: ServerResponse,
  codec: string | undefined,
  token: string,
): Promise<void> {
  if (!codec) {
    req.resume();
    return json(res, 404, { error: 'This audit UI has no codec endpoint: payloads stay sealed.' });
  }
  const read = await readBody(req, MAX_DECODE_BYTES, DECODE_BODY_MS);
  if (read === 'too_large') return json(res, 413, { error: 'too many payloads in one request' });
  if (read === 'too_slow') return json(res, 408, { error: 'the request body did not arrive in time' });
  let reply: Response;
  let body: Buffer;
  try {
    reply = await fetch(`${codec}/decode`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${token}`,
        'content-type': 'application/json',
        ...(typeof req.headers['x-namespace'] === 'string'
          ? { 'x-namespace': req.headers['x-namespace'] }
          : {}),
      },
      body: new Uint8Array(read),
      signal: AbortSignal.timeout(DECODE_REPLY_MS),
    });
    body = Buffer.from(await reply.arrayBuffer());
  } catch {
    return json(res, 502, { error: 'The gateway’s codec endpoint did not answer; payloads stay sealed.' });
  }
  const withheld = reply.headers.get('x-dossier-withheld');
  res.writeHead(reply.status, {
    'content-type': reply.headers.get('content-type') ?? 'application/json',
    'content-length': String(body.length),
    'cache-control': 'no-store',
    ...(withheld ? { 'x-dossier-withheld': withheld } : {}),
  });
  res.end(body);
}
