// A loopback proxy that adds the bearer token to every request and passes
// everything else (Host and Origin included) through unchanged: tools that
// cannot send headers (the MCP conformance suite) reach the gateway as a
// principal, and the gateway's own checks still see what the tool sent.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export async function startAuthProxy(target: string, token: string, port = 0) {
  const upstream = new URL(target);
  const server = http.createServer((req, res) => {
    const forward = http.request(
      {
        host: upstream.hostname,
        port: upstream.port,
        method: req.method,
        path: req.url,
        headers: { ...req.headers, authorization: `Bearer ${token}` },
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    forward.on('error', () => {
      if (!res.headersSent) res.writeHead(502);
      res.end();
    });
    req.pipe(forward);
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', () => resolve()));
  const bound = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${bound}${upstream.pathname}`,
    host: `127.0.0.1:${bound}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
