// The audit UI's front door. Temporal's UI server listens on a private
// loopback port and this proxy serves the address users open, passing reads
// only (GET and HEAD). The UI server's own write switch (disableWriteActions)
// is not enough: it lets through any POST whose decoded path names a workflow
// query, and its API router matches the raw path, so a name holding `%2F`
// (a batch job's id, a signal's name) smuggles a batch terminate or a
// signal-with-start past it. Nothing but a read reaches the UI server here.
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pipeline } from 'node:stream/promises';

/** Methods that reach the UI server; every other one is answered 405 here. */
export const UI_READ_METHODS = ['GET', 'HEAD'] as const;

/** How long the UI server may take to answer one request before the browser gets 502. */
const UPSTREAM_TIMEOUT_MS = 60_000;

/** Headers of one hop, never passed on (RFC 9110 §7.6.1), and a body's framing, which Node sets anew. */
const HOP_BY_HOP = [
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'content-length',
];

function endToEnd(headers: http.IncomingHttpHeaders): http.OutgoingHttpHeaders {
  const named = String(headers.connection ?? '')
    .toLowerCase()
    .split(',')
    .map((h) => h.trim());
  return Object.fromEntries(
    Object.entries(headers).filter(([k]) => !HOP_BY_HOP.includes(k) && !named.includes(k)),
  );
}

export interface UiGuard {
  url: string;
  stop(): Promise<void>;
}

/** A free port on loopback, for a server this process starts next. */
export async function freeLoopbackPort(): Promise<number> {
  const probe = http.createServer();
  await new Promise<void>((resolve, reject) => probe.once('error', reject).listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

function refuse(res: ServerResponse, status: number, message: string, headers: Record<string, string> = {}) {
  const body = JSON.stringify({ error: message });
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': String(Buffer.byteLength(body)),
    ...headers,
  });
  res.end(body);
}

/** Serves `host:port`, passing GET and HEAD to the UI server at `upstream` and refusing the rest. */
export async function startUiGuard(opts: {
  host: string;
  port: number;
  upstream: { host: string; port: number };
}): Promise<UiGuard> {
  const forward = (req: IncomingMessage, res: ServerResponse) => {
    if (!(UI_READ_METHODS as readonly string[]).includes(req.method ?? '')) {
      req.resume();
      return refuse(res, 405, 'The audit UI is read-only: only GET and HEAD reach it.', {
        allow: UI_READ_METHODS.join(', '),
      });
    }
    // A read carries no body: none is passed on.
    const upstream = http.request(
      {
        host: opts.upstream.host,
        port: opts.upstream.port,
        method: req.method,
        path: req.url,
        headers: endToEnd(req.headers),
        timeout: UPSTREAM_TIMEOUT_MS,
      },
      (reply) => {
        const { 'content-length': length } = reply.headers;
        res.writeHead(reply.statusCode ?? 502, {
          ...endToEnd(reply.headers),
          ...(length !== undefined ? { 'content-length': length } : {}),
        });
        // A reply cut short upstream ends the browser's too, rather than leaving it waiting.
        pipeline(reply, res).catch(() => res.destroy());
      },
    );
    upstream.on('timeout', () => upstream.destroy(new Error('timeout')));
    upstream.on('error', () => {
      if (!res.headersSent) refuse(res, 502, 'The audit UI server did not answer; is it running?');
      else res.destroy();
    });
    res.on('close', () => upstream.destroy());
    req.resume();
    upstream.end();
  };
  const server = http.createServer(forward);
  await new Promise<void>((resolve, reject) =>
    server.once('error', reject).listen(opts.port, opts.host, () => resolve()),
  );
  return {
    url: `http://${opts.host}:${opts.port}`,
    stop: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
