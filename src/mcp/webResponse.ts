// Node's HTTP request and response around the MCP SDK's web-standard
// transport. A reply whose body ends at once (a tool's result, an error, a
// notification's 202) goes out whole, with its length, in one write; one that
// does not end within WHOLE_REPLY_MS (a launch still waiting, progress
// notifications, a session's event stream) sends its headers then and streams
// each event as it comes. The SDK's own Node adapter waits only a timer tick
// before it streams, so most replies of a gateway that reads its store went
// out chunked, in three writes.
import type { IncomingMessage, ServerResponse } from 'node:http';

/** How long a reply may take to end before its headers go out and it streams. */
export const WHOLE_REPLY_MS = 100;
/** How much of a reply is held back at most, waiting to send it whole. */
export const WHOLE_REPLY_BYTES = 1024 * 1024;

/**
 * What the SDK's transport reads of a request, for `req`: its method, URL and
 * headers (the body goes to the transport already parsed). Not a whole `Request`:
 * building one (its header list, URL and abort signal) cost more than the rest
 * of answering the cheapest call. The tests of webResponse.ts and the MCP
 * conformance suite hold the transport to this.
 */
export function webRequest(req: IncomingMessage, signal?: AbortSignal): Request {
  const value = (v: string | string[] | undefined) => (Array.isArray(v) ? v.join(', ') : v);
  const headers = {
    get: (name: string) => value(req.headers[name.toLowerCase()]) ?? null,
    has: (name: string) => req.headers[name.toLowerCase()] !== undefined,
    entries: () => {
      const pairs: [string, string][] = [];
      for (const [k, v] of Object.entries(req.headers)) if (v !== undefined) pairs.push([k, value(v)!]);
      return pairs[Symbol.iterator]();
    },
  };
  // The host was checked before; the transport reads the path only.
  return {
    method: req.method,
    url: `http://gateway${req.url ?? '/'}`,
    headers,
    signal,
  } as unknown as Request;
}

/**
 * Writes `response` to `res`, whole when its body ends within `wholeMs` and
 * WHOLE_REPLY_BYTES, else streamed; settles when done.
 */
export async function writeResponse(
  response: Response,
  res: ServerResponse,
  wholeMs = WHOLE_REPLY_MS,
): Promise<void> {
  const headers: Record<string, string> = Object.fromEntries(response.headers);
  if (!response.body) {
    res.writeHead(response.status, headers).end();
    return;
  }
  const reader = response.body.getReader();
  // The client went away: the transport forgets the stream (a session's event stream, a call's).
  const gone = () => void reader.cancel().catch(() => undefined);
  res.once('close', gone);
  // It may have gone while the transport was still answering (a store read): 'close' has fired.
  if (res.destroyed) gone();
  // What came before the reply streams; once it streams (late, or too much to hold), each chunk goes as it comes.
  const held: Uint8Array[] = [];
  let heldBytes = 0;
  let streaming = false;
  const stream = () => {
    if (streaming) return;
    streaming = true;
    res.writeHead(response.status, headers);
    if (held.length === 0) res.flushHeaders();
    for (const chunk of held) res.write(chunk);
    held.length = 0;
  };
  const late = setTimeout(() => {
    try {
      stream();
    } catch (err) {
      res.destroy(err as Error); // never thrown from a timer; the loop sees the response gone
    }
  }, wholeMs);
  try {
    for (;;) {
      const next = await reader.read();
      if (next.done) break;
      if (!streaming) {
        held.push(next.value);
        heldBytes += next.value.length;
        if (heldBytes > WHOLE_REPLY_BYTES) stream();
        continue;
      }
      if (res.destroyed) {
        gone();
        break;
      }
      if (!res.write(next.value)) {
        await new Promise<void>((resolve) => {
          const on = () => {
            res.off('drain', on).off('close', on);
            resolve();
          };
          res.on('drain', on).on('close', on);
        });
      }
    }
    if (!streaming) {
      const body = Buffer.concat(held);
      res.writeHead(response.status, { ...headers, 'content-length': String(body.length) }).end(body);
      return;
    }
    res.end();
  } catch (err) {
    // The reply's own stream failed: nothing more can be said on this response.
    if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' });
    res.destroy(err as Error);
  } finally {
    clearTimeout(late);
    res.off('close', gone);
  }
}
