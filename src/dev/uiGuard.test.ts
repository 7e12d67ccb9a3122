// The audit UI's front door against a real HTTP server in the UI server's place.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freeLoopbackPort, startUiGuard, type UiGuard } from './uiGuard.ts';
import { nextPage, uiCookie, UiSessions } from './uiSignIn.ts';

const seen: { method: string; url: string; headers: http.IncomingHttpHeaders }[] = [];
const TOKEN = 'dsr_blue';
const viewer = async (token: string) => (token === TOKEN ? { team: 'blue', principal: 'ann' } : undefined);
const auth = { authorization: `Bearer ${TOKEN}` };
const upstream = http.createServer((req, res) => {
  seen.push({ method: req.method!, url: req.url!, headers: req.headers });
  if (req.url?.includes('/history')) {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ history: { events: [{ eventId: '1' }] }, nextPageToken: 'CiQw+/=' }));
    return;
  }
  if (req.url?.startsWith('/api/v1/namespaces/dossier/workflows?')) {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        executions: [
          { execution: { workflowId: 'launch/blue/ann/k1' } },
          { execution: { workflowId: 'launch/red/bob/k1' } },
        ],
      }),
    );
    return;
  }
  if (req.url === '/cut') {
    // Promises 100 bytes, sends 3, and goes away.
    res.writeHead(200, { 'content-length': '100' });
    res.write('abc');
    setTimeout(() => req.socket.destroy(), 50);
    return;
  }
  res.writeHead(200, { 'content-type': 'text/plain', connection: 'x-hop', 'x-hop': 'secret' });
  res.end('hello');
});
let guard: UiGuard;
const port = () => Number(new URL(guard.url).port);

beforeAll(async () => {
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const { port } = upstream.address() as AddressInfo;
  guard = await startUiGuard({
    host: '127.0.0.1',
    port: await freeLoopbackPort(),
    upstream: { host: '127.0.0.1', port },
    namespace: 'dossier',
    viewer,
  });
});
afterAll(async () => {
  await guard.stop();
  upstream.close();
});

describe('the audit UI guard', () => {
  it('passes reads, and only the headers meant for the far end', async () => {
    const reply = await new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }>(
      (resolve, reject) =>
        http
          .get(
            `${guard.url}/api/v1/settings`,
            { headers: { connection: 'x-mine', 'x-mine': '1', ...auth } },
            (res) => {
              let body = '';
              res.on('data', (c: Buffer) => (body += c.toString()));
              res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
            },
          )
          .on('error', reject),
    );
    expect(reply).toMatchObject({ status: 200, body: 'hello' });
    expect(reply.headers['x-hop']).toBeUndefined();
    expect(seen.at(-1)!.headers['x-mine']).toBeUndefined();
    // The viewer's token stays here.
    expect(seen.at(-1)!.headers.authorization).toBeUndefined();
  });

  it('lets nobody in without a valid token: pages go to the sign-in form, the API answers 401', async () => {
    const before = seen.length;
    const page = await fetch(`${guard.url}/namespaces/dossier/workflows`, { redirect: 'manual' });
    expect(page.status).toBe(303);
    // Signed in, the browser comes back to the page it asked for.
    expect(page.headers.get('location')).toBe(
      `/dossier/sign-in?next=${encodeURIComponent('/namespaces/dossier/workflows')}`,
    );
    expect(await (await fetch(`${guard.url}${page.headers.get('location')}`)).text()).toContain(
      'value="/namespaces/dossier/workflows"',
    );
    const attempts: Record<string, string>[] = [
      {},
      { authorization: 'Bearer dsr_wrong' },
      // The cookie holds a session id, never a token: a token there signs nobody in.
      { cookie: `${uiCookie(port())}=${TOKEN}` },
      { cookie: `${uiCookie(port())}=not-a-session` },
    ];
    for (const headers of attempts) {
      const api = await fetch(`${guard.url}/api/v1/settings`, { headers });
      expect(api.status).toBe(401);
      expect(((await api.json()) as { message: string }).message).toContain('/dossier/sign-in');
    }
    expect(seen.length).toBe(before);
  });

  it('signs a browser in with an HttpOnly cookie, which then carries the reads; a form from elsewhere is refused', async () => {
    expect((await fetch(`${guard.url}/dossier/sign-in`)).headers.get('content-type')).toContain('text/html');
    const form = (token: string, headers: Record<string, string> = {}) =>
      fetch(`${guard.url}/dossier/sign-in`, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
        body: new URLSearchParams({ token }).toString(),
      });
    expect((await form('dsr_wrong')).status).toBe(401);
    expect((await form(TOKEN, { origin: 'http://evil.example' })).status).toBe(403);
    const signed = await form(TOKEN, { origin: guard.url });
    expect(signed.status).toBe(303);
    expect(signed.headers.get('location')).toBe('/');
    const cookies = signed.headers.getSetCookie();
    const session = cookies.find((c) => c.startsWith(`${uiCookie(port())}=`))!;
    expect(session).toMatch(/HttpOnly; SameSite=Lax; Path=\//);
    // The browser holds a random session id; the token stays with the guard, in no cookie at all.
    for (const c of cookies) expect(c).not.toContain(TOKEN);
    const cookie = cookies.map((c) => c.split(';')[0]).join('; ');
    const read = await fetch(`${guard.url}/api/v1/settings`, { headers: { cookie } });
    expect(read.status).toBe(200);
    expect(seen.at(-1)!.headers.cookie).toBeUndefined();
    // Two sign-in cookies (one tossed in by another service of this host, for a narrower path): nobody.
    const twice = `${cookie}; ${uiCookie(port())}=${session.split(';')[0]!.split('=')[1]}x`;
    expect((await fetch(`${guard.url}/api/v1/settings`, { headers: { cookie: twice } })).status).toBe(401);
    // Signing out is a form of its own pages too: a link from elsewhere signs nobody out.
    expect((await fetch(`${guard.url}/dossier/sign-out`)).headers.getSetCookie()).toEqual([]);
    const elsewhere = await fetch(`${guard.url}/dossier/sign-out`, {
      method: 'POST',
      redirect: 'manual',
      headers: { origin: 'http://evil.example' },
    });
    expect(elsewhere.status).toBe(403);
    expect(elsewhere.headers.getSetCookie()).toEqual([]);
    const out = await fetch(`${guard.url}/dossier/sign-out`, {
      method: 'POST',
      redirect: 'manual',
      headers: { origin: guard.url, cookie },
    });
    expect(out.status).toBe(303);
    expect(out.headers.getSetCookie()).toHaveLength(2);
    expect(out.headers.getSetCookie().every((c) => c.includes('Max-Age=0'))).toBe(true);
    // Its session is closed: the same cookie, kept by a browser that ignored the reset, reads nothing.
    expect((await fetch(`${guard.url}/api/v1/settings`, { headers: { cookie } })).status).toBe(401);
  });

  it('asks the UI server for the team’s workflows only, and passes on only the team’s', async () => {
    const reply = await fetch(`${guard.url}/api/v1/namespaces/dossier/workflows?query=x%3D1`, {
      headers: { ...auth, 'accept-encoding': 'gzip' },
    });
    expect(reply.status).toBe(200);
    expect(await reply.json()).toEqual({ executions: [{ execution: { workflowId: 'launch/blue/ann/k1' } }] });
    const asked = new URL(`http://h${seen.at(-1)!.url}`);
    expect(asked.searchParams.get('query')).toBe(`DossierTeam = 'blue' AND (x=1)`);
    expect(seen.at(-1)!.headers['accept-encoding']).toBeUndefined();
    const before = seen.length;
    const other = await fetch(
      `${guard.url}/api/v1/namespaces/dossier/workflows/${encodeURIComponent('launch/red/bob/k1')}`,
      { headers: auth },
    );
    expect(other.status).toBe(403);
    expect(seen.length).toBe(before);
  });

  it('refuses every other method before it reaches the UI server', async () => {
    const before = seen.length;
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']) {
      const reply = await fetch(`${guard.url}/api/v1/namespaces/x/batch-operations/a%2Fquery%2Fb`, {
        method,
        headers: auth,
        body: method === 'OPTIONS' ? undefined : '{}',
      });
      expect(reply.status, method).toBe(405);
      expect(reply.headers.get('allow')).toBe('GET, HEAD');
    }
    expect(seen.length).toBe(before);
  });

  it('ends a reply the UI server cut short, rather than leave the browser waiting', async () => {
    const started = Date.now();
    await expect(fetch(`${guard.url}/cut`, { headers: auth }).then((r) => r.text())).rejects.toThrow();
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it('sends a browser back only to a page of its own after signing in', () => {
    expect(nextPage('/namespaces/dossier/workflows?x=1')).toBe('/namespaces/dossier/workflows?x=1');
    for (const elsewhere of [
      '//evil.example/',
      '/\\evil.example',
      '/\t/evil.example',
      'https://evil.example',
      '',
      null,
    ]) {
      expect(nextPage(elsewhere), String(elsewhere)).toBe('/');
    }
  });

  it('hands out history page tokens sealed for their workflow, and takes back only those', async () => {
    const history = `${guard.url}/api/v1/namespaces/dossier/workflows/${encodeURIComponent('launch/blue/ann/k1')}/history`;
    const first = (await (await fetch(history, { headers: auth })).json()) as { nextPageToken: string };
    expect(first.nextPageToken).not.toBe('CiQw+/=');
    const next = await fetch(`${history}?nextPageToken=${encodeURIComponent(first.nextPageToken)}`, {
      headers: auth,
    });
    expect(next.status).toBe(200);
    expect(new URL(`http://h${seen.at(-1)!.url}`).searchParams.get('nextPageToken')).toBe('CiQw+/=');
    const before = seen.length;
    const raw = await fetch(`${history}?nextPageToken=${encodeURIComponent('CiQw+/=')}`, { headers: auth });
    expect(raw.status).toBe(400);
    const elsewhere = history.replace('k1', 'k2');
    const moved = await fetch(`${elsewhere}?nextPageToken=${encodeURIComponent(first.nextPageToken)}`, {
      headers: auth,
    });
    expect(moved.status).toBe(400);
    expect(seen.length).toBe(before);
  });

  it('keeps at most 16 sessions per token: one token signing in over and over closes only its own oldest', () => {
    const sessions = new UiSessions();
    const other = sessions.open('dsr_b');
    const mine = Array.from({ length: 17 }, () => sessions.open('dsr_a'));
    expect(sessions.token(mine[0]!)).toBeUndefined();
    expect(mine.slice(1).every((id) => sessions.token(id) === 'dsr_a')).toBe(true);
    expect(sessions.token(other)).toBe('dsr_b');
  });
});
