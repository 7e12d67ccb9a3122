// The floor for the cheapest tool call: a bare MCP SDK server over Streamable
// HTTP with stateful sessions (as dossier's gateway), one tool that answers a
// small structured object, no authentication, no store. Run as its own
// process by bench/calls.ts: `node --import tsx bench/bareServer.ts PORT`.
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { randomUUID } from 'node:crypto';
import http from 'node:http';

const sessions = new Map<string, StreamableHTTPServerTransport>();

function newServer(): Server {
  const server = new Server({ name: 'bare', version: '1' }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [{ name: 'whoami', inputSchema: { type: 'object' } }],
  }));
  server.setRequestHandler(CallToolRequestSchema, async () => {
    const value = { principal: 'bench', team: 'bench', role: 'operator', namespace: 'dossier' };
    return { content: [{ type: 'text', text: JSON.stringify(value) }], structuredContent: value };
  });
  return server;
}

const port = Number(process.argv[2]);
http
  .createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = chunks.length ? JSON.parse(Buffer.concat(chunks).toString()) : undefined;
    const id = req.headers['mcp-session-id'] as string | undefined;
    let transport = id ? sessions.get(id) : undefined;
    if (!transport) {
      const made: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (sid) => void sessions.set(sid, made),
      });
      made.onclose = () => made.sessionId && sessions.delete(made.sessionId);
      await newServer().connect(made);
      transport = made;
    }
    await transport.handleRequest(req, res, body);
  })
  .listen(port, '127.0.0.1', () => console.log('bare server ready'));
