// The same MCP server over stdin/stdout, for clients that spawn their servers.
// Transport only: the caller composes the gateway and names the principal.
// Nothing but JSON-RPC goes to stdout; diagnostics go to stderr.
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { Principal } from '../domain/types.ts';
import type { Gateway } from '../gateway/gateway.ts';
import { createMcpServer } from './server.ts';
import { normalizeToolsets } from '../tools/toolsets.ts';

/** Serves until stdin ends. */
export async function serveStdio(gateway: Gateway, principal: Principal): Promise<void> {
  // The token's toolsets, else the server's; enable_toolsets grows the list for this process.
  const listed = principal.toolsets ? normalizeToolsets(principal.toolsets) : gateway.defaultToolsets;
  const server = createMcpServer(gateway, () => principal, { listed });
  const transport = new StdioServerTransport();
  const closed = new Promise<void>((resolve) => (transport.onclose = () => resolve()));
  await server.connect(transport);
  process.stdin.on('end', () => void transport.close());
  await closed;
}
