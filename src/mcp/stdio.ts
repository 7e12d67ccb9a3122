// The same MCP server over stdin/stdout, for clients that spawn their servers, in either era: the
// SDK's stdio entry tells them apart by the opening message (an `initialize`, or a request with
// the 2026-07-28 envelope) and pins the connection to a server of that era. Transport only: the
// caller composes the gateway and names the principal. Nothing but JSON-RPC goes to stdout;
// diagnostics go to stderr.
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { serveStdio as serveEitherEra } from '@modelcontextprotocol/server/stdio';
import type { Principal } from '../domain/types.ts';
import type { Gateway } from '../gateway/gateway.ts';
import type { PayloadKey } from '../temporal/keys.ts';
import { createMcpServer } from './server.ts';
import { modernServers } from './modern.ts';
import { normalizeToolsets } from '../tools/toolsets.ts';

/** Serves until stdin ends. `keys` seal the approval gate's requestState (the cluster's payload keys). */
export async function serveStdio(gateway: Gateway, principal: Principal, keys: PayloadKey[]): Promise<void> {
  // The token's toolsets, else the server's; in the handshake era enable_toolsets grows the list.
  const listed = principal.toolsets ? normalizeToolsets(principal.toolsets) : gateway.defaultToolsets;
  const modern = modernServers(gateway, keys);
  // There is no HTTP request to authenticate: the token's principal is every message's auth info,
  // as http.ts gives it to a stateless request.
  const authInfo = {
    token: 'redacted',
    clientId: principal.principal,
    scopes: [principal.role],
    extra: { principal, toolsets: listed, transport: 'stdio' },
  };
  const handle = serveEitherEra(
    ({ era }) => {
      if (era !== 'modern') return createMcpServer(gateway, () => principal, { listed }) as never;
      const server = modern();
      const connect = server.connect.bind(server);
      server.connect = async (transport: Transport) => {
        await connect(transport);
        const deliver = transport.onmessage;
        transport.onmessage = (message, extra) => deliver?.(message, { ...extra, authInfo });
      };
      return server;
    },
    { onerror: (err) => console.error(`dossier mcp --stdio: ${err.message}`) },
  );
  await new Promise<void>((resolve) => {
    process.stdin.once('end', resolve);
    process.stdin.once('close', resolve);
  });
  await handle.close();
}
