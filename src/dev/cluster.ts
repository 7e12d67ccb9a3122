// `dossier cluster up`: the team cluster as processes on one machine, without
// containers. PostgreSQL (Debian's, or an existing server), a real Temporal
// server on it (not the dev server), the read-only audit UI, and dossier's
// gateways and workers as separate `dossier gateway` / `dossier worker`
// processes on the PostgreSQL store, each restarted if it dies, like a
// container with `restart: unless-stopped`. Developers and CI get the
// cluster's failure modes (a worker, a gateway or Temporal dying) on a laptop.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { ConfigError, FETCH_BLOCKED_PORTS, loadConfig, type Config } from '../config.ts';
import { openStore } from '../store/store.ts';
import { payloadKeys } from '../temporal/codec.ts';
import { connectWhenReady, ensureNamespace } from '../temporal/setup.ts';
import { tlsEnv, type TemporalTls } from '../temporal/tls.ts';
import { workflowBundle } from '../worker.ts';
import { ensureTemporalCerts, TEMPORAL_SERVER_NAME } from './certs.ts';
import { clusterJsonPath, type ClusterJson } from './devJson.ts';
import { localToken } from './stack.ts';
import { userCacheDir } from './goTools.ts';
import { clusterDatabases, type Stoppers } from './clusterPostgres.ts';
import { waitForPort } from './owned.ts';
import { ClusterMember, type Member } from './clusterMember.ts';
import {
  resolveTemporalServer,
  serverPorts,
  startTemporalServer,
  type PostgresTarget,
  type ServerBinaries,
  type TemporalServer,
} from './temporalServer.ts';
import { startTemporalReads } from './temporalReads.ts';
import { resolveUiServer, startUiServer, type UiServer } from './uiServer.ts';

export const CLUSTER_LIMITS = { gateways: { default: 2, max: 8 }, workers: { default: 3, max: 16 } } as const;

export interface ClusterOptions {
  gateways?: number;
  workers?: number;
  /** A PostgreSQL superuser URL to use instead of starting Debian's PostgreSQL. */
  postgresUrl?: string;
  /** Port of the PostgreSQL the cluster starts (default 7432). */
  postgresPort?: number;
  /**
   * Give every gateway and worker a DOSSIER_HOME of its own, as on separate
   * hosts: artifacts, extraction outputs, bundles and analysis databases then
   * travel only through the store's blobs.
   */
  separateHomes?: boolean;
  log?: (line: string) => void;
}

export interface Cluster {
  info: ClusterJson;
  gateways: Member[];
  workers: Member[];
  temporal: TemporalServer;
  /** Stops the Temporal server (SIGKILL unless `graceful`) and starts it again on the same database. */
  restartTemporal(opts?: { graceful?: boolean; downMs?: number }): Promise<void>;
  stop(): Promise<void>;
}

function count(value: number | undefined, limit: { default: number; max: number }, what: string) {
  const n = value ?? limit.default;
  if (!Number.isInteger(n) || n < 1 || n > limit.max)
    throw new ConfigError(
      [`--${what}: expected a whole number from 1 to ${limit.max}, got ${value}`],
      'Invalid arguments',
    );
  return n;
}

/** How many gateways and workers, refused before anything starts if their ports or Temporal cannot work. */
function clusterSize(config: Config, opts: ClusterOptions) {
  const gatewayCount = count(opts.gateways, CLUSTER_LIMITS.gateways, 'gateways');
  const workerCount = count(opts.workers, CLUSTER_LIMITS.workers, 'workers');
  if (config.port < 1 || config.port + gatewayCount - 1 > 65_535)
    throw new ConfigError([
      `dossier cluster up puts its gateways on DOSSIER_PORT, DOSSIER_PORT+1, …; DOSSIER_PORT=${config.port} does not leave room for ${gatewayCount}. Pick a port from 1 to ${65_536 - gatewayCount}.`,
    ]);
  const blocked = Array.from({ length: gatewayCount }, (_, i) => config.port + i).filter((p) =>
    FETCH_BLOCKED_PORTS.has(p),
  );
  if (blocked.length > 0)
    throw new ConfigError([
      `dossier cluster up would put a gateway on port ${blocked.join(', ')}, which browsers and fetch() (so MCP clients) refuse to connect to. Pick another DOSSIER_PORT.`,
    ]);
  if (config.temporalAddress)
    throw new ConfigError([
      'DOSSIER_TEMPORAL_ADDRESS: dossier cluster up starts its own Temporal server; unset it (or run `dossier gateway` / `dossier worker` against that server instead).',
    ]);
  return { gatewayCount, workerCount };
}

/** Members on homes of their own get the cluster's key by environment (unless one is configured). */
function sharedPayloadKeys(config: Config, separateHomes: boolean | undefined): NodeJS.ProcessEnv {
  return separateHomes && config.payloadKeys.length === 0
    ? { DOSSIER_PAYLOAD_KEYS: readFileSync(path.join(config.home, 'payload.key'), 'utf8').trim() }
    : {};
}

/**
 * The cluster's Temporal server on PostgreSQL, behind mutual TLS, with the namespace made; `restart`
 * kills it (or stops it, `graceful`) and starts it again on the same database.
 */
async function startClusterTemporal(
  config: Config,
  binaries: ServerBinaries,
  pg: PostgresTarget,
  stoppers: Stoppers,
) {
  const clusterDir = path.join(config.home, 'cluster');
  const ports = serverPorts(config.temporalPort);
  // Temporal's services announce the address they bind to each other: a wildcard cannot be one.
  const host = ['0.0.0.0', '::'].includes(config.host) ? '127.0.0.1' : config.host;
  // Temporal obeys only holders of the cluster's certificates: its own, the members', the UI's.
  const certs = await ensureTemporalCerts(path.join(clusterDir, 'tls'), { hosts: [host] });
  const withName = (set: TemporalTls): TemporalTls => ({ ...set, serverName: TEMPORAL_SERVER_NAME });
  const clientTls = withName(certs.sets.client);
  const temporalOpts = {
    binaries,
    dir: path.join(clusterDir, 'temporal'),
    host,
    ports,
    pg,
    tls: certs.sets.server,
  };
  let temporal = await startTemporalServer(temporalOpts);
  stoppers.push(() => temporal.stop());
  const connection = await connectWhenReady(temporal.address, 60_000, clientTls);
  await ensureNamespace(connection, config.namespace, config.retentionDays);
  await connection.close();
  return {
    address: temporal.address,
    clientTls,
    clientCerts: certs.sets.client,
    uiTls: withName(certs.sets.ui),
    server: () => temporal,
    async restart(restartOpts: { graceful?: boolean; downMs?: number } = {}) {
      if (restartOpts.graceful) await temporal.stop();
      else {
        temporal.process.child.kill('SIGKILL');
        await temporal.process.exited;
      }
      await new Promise((r) => setTimeout(r, restartOpts.downMs ?? 0));
      temporal = await startTemporalServer(temporalOpts);
      await waitForPort(host, ports.frontend, 60_000);
    },
  };
}

/** What every member inherits: the cluster's Temporal, store, UI and keys. */
function memberEnvironment(
  env: NodeJS.ProcessEnv,
  config: Config,
  at: { address: string; storeUrl: string; uiUrl: string; clientTls: TemporalTls },
  sharedKeys: NodeJS.ProcessEnv,
): NodeJS.ProcessEnv {
  const memberEnv: NodeJS.ProcessEnv = {
    ...process.env,
    ...env,
    DOSSIER_HOME: config.home,
    DOSSIER_TEMPORAL_ADDRESS: at.address,
    DOSSIER_STORE: at.storeUrl,
    DOSSIER_UI_URL: at.uiUrl,
    DOSSIER_NAMESPACE: config.namespace,
    // Gateways on this host share one intake folder, whatever their homes.
    DOSSIER_INBOX: path.resolve(config.inbox),
    ...tlsEnv(at.clientTls),
    ...sharedKeys,
  };
  // One exporter address cannot serve several processes.
  delete memberEnv.DOSSIER_SDK_METRICS_ADDRESS;
  return memberEnv;
}

/** The workers and gateways (not started yet); gateway i listens on DOSSIER_PORT + i. */
function clusterMembers(
  config: Config,
  opts: ClusterOptions,
  size: { gatewayCount: number; workerCount: number },
  memberEnv: NodeJS.ProcessEnv,
  gatewayUrl: (i: number) => string,
  stopping: () => boolean,
) {
  const clusterDir = path.join(config.home, 'cluster');
  const log = opts.log ?? ((line: string) => console.error(line));
  const member = (name: string, command: 'gateway' | 'worker', common: NodeJS.ProcessEnv, url?: string) => {
    const home = path.resolve(opts.separateHomes ? path.join(clusterDir, 'hosts', name) : config.home);
    const env = { ...common, DOSSIER_HOME: home };
    return new ClusterMember({
      name,
      command,
      home,
      env,
      url,
      logDir: path.join(clusterDir, 'logs'),
      stopping,
      log,
    });
  };
  const workers = Array.from({ length: size.workerCount }, (_, i) =>
    member(`worker-${i + 1}`, 'worker', {
      ...memberEnv,
      ...(config.metrics.workerPort
        ? { DOSSIER_WORKER_METRICS_PORT: String(config.metrics.workerPort + i) }
        : {}),
    }),
  );
  const gateways = Array.from({ length: size.gatewayCount }, (_, i) =>
    member(
      `gateway-${i + 1}`,
      'gateway',
      {
        ...memberEnv,
        DOSSIER_PORT: String(config.port + i),
        // A client or load balancer may address any replica by its own port.
        DOSSIER_ALLOWED_HOSTS: [
          ...config.allowedHosts,
          ...Array.from({ length: size.gatewayCount }, (_, j) => `${config.host}:${config.port + j}`),
        ]
          .filter(Boolean)
          .join(','),
      },
      gatewayUrl(i),
    ),
  );
  return { workers, gateways };
}

/** The audit UI: its guard asks the cluster's store whose a token is; it reads Temporal through a read-only door. */
async function startAuditUi(
  config: Config,
  uiBinary: string,
  at: { address: string; storeUrl: string; uiUrl: string; uiTls: TemporalTls; codecEndpoint: string },
  stoppers: Stoppers,
): Promise<UiServer> {
  const tokens = await openStore(at.storeUrl);
  stoppers.push(() => tokens.close());
  // The UI server reaches Temporal through a door that passes its reads only; the door holds its certificate.
  const reads = await startTemporalReads({ upstream: at.address, tls: at.uiTls, host: '127.0.0.1', port: 0 });
  stoppers.push(() => reads.stop());
  const ui = await startUiServer({
    viewer: (token) => tokens.tokens.resolve(token),
    binary: uiBinary,
    dir: path.join(config.home, 'cluster', 'ui'),
    temporalAddress: reads.address,
    host: new URL(at.uiUrl).hostname,
    port: Number(new URL(at.uiUrl).port),
    namespace: config.namespace,
    codecEndpoint: at.codecEndpoint,
  });
  stoppers.push(() => ui.stop());
  return ui;
}

/** The Temporal server, the audit UI's binary and the workflow bundle, found or built at once. */
function clusterBinaries(config: Config, log: (line: string) => void) {
  return Promise.all([
    resolveTemporalServer(config.temporalServerBin, log),
    resolveUiServer(config.temporalUiServer, log).catch((err: Error) => {
      log(`dossier: the audit UI will not start: ${err.message}`);
      return undefined;
    }),
    // Bundled once before the workers start, so they all find it cached.
    workflowBundle(path.join(userCacheDir(), 'workflow-bundles')),
  ]);
}

/** Starts the cluster configured by `env` (DOSSIER_* variables), which every member inherits. */
export async function startCluster(
  env: NodeJS.ProcessEnv = process.env,
  opts: ClusterOptions = {},
): Promise<Cluster> {
  const config = loadConfig(env);
  const log = opts.log ?? ((line: string) => console.error(line));
  const size = clusterSize(config, opts);
  mkdirSync(config.home, { recursive: true, mode: 0o700 });
  const clusterDir = path.join(config.home, 'cluster');
  mkdirSync(path.join(clusterDir, 'logs'), { recursive: true, mode: 0o700 });
  // Made once here, so the members, which share this home, never race to make it.
  payloadKeys(config.payloadKeys, config.home);
  const sharedKeys = sharedPayloadKeys(config, opts.separateHomes);

  const stoppers: Stoppers = [];
  let stopping = false;
  const stop = async () => {
    stopping = true;
    for (const s of stoppers.reverse()) await s().catch((err) => log(`dossier: while stopping: ${err}`));
    stoppers.length = 0;
  };
  try {
    const [binaries, uiBinary] = await clusterBinaries(config, log);
    const { pgTarget, storeUrl } = await clusterDatabases(config, opts, stoppers);

    const host = config.host;
    const temporal = await startClusterTemporal(config, binaries, pgTarget, stoppers);
    const { address, clientTls } = temporal;
    log(`dossier: Temporal ${address} on PostgreSQL ${pgTarget.host}:${pgTarget.port}`);

    const uiUrl = config.uiUrl ?? `http://${host}:${config.uiPort}`;
    const gatewayUrl = (i: number) => `http://${host}:${config.port + i}/mcp`;
    const memberEnv = memberEnvironment(env, config, { address, storeUrl, uiUrl, clientTls }, sharedKeys);
    const { workers, gateways } = clusterMembers(config, opts, size, memberEnv, gatewayUrl, () => stopping);
    stoppers.push(async () => {
      await Promise.all([...gateways, ...workers].map((w) => w.halt(config.shutdownGraceMs + 5_000)));
    });
    // Members start one at a time: each loads the same code, and two cores load it faster in turn.
    for (const w of [...workers, ...gateways]) await w.launch();

    if (uiBinary) {
      const codecEndpoint = gatewayUrl(0).replace(/\/mcp$/, '/codec');
      await startAuditUi(
        config,
        uiBinary,
        { address, storeUrl, uiUrl, uiTls: temporal.uiTls, codecEndpoint },
        stoppers,
      );
    }

    const info: ClusterJson = {
      mcp_urls: gateways.map((m) => m.url!),
      token: await clusterToken(config, storeUrl),
      temporal_address: address,
      temporal_tls: { ...temporal.clientCerts, server_name: TEMPORAL_SERVER_NAME },
      temporal_metrics_url: temporal.server().metricsUrl,
      ui_url: uiUrl,
      namespace: config.namespace,
      store: storeUrl,
    };
    writeFileSync(clusterJsonPath(config), `${JSON.stringify(info, null, 2)}\n`, { mode: 0o600 });

    return {
      info,
      gateways,
      workers,
      get temporal() {
        return temporal.server();
      },
      restartTemporal: (restartOpts) => temporal.restart(restartOpts),
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** The local principal's admin token for the cluster, kept in cluster.json like dev.json's. */
async function clusterToken(config: Config, storeUrl: string): Promise<string> {
  const store = await openStore(storeUrl);
  try {
    return await localToken(config, store, clusterJsonPath(config), 'dossier cluster up local token');
  } finally {
    await store.close();
  }
}
