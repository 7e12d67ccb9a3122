// `dossier mcp --stdio`: the gateway as the principal of DOSSIER_TOKEN, over
// stdin/stdout. Temporal from DOSSIER_TEMPORAL_ADDRESS, or from the running
// embedded stack's dev.json.
import { existsSync, readFileSync } from 'node:fs';
import { buildGateway } from '../compose.ts';
import type { Config } from '../config.ts';
import { devJsonPath, type DevJson } from '../dev/devJson.ts';
import { serveStdio } from '../mcp/stdio.ts';
import { openStore } from '../store/store.ts';
import { payloadKeys } from '../temporal/codec.ts';
import { connectWhenReady } from '../temporal/setup.ts';

export async function stdioCommand(config: Config, token: string | undefined): Promise<void> {
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
  const principal = await store.tokens.resolve(token);
  if (!principal) {
    await store.close();
    throw new Error('DOSSIER_TOKEN is not a valid token for this store.');
  }
  const connection = await connectWhenReady(
    address,
    15_000,
    config.temporalAddress ? config.temporalTls : undefined,
  );
  try {
    const gateway = buildGateway(config, store, connection, uiUrl ?? `http://${address.split(':')[0]}:8233`);
    const stop = gateway.startBackgroundWork();
    try {
      await serveStdio(gateway, principal, payloadKeys(config.payloadKeys, config.home));
    } finally {
      stop();
    }
  } finally {
    await connection.close();
    await store.close();
  }
}
