// The codec endpoint the Temporal UI calls to show payloads (its "remote codec
// server" protocol: POST …/codec/decode with {payloads: [...]}). It opens a
// payload only when it belongs to the caller's team; others come back still
// sealed. The caller is the bearer token's principal, or, for a browser, the
// token kept in an HttpOnly cookie by the small sign-in form at …/codec/login.
import { bearerToken, cookieValues } from './requests.ts';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Payload } from '@temporalio/common';
import type { Principal } from '../domain/types.ts';
import { sealedTeam, type TeamPayloadCodec } from '../temporal/codec.ts';

export const CODEC_COOKIE = 'dossier_codec_token';
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

/** The token of a codec request: the Authorization header, or the sign-in cookie. */
export function codecToken(req: IncomingMessage): string | undefined {
  const cookie = cookieValues(req, CODEC_COOKIE)[0];
  return bearerToken(req) ?? (cookie && decodeURIComponent(cookie));
}

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

/** CORS for the UI's origin, with credentials (the sign-in cookie). */
export function codecCors(req: IncomingMessage, res: ServerResponse, allowedOrigins: string[]) {
  const origin = req.headers.origin;
  if (origin && allowedOrigins.includes(origin)) {
    res.setHeader('Access-Control-Allow-Origin', origin);
    res.setHeader('Access-Control-Allow-Credentials', 'true');
    res.setHeader('Access-Control-Allow-Headers', 'content-type, x-namespace, authorization');
    res.setHeader('Access-Control-Allow-Methods', 'POST, OPTIONS');
    res.setHeader('Vary', 'Origin');
  }
}

export const LOGIN_FORM = `<!doctype html>
<meta charset="utf-8"><title>dossier: sign in to read your team's payloads</title>
<style>body{font:16px system-ui;max-width:36em;margin:4em auto}input{width:100%;font:inherit}</style>
<h1>Read your team's payloads in the Temporal UI</h1>
<p>Payloads in Temporal are sealed per team. Paste your dossier token; the browser keeps it in an
HttpOnly cookie for this endpoint only, and the UI can then show your team's inputs and results.</p>
<form method="post"><input name="token" type="password" autocomplete="off" placeholder="dsr_…" autofocus>
<p><button>Sign in</button></p></form>`;

export function signedIn(caller: Principal, uiUrl: string | undefined) {
  const escape = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
  return `<!doctype html><meta charset="utf-8"><title>dossier: signed in</title>
<p>Signed in as ${escape(caller.principal)} of team ${escape(caller.team)}: the Temporal UI now shows your team's payloads.
${uiUrl ? `<p><a href="${escape(uiUrl)}">Open the Temporal UI</a>` : ''}`;
}
