// The embedded default behind `npm start`: Temporal dev server on a SQLite file
// with its Web UI, one worker for every capability, and the HTTP gateway, all
// under DOSSIER_HOME. Also used by the tests and benchmarks, so they exercise
// exactly what users run.
import type { Connection } from '@temporalio/client';
import { chmodSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { Config } from '../config.ts';
import { openStore, type Store } from '../store/store.ts';
import { buildGateway } from '../compose.ts';
import type { Gateway } from '../gateway/gateway.ts';
import { startHttpGateway, type HttpGateway } from '../mcp/http.ts';
import { payloadKeys, TeamPayloadCodec, type PayloadKey } from '../temporal/codec.ts';
import { connectWhenReady, ensureNamespace, requireStandaloneActivities } from '../temporal/setup.ts';
import { startWorkers, workflowBundle, type RunningWorkers } from '../worker.ts';
import { startDevServer, type DevServer } from './devServer.ts';
import { resolveTemporalCli, userCacheDir } from './temporalCli.ts';
import { resolveUiServer, startUiServer } from './uiServer.ts';
import { lockHome } from './homeLock.ts';
import { cachedProvider, provisionProvider } from '../analysis/venv.ts';
import { cachedFlash, flashUnpackers } from '../python/flash.ts';
import { cachedUnblob, unblobEnv } from '../python/unblob.ts';
import { startMetricsListener } from '../mcp/metricsRoute.ts';
import { startTracing } from '../metrics/tracing.ts';
import { devJsonPath, type DevJson } from './devJson.ts';

export type { DevJson } from './devJson.ts';

export interface Stack {
  devJson: DevJson;
  config: Config;
  store: Store;
  http: HttpGateway;
  /** The transport-free application behind the HTTP gateway (undefined without one). */
  gateway: Gateway | undefined;
  temporal: DevServer | undefined;
  stop(): Promise<void>;
}

export interface StackParts {
  /** Start the Temporal dev server (unless DOSSIER_TEMPORAL_ADDRESS names one). Default true. */
  temporal?: boolean;
  workers?: boolean;
  gateway?: boolean;
  /**
   * Make (or reuse, through dev.json) the local principal's admin token. Default: only for the
   * embedded stack; a cluster gateway never mints tokens on its own.
   */
  localToken?: boolean;
  /** Start launches claimed while Temporal was unreachable, every few seconds (default true). */
  resumeLaunches?: boolean;
  /** Where the bundled workflow code is cached (default: the per-user cache, shared by every DOSSIER_HOME). */
  bundleCacheDir?: string;
  log?: (line: string) => void;
}

/** Things started so far, stopped in reverse order. */
type Stoppers = (() => Promise<void>)[];

/** The Temporal dev server of this home (which it locks), and the audit UI's binary if one is found. */
async function startEmbeddedTemporal(config: Config, log: (line: string) => void, stoppers: Stoppers) {
  // One stack per home: its dev server owns temporal.db, and dev.json is its.
  const release = lockHome(config.home);
  stoppers.push(async () => release());
  // The audit UI is Temporal's UI server with writes disabled; the dev server's own UI cannot disable them.
  const [cli, uiBinary] = await Promise.all([
    resolveTemporalCli({ configured: config.temporalCli, log }),
    resolveUiServer(config.temporalUiServer, log).catch((err: Error) => {
      log(`dossier: the audit UI will not start: ${err.message}`);
      return undefined;
    }),
  ]);
  const temporal = await startDevServer({
    cli,
    dbFile: path.join(config.home, 'temporal.db'),
    port: config.temporalPort,
    uiPort: config.uiPort,
    namespace: config.namespace,
    logFile: path.join(config.home, 'temporal.log'),
    headless: true,
  });
  stoppers.push(() => temporal.stop());
  return { temporal, uiBinary };
}

/** The angr provider and the unpackers install in the background (once, about a minute); their tools wait for them. */
function provisionInBackground(config: Config, log: (line: string) => void) {
  if (config.capabilities.includes('analysis') && !cachedProvider(config.analysis.python)) {
    provisionProvider(config.analysis.python, { log }).catch((err: Error) =>
      log(
        `dossier: the angr provider could not be provisioned (${err.message}); analysis tools will fail until \`npm run provision:analysis\` succeeds.`,
      ),
    );
  }
  if (config.capabilities.includes('extract') && !cachedFlash(config.analysis.python)) {
    flashUnpackers(config.analysis.python, log).catch((err: Error) =>
      log(
        `dossier: the flash unpackers could not be provisioned (${err.message}); JFFS2 and UBI extractions will try again.`,
      ),
    );
  }
  if (config.capabilities.includes('extract') && !cachedUnblob(config.analysis.python)) {
    unblobEnv(config.analysis.python, log).catch((err: Error) =>
      log(
        `dossier: unblob could not be provisioned (${err.message}); extractions that need it will try again.`,
      ),
    );
  }
}

/** The gateway and its HTTP transport; with workers in this process it shares their connection. */
async function startGatewayHttp(
  config: Config,
  store: Store,
  via: { connection: Connection; workers: RunningWorkers | undefined; uiUrl: string; keys: PayloadKey[] },
  parts: StackParts,
  stoppers: Stoppers,
) {
  const { connection, workers, uiUrl, keys } = via;
  // With workers in this process, the gateway shares their connection: launches start eagerly.
  const gateway = workers
    ? buildGateway(config, store, workers.connection, uiUrl, { eagerStart: true })
    : buildGateway(config, store, connection, uiUrl);
  if (parts.resumeLaunches !== false) {
    const stopBackground = gateway.startBackgroundWork();
    stoppers.push(async () => stopBackground());
  }
  const http = await startHttpGateway(gateway, store.tokens, {
    host: config.host,
    port: config.port,
    maxRequestBytes: config.maxRequestBytes,
    maxUploadBytes: config.maxUploadBytes,
    maxJsonDepth: config.maxJsonDepth,
    allowedHosts: config.allowedHosts,
    allowedOrigins: config.allowedOrigins,
    codec: new TeamPayloadCodec(keys),
    keys,
    metricsToken: config.metrics.token,
    sessionStore: store.sessions,
    ...config.http,
  });
  stoppers.push(() => http.close());
  return { http, gateway };
}

/** A worker without a gateway in its process serves its metrics on a listener of its own. */
async function startWorkerMetrics(config: Config, log: (line: string) => void, stoppers: Stoppers) {
  if (!config.metrics.workerPort) return;
  const listener = await startMetricsListener(config.host, config.metrics.workerPort, config.metrics.token);
  stoppers.push(() => new Promise<void>((resolve) => listener.close(() => resolve())));
  log(`dossier: worker metrics on http://${config.host}:${config.metrics.workerPort}/metrics`);
}

export async function startStack(config: Config, parts: StackParts = {}): Promise<Stack> {
  const log = parts.log ?? ((line: string) => console.error(line));
  // dossier's state is the worker's alone: no other uid (sandboxed programs included) may enter it.
  mkdirSync(config.home, { recursive: true, mode: 0o700 });
  chmodSync(config.home, 0o700);
  const keys = payloadKeys(config.payloadKeys, config.home);
  const stoppers: Stoppers = [];
  const stop = async () => {
    for (const s of stoppers.reverse()) await s().catch((err) => log(`dossier: while stopping: ${err}`));
    stoppers.length = 0;
  };
  try {
    // Before anything that makes spans or Temporal clients: they pick tracing up when it is on.
    const traced = await startTracing(config.tracesEndpoint);
    if (traced) stoppers.push(() => traced.flush());
    const bundling =
      parts.workers === false
        ? undefined
        : workflowBundle(
            parts.bundleCacheDir ?? path.join(userCacheDir(), 'workflow-bundles'),
            traced ? [traced.workflowModule] : [],
          );
    bundling?.catch(() => undefined);

    const embedded =
      !config.temporalAddress && parts.temporal !== false
        ? await startEmbeddedTemporal(config, log, stoppers)
        : undefined;
    const temporal = embedded?.temporal;
    const uiBinary = embedded?.uiBinary;
    const address = config.temporalAddress ?? temporal?.address;
    let uiUrl = config.uiUrl ?? temporal?.uiUrl;
    if (!address)
      throw new Error(
        'No Temporal to connect to: set DOSSIER_TEMPORAL_ADDRESS or let dossier start its dev server.',
      );
    uiUrl ??= `http://${address.split(':')[0]}:8233`;

    // The embedded dev server speaks no TLS; a cluster's Temporal (DOSSIER_TEMPORAL_ADDRESS) requires it.
    const tls = temporal ? undefined : config.temporalTls;
    const connection: Connection = await connectWhenReady(address, 60_000, tls);
    stoppers.push(() => connection.close());
    await ensureNamespace(connection, config.namespace, config.retentionDays);
    if (config.launchDispatch === 'standalone' && parts.gateway !== false)
      await requireStandaloneActivities(connection, config.namespace, address);

    const store = await openStore(config.store);
    stoppers.push(() => store.close());
    if (store.blobs) store.blobs.quotaBytesPerTeam = config.sharedBytesPerTeam;

    let workers: RunningWorkers | undefined;
    if (bundling) {
      workers = await startWorkers({ config, store, address, tls, bundle: await bundling });
      stoppers.push(() => workers!.shutdown());
      provisionInBackground(config, log);
    }

    if (workers && parts.gateway === false) await startWorkerMetrics(config, log, stoppers);

    const { http, gateway } =
      parts.gateway !== false
        ? await startGatewayHttp(config, store, { connection, workers, uiUrl, keys }, parts, stoppers)
        : { http: undefined, gateway: undefined };

    if (uiBinary && temporal) {
      const ui = await startUiServer({
        viewer: (token) => store.tokens.resolve(token),
        binary: uiBinary,
        dir: path.join(config.home, 'ui'),
        temporalAddress: address,
        host: new URL(uiUrl).hostname,
        port: Number(new URL(uiUrl).port),
        namespace: config.namespace,
        codecEndpoint: http ? http.url.replace(/\/mcp$/, '/codec') : undefined,
      });
      stoppers.push(() => ui.stop());
    }

    const devJson: DevJson = {
      mcp_url: http?.url ?? '',
      token: http && (parts.localToken ?? !config.temporalAddress) ? await localToken(config, store) : '',
      temporal_address: address,
      ui_url: uiUrl,
      namespace: config.namespace,
    };
    return { devJson, config, store, http: http!, gateway, temporal, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/**
 * The local principal's admin token: made on first start, kept in the JSON
 * file `file` (dev.json, cluster.json; 0600) and reused while it resolves.
 */
export async function localToken(
  config: Config,
  store: Store,
  file = devJsonPath(config),
  label = 'npm start local token',
): Promise<string> {
  if (existsSync(file)) {
    try {
      const previous = JSON.parse(readFileSync(file, 'utf8')) as { token?: unknown };
      if (typeof previous.token === 'string' && (await store.tokens.resolve(previous.token)))
        return previous.token;
    } catch {
      // unreadable file: make a new token below
    }
  }
  return store.tokens.create({ principal: config.principal, team: config.team, role: 'admin' }, label);
}
