// GET /metrics: Prometheus' scrape of this process, for the cluster's operator.
// Team tokens do not open it (its totals span every team); the operator's
// DOSSIER_METRICS_TOKEN does. Without one configured the route is off.
import { bearerToken } from './requests.ts';
import { timingSafeEqual, createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { renderMetrics } from '../metrics/metrics.ts';
import { sendJson } from './rest.ts';

const digest = (s: string) => createHash('sha256').update(s).digest();

/** Answers a GET /metrics: 404 when metrics are off, 401 without the operator's token. */
export async function serveMetrics(req: IncomingMessage, res: ServerResponse, token: string | undefined) {
  if (!token)
    return sendJson(res, 404, {
      error: 'metrics are off on this gateway: set DOSSIER_METRICS_TOKEN to serve GET /metrics',
    });
  const given = bearerToken(req);
  if (!given || !timingSafeEqual(digest(given), digest(token))) {
    res.setHeader('WWW-Authenticate', 'Bearer realm="dossier-metrics"');
    return sendJson(res, 401, {
      error: "GET /metrics needs the operator's DOSSIER_METRICS_TOKEN as a bearer token",
    });
  }
  const { body, contentType } = await renderMetrics();
  res.writeHead(200, { 'Content-Type': contentType, 'Cache-Control': 'no-store' });
  res.end(body);
}

/** A worker process's own listener: GET /metrics on the given port, nothing else. */
export function startMetricsListener(host: string, port: number, token: string | undefined): Promise<Server> {
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://worker');
    if (url.pathname === '/metrics' && req.method === 'GET') {
      serveMetrics(req, res, token).catch(() => res.destroy());
      return;
    }
    sendJson(res, 404, { error: 'a worker serves only GET /metrics' });
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve(server));
  });
}
