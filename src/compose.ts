// Composition of the application behind every transport: the gateway with its
// launch service and ledger, wired to the store, Temporal and the sandbox.
// `npm start`, `dossier gateway` and `dossier mcp --stdio` all build it here.
import { Client, type ConnectionLike } from '@temporalio/client';
import type { Config } from './config.ts';
import { AnalysisService } from './gateway/analysisService.ts';
import { DeviceRegistry } from './gateway/devices.ts';
import { Gateway } from './gateway/gateway.ts';
import { LaunchService } from './gateway/launchService.ts';
import { Ledger } from './gateway/ledger.ts';
import { Sandbox } from './sandbox/sandbox.ts';
import type { Store } from './store/store.ts';
import { payloadKeys } from './temporal/codec.ts';
import { dataConverter } from './temporal/dataConverter.ts';
import { tracing } from './metrics/tracing.ts';

/** The application behind every transport (HTTP here, stdio in `dossier mcp --stdio`). */
export function buildGateway(
  config: Config,
  store: Store,
  connection: ConnectionLike,
  uiUrl: string,
  opts: { eagerStart?: boolean } = {},
): Gateway {
  const client = new Client({
    connection,
    namespace: config.namespace,
    dataConverter: dataConverter(payloadKeys(config.payloadKeys, config.home)),
    // With tracing on, the workflow start carries the MCP call's trace context.
    interceptors: { workflow: tracing()?.clientInterceptors ?? [] },
  });
  const launches = new LaunchService({
    launches: store.launches,
    devices: store.devices,
    client,
    namespace: config.namespace,
    uiUrl,
    eagerStart: opts.eagerStart,
    dispatch: config.launchDispatch,
  });
  const analyses = new AnalysisService({
    analyses: store.analyses,
    artifacts: store.artifacts,
    client,
    namespace: config.namespace,
    uiUrl,
    databaseMaxRunMs: config.analysis.timeBudgetS * 1000 + 5 * 60_000,
    evidence: store.evidence,
    eagerStart: opts.eagerStart,
  });
  const ledger = new Ledger(store, {
    replyBudgetBytes: config.replyBudgetBytes,
    firstReplyBytes: config.firstReplyBytes,
    bundleRoots: config.bundleRoots,
    home: config.home,
    allowedRoots: config.allowedRoots,
    inbox: config.inbox,
    uploadLimit: config.maxUploadBytes,
    maxJsonDepth: config.maxJsonDepth,
    sandbox: new Sandbox(config.sandbox),
    python: config.analysis.python,
  });
  const devices = new DeviceRegistry({
    store,
    keys: payloadKeys(config.payloadKeys, config.home),
    home: config.home,
  });
  return new Gateway({
    launches,
    analyses,
    devices,
    ledger,
    namespace: config.namespace,
    uiUrl,
    rateLimitPerMinute: config.rateLimitPerMinute,
    approval: config.approval,
    toolsets: config.toolsets,
    store,
  });
}
