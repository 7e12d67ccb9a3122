// The audit UI's front door against a real HTTP server standing in for the UI server's place.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freeLoopbackPort, startUiGuard, type UiGuard } from './uiGuard.ts';

const seen: { method: string; headers: http.IncomingHttpHeaders }[] = [];
const upstream = http.createServer((req, res) => {
  seen.push({ method: req.method!, headers: req.headers });
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

beforeAll(async () => {
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const { port } = upstream.address() as AddressInfo;
  guard = await startUiGuard({
    host: '127.0.0.1',
    port: await freeLoopbackPort(),
    upstream: { host: '127.0.0.1', port },
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
            { headers: { connection: 'x-mine', 'x-mine': '1' } },
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
  });

  it('refuses every other method before it reaches the UI server', async () => {
    const before = seen.length;
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']) {
      const reply = await fetch(`${guard.url}/api/v1/namespaces/x/batch-operations/a%2Fquery%2Fb`, {
        method,
        body: method === 'OPTIONS' ? undefined : '{}',
      });
      expect(reply.status, method).toBe(405);
      expect(reply.headers.get('allow')).toBe('GET, HEAD');
    }
    expect(seen.length).toBe(before);
  });

  it('ends a reply the UI server cut short, rather than leave the browser waiting', async () => {
    const started = Date.now();
    await expect(fetch(`${guard.url}/cut`).then((r) => r.text())).rejects.toThrow();
    expect(Date.now() - started).toBeLessThan(5_000);
  });
});
