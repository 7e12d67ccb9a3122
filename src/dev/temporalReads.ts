// The UI server's only way to Temporal: a gRPC door that passes the reads the
// audit UI makes and nothing else. The UI server's own write switch can be got
// past (a POST whose path carries an encoded slash reaches StartBatchOperation),
// and its private port answers whoever reaches it; were it to hold a client
// certificate itself, anyone who reaches that port could terminate every team's
// launches. So the certificate stays here: the UI server speaks plain HTTP/2 to
// this door on a private address, and the door forwards an allowed unary call,
// byte for byte, over mutual TLS, and answers any other PERMISSION_DENIED.
import http2 from 'node:http2';
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import type { TemporalTls } from '../temporal/tls.ts';

const WORKFLOW_SERVICE = '/temporal.api.workflowservice.v1.WorkflowService/';

/** The calls behind the UI routes the guard passes (uiScope.ts): reads, each one unary. */
export const UI_READS: ReadonlySet<string> = new Set([
  ...[
    'GetClusterInfo',
    'GetSystemInfo',
    'ListNamespaces',
    'DescribeNamespace',
    'ListWorkflowExecutions',
    'CountWorkflowExecutions',
    'DescribeTaskQueue',
    'DescribeWorkflowExecution',
    'GetWorkflowExecutionHistory',
    'GetWorkflowExecutionHistoryReverse',
  ].map((method) => `${WORKFLOW_SERVICE}${method}`),
  '/temporal.api.operatorservice.v1.OperatorService/ListSearchAttributes',
]);

export interface TemporalReads {
  /** host:port the UI server connects to (plain HTTP/2). */
  address: string;
  stop(): Promise<void>;
}

type Headers = http2.IncomingHttpHeaders | http2.OutgoingHttpHeaders;
/** The metadata of a request or response, without HTTP/2's pseudo-headers. */
const metadata = (headers: Headers) =>
  Object.fromEntries(Object.entries(headers).filter(([name]) => !name.startsWith(':')));

function grpcError(stream: http2.ServerHttp2Stream, code: number, message: string) {
  if (stream.destroyed || stream.closed) return;
  if (stream.headersSent) return stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
  stream.respond(
    {
      ':status': 200,
      'content-type': 'application/grpc',
      'grpc-status': String(code),
      'grpc-message': encodeURIComponent(message),
    },
    { endStream: true },
  );
}

/** Listens on `host:port` (0: any free port) and forwards the UI's reads to `upstream` with `tls`. */
export async function startTemporalReads(opts: {
  upstream: string;
  tls: TemporalTls;
  host: string;
  port: number;
}): Promise<TemporalReads> {
  const credentials = {
    ca: readFileSync(opts.tls.ca),
    cert: readFileSync(opts.tls.cert),
    key: readFileSync(opts.tls.key),
    servername: opts.tls.serverName ?? opts.upstream.slice(0, opts.upstream.lastIndexOf(':')),
  };
  let session: http2.ClientHttp2Session | undefined;
  // One session while it lasts; a Temporal restarted (or a handshake refused) gets a new one.
  const upstream = () => {
    if (session && !session.closed && !session.destroyed) return session;
    const s = http2.connect(`https://${opts.upstream}`, credentials);
    s.on('error', () => undefined); // each call in flight reports it
    s.on('goaway', () => s.close());
    return (session = s);
  };
  const server = http2.createServer();
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on('session', (s) => {
    sessions.add(s);
    s.on('close', () => sessions.delete(s));
    s.on('error', () => undefined);
  });
  server.on('stream', (stream, headers) => {
    stream.on('error', () => undefined); // a caller that went away: its call is cancelled below
    const path = String(headers[':path'] ?? '');
    if (headers[':method'] !== 'POST' || !UI_READS.has(path))
      return grpcError(stream, 7, `the audit UI only reads; ${path} is not one of its reads`);
    let call: http2.ClientHttp2Stream;
    try {
      call = upstream().request({ ':method': 'POST', ':path': path, ...metadata(headers) });
    } catch (err) {
      return grpcError(stream, 14, `Temporal is unreachable: ${(err as Error).message}`);
    }
    let trailers: Headers | undefined;
    call.on('response', (head, flags) => {
      // A call that failed at once answers with its status in the headers alone.
      if (flags & http2.constants.NGHTTP2_FLAG_END_STREAM || 'grpc-status' in head)
        return stream.respond({ ':status': head[':status'] ?? 200, ...metadata(head) }, { endStream: true });
      stream.respond({ ':status': head[':status'] ?? 200, ...metadata(head) }, { waitForTrailers: true });
      call.pipe(stream);
    });
    call.on('trailers', (t) => (trailers = metadata(t)));
    stream.on('wantTrailers', () =>
      stream.sendTrailers(trailers ?? { 'grpc-status': '14', 'grpc-message': 'Temporal ended the call' }),
    );
    call.on('error', (err) => grpcError(stream, 14, `Temporal is unreachable: ${err.message}`));
    stream.on('close', () => {
      if (!call.closed) call.close(http2.constants.NGHTTP2_CANCEL);
    });
    stream.pipe(call);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    address: `${opts.host.includes(':') ? `[${opts.host}]` : opts.host}:${port}`,
    async stop() {
      session?.destroy();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const s of sessions) s.destroy();
      await closed;
    },
  };
}
