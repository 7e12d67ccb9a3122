// The audit UI's sign-in: a small form that takes a dossier token and opens a
// session for it, kept by the guard (uiGuard.ts) in memory; the browser holds
// only the session's random id, in an HttpOnly cookie named for the guard's
// port (browsers send a host's cookies to every port of it: the token itself
// never goes into a cookie, and two stacks on one host keep their own). The UI
// opens the team's payloads through the guard, which forwards them to the
// gateway with the session's token (uiCodec.ts).
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { cookieValues, readBody } from '../mcp/requests.ts';

/** Who may look: a token's team, or nobody. */
export type UiViewer = (token: string) => Promise<{ team: string; principal: string } | undefined>;

export const SIGN_IN_PATH = '/dossier/sign-in';
export const SIGN_OUT_PATH = '/dossier/sign-out';

/** The sign-in cookie of the guard on `port`. */
export const uiCookie = (port: number) => `dossier_ui_${port}`;

/** How long a sign-in lasts, in seconds (12 hours). */
const SIGN_IN_SECONDS = 43_200;
/** The most sessions one guard keeps, and one token may hold; past either the oldest is closed. */
const MAX_SESSIONS = 10_000;
const MAX_SESSIONS_PER_TOKEN = 16;

/** Signed-in browsers: a random id each, for a token, until it expires or signs out. */
export class UiSessions {
  private readonly byId = new Map<string, { token: string; expires: number }>();

  open(token: string): string {
    const id = randomBytes(32).toString('base64url');
    const now = Date.now();
    // One token signing in over and over closes its own oldest sessions, never other viewers'.
    const own: string[] = [];
    for (const [old, s] of this.byId) {
      if (s.expires <= now) this.byId.delete(old);
      else if (s.token === token) own.push(old);
    }
    while (own.length >= MAX_SESSIONS_PER_TOKEN) this.byId.delete(own.shift()!);
    while (this.byId.size >= MAX_SESSIONS) this.byId.delete(this.byId.keys().next().value!);
    this.byId.set(id, { token, expires: now + SIGN_IN_SECONDS * 1000 });
    return id;
  }

  /** The token a live session was opened for. */
  token(id: string): string | undefined {
    const s = this.byId.get(id);
    if (s && s.expires > Date.now()) return s.token;
    this.byId.delete(id);
    return undefined;
  }

  close(id: string | undefined) {
    if (id) this.byId.delete(id);
  }
}

/** What the sign-in pages work with: whose a token is, the sessions, and the cookie's name. */
export interface SignIn {
  viewer: UiViewer;
  sessions: UiSessions;
  cookie: string;
}

/** The one value of the cookie `name` in a request, or undefined when it has none, or several. */
export function cookieValue(req: IncomingMessage, name: string): string | undefined {
  const values = cookieValues(req, name);
  return values.length === 1 ? values[0] : undefined;
}
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
<code>npx dossier token create</code>); you stay signed in for 12 hours, or until you
<a href="${SIGN_OUT_PATH}">sign out</a>.</p>
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

/** The cookie earlier releases kept the token itself in, for every port's /codec: removed on sight. */
const OLD_CODEC_COOKIE = 'dossier_codec_token';

// Lax, not Strict: a launch's ui_url followed from a chat or a tracker is a cross-site navigation,
// and should arrive signed in. The guard answers reads only, and its POSTs check their Origin.
const cookies = (name: string, session: string, maxAge: number) => [
  `${name}=${session}; HttpOnly; SameSite=Lax; Path=/; Max-Age=${maxAge}`,
  `${OLD_CODEC_COOKIE}=; HttpOnly; SameSite=Strict; Path=/codec; Max-Age=0`,
];

/** Whether a POST comes from this UI's own pages (or from outside a browser, which sends no Origin). */
export function fromOwnPages(req: IncomingMessage): boolean {
  const origin = req.headers.origin;
  if (origin === undefined) return true;
  try {
    return new URL(origin).host === req.headers.host;
  } catch {
    return false;
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
export async function signInPage(req: IncomingMessage, res: ServerResponse, signIn: SignIn): Promise<void> {
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
  if (!fromOwnPages(req)) {
    req.resume();
    return html(res, 403, signOut ? SIGN_OUT_FORM : form('Sign in from this page.'));
  }
  if (signOut) {
    req.resume();
    signIn.sessions.close(cookieValue(req, signIn.cookie));
    return html(res, 303, '', { location: SIGN_IN_PATH, 'set-cookie': cookies(signIn.cookie, '', 0) });
  }
  const read = await readBody(req, MAX_FORM_BYTES, FORM_TIMEOUT_MS);
  if (read === 'too_large') return html(res, 413, form(`The form may hold at most ${MAX_FORM_BYTES} bytes.`));
  if (read === 'too_slow') return html(res, 408, form('The form did not arrive in time.'));
  const body = new URLSearchParams(read.toString('utf8'));
  const token = body.get('token')?.trim() ?? '';
  const who = token && token.length <= 512 ? await signIn.viewer(token) : undefined;
  const next = nextPage(body.get('next'));
  if (!who) return html(res, 401, form('That token is not valid (unknown or revoked).', next));
  const session = signIn.sessions.open(token);
  return html(res, 303, '', {
    location: next,
    'set-cookie': cookies(signIn.cookie, session, SIGN_IN_SECONDS),
  });
}
