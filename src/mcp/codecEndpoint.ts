// The codec endpoint the Temporal UI's payloads are opened by (its "remote
// codec server" protocol: POST …/codec/decode with {payloads: [...]}). It opens
// a payload only when it belongs to the caller's team; others come back still
// sealed. The caller is the bearer token's principal, and only that: browsers
// never call it, the audit UI's guard does, with the signed-in viewer's token
// (src/dev/uiCodec.ts), so no cookie ever carries a token.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Payload } from '@temporalio/common';
import { parseBoundedJson } from '../domain/json.ts';
import type { Principal } from '../domain/types.ts';
import { sealedTeam, type TeamPayloadCodec } from '../temporal/codec.ts';
import type { HttpContext } from './httpContext.ts';
import { bearerToken, readBody } from './requests.ts';
import { sendJson } from './rest.ts';

/** Payloads one decode request may carry. */
const MAX_PAYLOADS = 10_000;

interface JsonPayload {
  metadata?: Record<string, string>;
  data?: string;
}

const fromJson = (p: JsonPayload): Payload => ({
  metadata: Object.fromEntries(
    Object.entries(p.metadata ?? {}).map(([k, v]) => [k, new Uint8Array(Buffer.from(v, 'base64'))]),
  ),
  data: new Uint8Array(Buffer.from(p.data ?? '', 'base64')),
});

const toJson = (p: Payload): JsonPayload => ({
  metadata: Object.fromEntries(
    Object.entries(p.metadata ?? {}).map(([k, v]) => [
      k,
      Buffer.from(v ?? new Uint8Array()).toString('base64'),
    ]),
  ),
  data: Buffer.from(p.data ?? new Uint8Array()).toString('base64'),
});

/** Opens the payloads of the caller's team; leaves every other payload as it was. */
export function decodeForTeam(codec: TeamPayloadCodec, caller: Principal, body: unknown) {
  const payloads = (body as { payloads?: unknown })?.payloads;
  if (!Array.isArray(payloads) || payloads.length > MAX_PAYLOADS) {
    throw new Error(`expected {payloads: [...]} with at most ${MAX_PAYLOADS} payloads`);
  }
  let opened = 0;
  let withheld = 0;
  const out = payloads.map((raw: JsonPayload) => {
    const payload = fromJson(raw);
    const team = sealedTeam(payload);
    if (team === undefined) return raw;
    if (team !== caller.team) {
      withheld++;
      return raw;
    }
    opened++;
    return toJson(codec.open(payload));
  });
  return { payloads: out, opened, withheld };
}

/** POST /codec/decode (served when the gateway has a codec): the caller's team's payloads, opened. */
export async function serveCodec(ctx: HttpContext, req: IncomingMessage, res: ServerResponse) {
  if (req.method !== 'POST') return sendJson(res, 405, { error: 'POST {payloads: [...]}' });
  const token = bearerToken(req);
  const caller = token ? await ctx.tokens.resolve(token) : undefined;
  if (!caller) {
    return sendJson(res, 401, {
      error:
        'Send Authorization: Bearer <token>; payloads open only for their own team (in a browser, the audit UI opens them for its signed-in viewer).',
    });
  }
  const read = await readBody(req, ctx.opts.maxRequestBytes * 16, ctx.bodyTimeoutMs);
  if (read === 'too_slow') return sendJson(res, 408, { error: 'the request body did not arrive in time' });
  if (read === 'too_large') return sendJson(res, 413, { error: 'too many payloads in one request' });
  try {
    const decoded = decodeForTeam(
      ctx.opts.codec!,
      caller,
      parseBoundedJson(read.toString('utf8'), ctx.maxJsonDepth),
    );
    res.setHeader('x-dossier-withheld', String(decoded.withheld));
    return sendJson(res, 200, { payloads: decoded.payloads });
  } catch (err) {
    return sendJson(res, 400, { error: (err as Error).message });
  }
}
