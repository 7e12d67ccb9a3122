// Raw JSON-RPC of the stateless MCP revision (2026-07-28), as its clients put
// it on the wire: every request carries its `_meta` envelope and the
// MCP-Protocol-Version, Mcp-Method and Mcp-Name headers. Replies may come as
// JSON or as an SSE stream; both are read to the final response.
export const MODERN = '2026-07-28';
export const TASKS = 'io.modelcontextprotocol/tasks';

export interface ModernReply {
  status: number;
  headers: Headers;
  /** The JSON-RPC response (its result or error), and the messages before it on a stream. */
  body: { id?: unknown; result?: Record<string, any>; error?: { code: number; message: string; data?: any } }; // eslint-disable-line @typescript-eslint/no-explicit-any
  before: Record<string, unknown>[];
}

/** The envelope a modern client puts in every request's `_meta`. */
export function envelope(capabilities: Record<string, unknown> = {}, version = MODERN) {
  return {
    'io.modelcontextprotocol/protocolVersion': version,
    'io.modelcontextprotocol/clientCapabilities': capabilities,
    'io.modelcontextprotocol/clientInfo': { name: 'dossier-modern-test', version: '1' },
  };
}

/** The name-shaped field a method's Mcp-Name header mirrors (SEP-2243, SEP-2663). */
function nameOf(method: string, params: Record<string, unknown>): string | undefined {
  if (method === 'tools/call' || method === 'prompts/get') return params.name as string;
  if (method === 'resources/read') return params.uri as string;
  if (method.startsWith('tasks/')) return params.taskId as string;
  return undefined;
}

let nextId = 1;

/** One request of the stateless era; `headers` override or remove (null) the ones a client sends. */
export async function modernRequest(
  url: string,
  token: string,
  method: string,
  params: Record<string, unknown> = {},
  opts: {
    capabilities?: Record<string, unknown>;
    headers?: Record<string, string | null>;
    meta?: unknown;
  } = {},
): Promise<ModernReply> {
  const id = nextId++;
  const name = nameOf(method, params);
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    authorization: `Bearer ${token}`,
    'mcp-protocol-version': MODERN,
    'mcp-method': method,
    ...(name !== undefined ? { 'mcp-name': name } : {}),
  };
  for (const [k, v] of Object.entries(opts.headers ?? {})) {
    if (v === null) delete headers[k.toLowerCase()];
    else headers[k.toLowerCase()] = v;
  }
  const meta = opts.meta === undefined ? envelope(opts.capabilities) : opts.meta;
  const body = JSON.stringify({
    jsonrpc: '2.0',
    id,
    method,
    params: { ...params, ...(meta === null ? {} : { _meta: meta }) },
  });
  const res = await fetch(url, { method: 'POST', headers, body });
  const text = await res.text();
  const messages = (res.headers.get('content-type') ?? '').includes('text/event-stream')
    ? text
        .split(/\r?\n/)
        .filter((l) => l.startsWith('data:'))
        .map((l) => JSON.parse(l.slice(5)) as Record<string, unknown>)
    : text
      ? [JSON.parse(text) as Record<string, unknown>]
      : [];
  const final = messages.findIndex((m) => m.id === id);
  return {
    status: res.status,
    headers: res.headers,
    body: (final >= 0 ? messages[final] : (messages.at(-1) ?? {})) as ModernReply['body'],
    before: final >= 0 ? messages.slice(0, final) : [],
  };
}
