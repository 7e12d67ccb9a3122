// `dossier mcp --stdio`: the same tools over stdin/stdout for clients that
// spawn their servers. The principal comes from DOSSIER_TOKEN; Temporal from
// DOSSIER_TEMPORAL_ADDRESS, or from the running embedded stack's dev.json.
// Nothing but JSON-RPC goes to stdout; diagnostics go to stderr.
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { existsSync, readFileSync } from 'node:fs';
import type { Config } from '../config.ts';
import { buildGateway, devJsonPath, type DevJson } from '../dev/stack.ts';
import { openStore } from '../evidence/open.ts';
import { connectWhenReady } from '../temporal/setup.ts';
import { createMcpServer } from './server.ts';

export async function serveStdio(config: Config, token: string | undefined): Promise<void> {
  if (!token)
    throw new Error(
      'DOSSIER_TOKEN is required: the bearer token of the principal this stdio server acts for.',
    );
  let address = config.temporalAddress;
  let uiUrl = config.uiUrl;
  if (!address && existsSync(devJsonPath(config))) {
    const dev = JSON.parse(readFileSync(devJsonPath(config), 'utf8')) as DevJson;
    address = dev.temporal_address;
    uiUrl ??= dev.ui_url;
  }
  if (!address) {
    throw new Error(
      `No Temporal to connect to: set DOSSIER_TEMPORAL_ADDRESS, or start the embedded stack (npm start) so ${devJsonPath(config)} exists.`,
    );
  }
  const store = await openStore(config.store);
  const principal = await store.resolveToken(token);
  if (!principal) {
    await store.close();
    throw new Error('DOSSIER_TOKEN is not a valid token for this store.');
  }
  const connection = await connectWhenReady(address, 15_000);
  const gateway = buildGateway(config, store, connection, uiUrl ?? `http://${address.split(':')[0]}:8233`);
  const server = createMcpServer(gateway, () => principal);
  const transport = new StdioServerTransport();
  const closed = new Promise<void>((resolve) => (transport.onclose = () => resolve()));
  await server.connect(transport);
  process.stdin.on('end', () => void transport.close());
  await closed;
  await connection.close();
  await store.close();
}
