import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { WHOLE_REPLY_BYTES, webRequest, writeResponse } from './webResponse.ts';

const encoder = new TextEncoder();
let server: http.Server | undefined;

afterEach(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve));
  server = undefined;
});

/** A server answering every request with `reply()`, written by writeResponse. */
async function serve(reply: (req: Request) => Response): Promise<string> {
  server = http.createServer((req, res) => void writeResponse(reply(webRequest(req)), res));
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** A body that sends `events`, `gapMs` apart, then ends; `cancelled` says whether its reader gave up. */
function events(texts: string[], gapMs: number) {
  const state = { cancelled: false };
  const body = new ReadableStream<Uint8Array>({
    async start(controller) {
      for (const text of texts) {
        if (state.cancelled) return;
        controller.enqueue(encoder.encode(text));
        await new Promise((resolve) => setTimeout(resolve, gapMs));
      }
      if (!state.cancelled) controller.close();
    },
    cancel() {
      state.cancelled = true;
    },
  });
  return { body, state };
}

describe('writeResponse', () => {
  it('sends a reply that ends at once whole, with its length, status and headers', async () => {
    const url = await serve(
      () =>
        new Response(events(['event: a\n\n', 'event: b\n\n'], 0).body, {
          status: 200,
          headers: { 'content-type': 'text/event-stream', 'mcp-session-id': 's1' },
        }),
    );
    const res = await fetch(url);
    expect(res.headers.get('content-length')).toBe('20');
    expect(res.headers.get('transfer-encoding')).toBeNull();
    expect(res.headers.get('mcp-session-id')).toBe('s1');
    expect(await res.text()).toBe('event: a\n\nevent: b\n\n');
  });

  it('streams a reply that takes longer: the first event arrives before the last is sent', async () => {
    // Events 500 ms apart: a reply held back to its end would come as one read holding all three.
    const url = await serve(() => new Response(events(['one\n\n', 'two\n\n', 'three\n\n'], 500).body));
    const res = await fetch(url);
    expect(res.headers.get('transfer-encoding')).toBe('chunked');
    const reader = res.body!.getReader();
    const first = new TextDecoder().decode((await reader.read()).value);
    expect(first.startsWith('one\n\n')).toBe(true);
    expect(first).not.toContain('three');
    let rest = '';
    for (let next = await reader.read(); !next.done; next = await reader.read())
      rest += new TextDecoder().decode(next.value);
    expect(first + rest).toBe('one\n\ntwo\n\nthree\n\n');
  });

  it('streams a reply larger than it holds back, without waiting for its end', async () => {
    const big = 'x'.repeat(WHOLE_REPLY_BYTES + 1);
    const url = await serve(
      () =>
        new Response(
          new ReadableStream({
            start: (c) => {
              c.enqueue(encoder.encode(big));
              setTimeout(() => c.close(), 400);
            },
          }),
        ),
    );
    const started = Date.now();
    const res = await fetch(url);
    expect(Date.now() - started).toBeLessThan(300);
    expect(res.headers.get('transfer-encoding')).toBe('chunked');
    expect((await res.text()).length).toBe(big.length);
  });

  it('sends the headers of a reply whose body has not ended by then, and a body-less reply with its status', async () => {
    const url = await serve((req) =>
      req.method === 'DELETE'
        ? new Response(null, { status: 202 })
        : new Response(new ReadableStream({ start: (c) => void setTimeout(() => c.close(), 400) })),
    );
    expect((await fetch(url, { method: 'DELETE' })).status).toBe(202);
    const started = Date.now();
    const res = await fetch(url);
    expect(Date.now() - started).toBeLessThan(300);
    expect(await res.text()).toBe('');
    expect(Date.now() - started).toBeGreaterThanOrEqual(390);
  });

  it('cancels the reply’s stream when the client goes away', async () => {
    const stream = events(
      Array.from({ length: 100 }, (_, i) => `e${i}\n\n`),
      20,
    );
    const url = await serve(() => new Response(stream.body));
    const aborted = new AbortController();
    const res = await fetch(url, { signal: aborted.signal });
    await res.body!.getReader().read();
    aborted.abort();
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(stream.state.cancelled).toBe(true);
  });

  it('cancels the reply’s stream when the client went away before the reply was ready', async () => {
    let cancelled = false;
    server = http.createServer(async (_req, res) => {
      await new Promise((resolve) => setTimeout(resolve, 50)); // the gateway reading its store
      const body = new ReadableStream({ cancel: () => void (cancelled = true) }); // an event stream
      void writeResponse(new Response(body), res);
    });
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    const socket = net.connect((server.address() as AddressInfo).port, '127.0.0.1', () => {
      socket.write('GET /mcp HTTP/1.1\r\nHost: x\r\n\r\n');
      socket.destroy();
    });
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(cancelled).toBe(true);
  });

  it('passes the method, path and every header to the transport', async () => {
    let seen: Request | undefined;
    const url = await serve((req) => {
      seen = req;
      return new Response(null, { status: 204 });
    });
    await fetch(`${url}/mcp?x=1`, { method: 'POST', headers: { 'mcp-session-id': 'abc', accept: 'a, b' } });
    expect(seen!.method).toBe('POST');
    expect(new URL(seen!.url).pathname).toBe('/mcp');
    expect(seen!.headers.get('mcp-session-id')).toBe('abc');
    expect(seen!.headers.get('accept')).toBe('a, b');
  });
});
