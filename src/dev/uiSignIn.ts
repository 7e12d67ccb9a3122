// The audit UI's sign-in: a small form that takes a dossier token and keeps it
// in an HttpOnly cookie, so the browser's reads carry it to the guard
// (uiGuard.ts), which shows that token's team only. The same sign-in sets the
// gateway codec endpoint's cookie: browsers scope cookies by host, not port,
// so on one host (the embedded stack) the UI can also open the team's payloads.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { CODEC_COOKIE } from '../mcp/codecEndpoint.ts';

/** Who may look: a token's team, or nobody. */
export type UiViewer = (token: string) => Promise<{ team: string; principal: string } | undefined>;

export const SIGN_IN_PATH = '/dossier/sign-in';
export const SIGN_OUT_PATH = '/dossier/sign-out';
export const UI_COOKIE = 'dossier_ui_token';

/** How long a sign-in lasts, in seconds (12 hours). */
const SIGN_IN_SECONDS = 43_200;
/** The most a sign-in form's body may hold, in bytes, and how long it may take to arrive. */
const MAX_FORM_BYTES = 4_096;
const FORM_TIMEOUT_MS = 10_000;

const escape = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/**
 * Where to go after signing in: a path of this UI in printable ASCII, never another site (`//host`,
 * `/\\host`, or either with a tab or newline between, which browsers drop).
 */
export function nextPage(value: string | null | undefined): string {
  return value && /^\/(?![/\\])[\x21-\x7e]{0,2047}$/.test(value) ? value : '/';
}

function form(note = '', next = '/'): string {
  return `<!doctype html>
<meta charset="utf-8"><title>dossier: sign in to the audit UI</title>
<style>body{font:16px system-ui;max-width:36em;margin:4em auto}input{width:100%;font:inherit}</style>
<h1>dossier audit UI</h1>
<p>The audit UI shows your team's launches and analyses, read-only. Paste your dossier token (the
<code>token</code> in <code>dev.json</code> for <code>npm start</code>, or one from
<code>npx dossier token create</code>); the browser keeps it in an HttpOnly cookie for 12 hours.</p>
<form method="post" action="${SIGN_IN_PATH}"><input name="token" type="password" autocomplete="off" placeholder="dsr_…" autofocus>
<input name="next" type="hidden" value="${escape(next)}">
<p><button>Sign in</button></p></form>${note ? `<p>${escape(note)}</p>` : ''}`;
}

function html(
  res: ServerResponse,
  status: number,
  body: string,
  headers: Record<string, string | string[]> = {},
) {
  res.writeHead(status, {
    'content-type': 'text/html; charset=utf-8',
    'content-length': String(Buffer.byteLength(body)),
    'cache-control': 'no-store',
    ...headers,
  });
  res.end(body);
}

const cookies = (token: string, maxAge: number) => [
  `${UI_COOKIE}=${encodeURIComponent(token)}; HttpOnly; SameSite=Strict; Path=/; Max-Age=${maxAge}`,
  `${CODEC_COOKIE}=${encodeURIComponent(token)}; HttpOnly; SameSite=Strict; Path=/codec; Max-Age=${maxAge}`,
];

/** The form's body, or undefined when it is too large or too slow. */
async function readForm(req: IncomingMessage): Promise<URLSearchParams | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  const timer = setTimeout(() => req.destroy(), FORM_TIMEOUT_MS);
  try {
    for await (const chunk of req as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > MAX_FORM_BYTES) return undefined;
      chunks.push(chunk);
    }
    return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
  } catch {
    return undefined;
  } finally {
    clearTimeout(timer);
  }
}

function hostOf(origin: string): string | undefined {
  try {
    return new URL(origin).host;
  } catch {
    return undefined;
  }
}

const SIGN_OUT_FORM = `<!doctype html>
<meta charset="utf-8"><title>dossier: sign out of the audit UI</title>
<style>body{font:16px system-ui;max-width:36em;margin:4em auto}</style>
<form method="post" action="${SIGN_OUT_PATH}"><button>Sign out</button></form>`;

/**
 * Serves the sign-in form (GET) and signs in (POST); on the sign-out path, a button (GET) that signs
 * out (POST). Both POSTs must come from this UI's own pages.
 */
export async function signInPage(req: IncomingMessage, res: ServerResponse, viewer: UiViewer): Promise<void> {
  const signOut = req.url?.split('?')[0] === SIGN_OUT_PATH;
  if (req.method === 'GET' || req.method === 'HEAD') {
    req.resume();
    if (signOut) return html(res, 200, SIGN_OUT_FORM);
    const next = new URLSearchParams(req.url?.split('?')[1] ?? '').get('next');
    return html(res, 200, form('', nextPage(next)));
  }
  if (req.method !== 'POST') {
    req.resume();
    return html(res, 405, signOut ? SIGN_OUT_FORM : form('Sign in with the form.'), { allow: 'GET, POST' });
  }
  // A form posted from another site would sign the browser in as someone else, or out.
  const origin = req.headers.origin;
  if (origin !== undefined && hostOf(origin) !== req.headers.host) {
    req.resume();
    return html(res, 403, signOut ? SIGN_OUT_FORM : form('Sign in from this page.'));
  }
  if (signOut) {
    req.resume();
    return html(res, 303, '', { location: SIGN_IN_PATH, 'set-cookie': cookies('', 0) });
  }
  const body = await readForm(req);
  if (!body) return html(res, 413, form(`The form may hold at most ${MAX_FORM_BYTES} bytes.`));
  const token = body.get('token')?.trim() ?? '';
  const who = token && token.length <= 512 ? await viewer(token) : undefined;
  const next = nextPage(body.get('next'));
  if (!who) return html(res, 401, form('That token is not valid (unknown or revoked).', next));
  return html(res, 303, '', { location: next, 'set-cookie': cookies(token, SIGN_IN_SECONDS) });
}
