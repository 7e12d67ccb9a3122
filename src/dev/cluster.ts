// `dossier cluster up`: the team cluster as processes on one machine, without
// containers. PostgreSQL (Debian's, or an existing server), a real Temporal
// server on it (not the dev server), the read-only audit UI, and dossier's
// gateways and workers as separate `dossier gateway` / `dossier worker`
// processes on the PostgreSQL store, each restarted if it dies, like a
// container with `restart: unless-stopped`. Developers and CI get the
// cluster's failure modes (a worker, a gateway or Temporal dying) on a laptop.
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
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
import { startLocalPostgres, type LocalPostgres } from './postgres.ts';
import { startOwned, waitForPort, type OwnedProcess } from './owned.ts';
import {
  resolveTemporalServer,
  serverPorts,
  startTemporalServer,
  visibilityDatabase,
  type PostgresTarget,
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

export interface Member {
  name: string;
  /** Its DOSSIER_HOME: the cluster's own, or one of its own with `separateHomes`. */
  home: string;
  /** The gateway's MCP endpoint; undefined for a worker. */
  url?: string;
  readonly process: OwnedProcess;
  /** Kills the process with `signal`; with `restart: false` it stays down until `start()`. */
  kill(signal?: NodeJS.Signals, opts?: { restart?: boolean }): Promise<void>;
  /** Starts it again after a kill without restart. */
  start(): Promise<void>;
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

const BIN = fileURLToPath(new URL('../../bin/dossier.js', import.meta.url));

function count(value: number | undefined, limit: { default: number; max: number }, what: string) {
  const n = value ?? limit.default;
  if (!Number.isInteger(n) || n < 1 || n > limit.max)
    throw new ConfigError(
      [`--${what}: expected a whole number from 1 to ${limit.max}, got ${value}`],
      'Invalid arguments',
    );
  return n;
}

/** Where the cluster's own PostgreSQL keeps its data: the `postgres` user must reach it when dossier runs as root. */
function postgresDir(config: Config): string {
  if (process.getuid?.() !== 0) return path.join(config.home, 'cluster', 'postgres');
  const tag = createHash('sha256').update(path.resolve(config.home)).digest('hex').slice(0, 12);
  return path.join('/var/lib/postgresql', `dossier-${tag}`);
}

async function databasesOn(url: string, names: string[]): Promise<void> {
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    for (const name of names) {
      const found = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
      if (found.rowCount === 0) await client.query(`CREATE DATABASE "${name}"`);
    }
  } finally {
    await client.end();
  }
}

function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

/** Starts the cluster configured by `env` (DOSSIER_* variables), which every member inherits. */
export async function startCluster(
  env: NodeJS.ProcessEnv = process.env,
  opts: ClusterOptions = {},
): Promise<Cluster> {
  const config = loadConfig(env);
  const log = opts.log ?? ((line: string) => console.error(line));
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
  const ports = serverPorts(config.temporalPort);
  mkdirSync(config.home, { recursive: true, mode: 0o700 });
  const clusterDir = path.join(config.home, 'cluster');
  mkdirSync(path.join(clusterDir, 'logs'), { recursive: true, mode: 0o700 });
  // Made once here, so the members, which share this home, never race to make it.
  payloadKeys(config.payloadKeys, config.home);
  // Members on homes of their own get the cluster's key by environment (unless one is configured).
  const sharedKeys =
    opts.separateHomes && config.payloadKeys.length === 0
      ? { DOSSIER_PAYLOAD_KEYS: readFileSync(path.join(config.home, 'payload.key'), 'utf8').trim() }
      : {};

  const stoppers: (() => Promise<void>)[] = [];
  let stopping = false;
  const stop = async () => {
    stopping = true;
    for (const s of stoppers.reverse()) await s().catch((err) => log(`dossier: while stopping: ${err}`));
    stoppers.length = 0;
  };
  try {
    const bundleCache = path.join(userCacheDir(), 'workflow-bundles');
    const [binaries, uiBinary] = await Promise.all([
      resolveTemporalServer(config.temporalServerBin, log),
      resolveUiServer(config.temporalUiServer, log).catch((err: Error) => {
        log(`dossier: the audit UI will not start: ${err.message}`);
        return undefined;
      }),
      // Bundled once before the workers start, so they all find it cached.
      workflowBundle(bundleCache),
    ]);

    let postgres: LocalPostgres | undefined;
    let superuserUrl = opts.postgresUrl;
    if (!superuserUrl) {
      postgres = await startLocalPostgres({
        dir: postgresDir(config),
        port: opts.postgresPort ?? 7432,
        maxConnections: 300,
      });
      stoppers.push(() => postgres!.stop());
      superuserUrl = postgres.url;
    }
    const base = new URL(superuserUrl);
    const temporalDb = `${config.namespace.replace(/[^a-z0-9_]/g, '_')}_temporal`;
    const pgTarget: PostgresTarget = {
      host: base.hostname,
      port: Number(base.port || 5432),
      user: decodeURIComponent(base.username),
      password: decodeURIComponent(base.password),
      database: temporalDb,
    };
    const storeDb = `${config.namespace.replace(/[^a-z0-9_]/g, '_')}_store`;
    await databasesOn(superuserUrl, [temporalDb, visibilityDatabase(pgTarget), storeDb]);
    const storeUrl = withDatabase(superuserUrl, storeDb);

    const host = config.host;
    // Temporal's services announce the address they bind to each other: a wildcard cannot be one.
    const temporalHost = ['0.0.0.0', '::'].includes(host) ? '127.0.0.1' : host;
    // Temporal obeys only holders of the cluster's certificates: its own, the members', the UI's.
    const certs = await ensureTemporalCerts(path.join(clusterDir, 'tls'), { hosts: [temporalHost] });
    const withName = (set: TemporalTls): TemporalTls => ({ ...set, serverName: TEMPORAL_SERVER_NAME });
    const clientTls = withName(certs.sets.client);
    const temporalOpts = {
      binaries,
      dir: path.join(clusterDir, 'temporal'),
      host: temporalHost,
      ports,
      pg: pgTarget,
      tls: certs.sets.server,
    };
    let temporal = await startTemporalServer(temporalOpts);
    stoppers.push(() => temporal.stop());
    const address = temporal.address;
    const connection = await connectWhenReady(address, 60_000, clientTls);
    await ensureNamespace(connection, config.namespace, config.retentionDays);
    await connection.close();
    log(`dossier: Temporal ${address} on PostgreSQL ${pgTarget.host}:${pgTarget.port}`);

    const uiUrl = config.uiUrl ?? `http://${host}:${config.uiPort}`;
    const gatewayUrl = (i: number) => `http://${host}:${config.port + i}/mcp`;
    const memberEnv: NodeJS.ProcessEnv = {
      ...process.env,
      ...env,
      DOSSIER_HOME: config.home,
      DOSSIER_TEMPORAL_ADDRESS: address,
      DOSSIER_STORE: storeUrl,
      DOSSIER_UI_URL: uiUrl,
      DOSSIER_NAMESPACE: config.namespace,
      // Gateways on this host share one intake folder, whatever their homes.
      DOSSIER_INBOX: path.resolve(config.inbox),
      ...tlsEnv(clientTls),
      ...sharedKeys,
    };
    // One exporter address cannot serve several processes.
    delete memberEnv.DOSSIER_SDK_METRICS_ADDRESS;

    const member = (name: string, command: 'gateway' | 'worker', common: NodeJS.ProcessEnv, url?: string) => {
      const home = path.resolve(opts.separateHomes ? path.join(clusterDir, 'hosts', name) : config.home);
      const env = { ...common, DOSSIER_HOME: home };
      let proc: OwnedProcess | undefined; // the current process, once it is ready
      let launching: Promise<void> | undefined;
      let retry: NodeJS.Timeout | undefined;
      let held = false; // killed without restart: down until start()
      let failures = 0;
      const down = () => stopping || held;
      /** Starts again after `failures` quick deaths: 1 s, 2 s, 4 s … at most 30 s. */
      const restartLater = () => {
        const delay = Math.min(30_000, 1_000 * 2 ** Math.min(failures - 1, 5));
        retry = setTimeout(() => {
          retry = undefined;
          if (down()) return;
          launch().catch((err: Error) => {
            failures++;
            log(`dossier: ${name} did not start (${err.message.split('\n')[0]}); trying again`);
            restartLater();
          });
        }, delay);
      };
      const launch = (): Promise<void> => {
        launching = (async () => {
          const p = await startOwned({
            name: `dossier ${name}`,
            command: process.execPath,
            args: [BIN, command],
            env,
            logFile: path.join(clusterDir, 'logs', `${name}.log`),
            ready: (started) =>
              new Promise<void>((resolve, reject) => {
                const check = () => {
                  if (!/dossier is ready|worker ready/.test(started.tail())) return;
                  clearTimeout(timer);
                  started.child.stdout?.off('data', check);
                  started.child.stderr?.off('data', check);
                  resolve();
                };
                const timer = setTimeout(() => reject(new Error('not ready within 120 s')), 120_000);
                void started.exited.then(() => clearTimeout(timer));
                started.child.stdout?.on('data', check);
                started.child.stderr?.on('data', check);
                check();
              }),
          });
          proc = p;
          const upAt = Date.now();
          void p.exited.then((code) => {
            if (down() || proc !== p) return;
            // A member that stayed up a minute starts over at 1 s; one that keeps dying backs off.
            failures = Date.now() - upAt > 60_000 ? 1 : failures + 1;
            log(`dossier: ${name} exited (${code ?? p.child.signalCode}); restarting it`);
            restartLater();
          });
        })().finally(() => {
          launching = undefined;
        });
        return launching;
      };
      const m: Member = {
        name,
        home,
        url,
        get process() {
          return proc!;
        },
        async kill(signal = 'SIGKILL', killOpts = {}) {
          if (killOpts.restart === false) {
            held = true;
            clearTimeout(retry);
          }
          const current = proc!;
          current.child.kill(signal);
          await current.exited;
        },
        async start() {
          held = false;
          clearTimeout(retry);
          await launching?.catch(() => undefined);
          if (!proc || proc.ended) await launch();
        },
      };
      /** Stops it for good: no restart pending, a start under way awaited, then the process stopped. */
      const halt = async (graceMs: number) => {
        clearTimeout(retry);
        await launching?.catch(() => undefined);
        await proc?.stop(graceMs);
      };
      return { m, launch, halt };
    };

    const workers = Array.from({ length: workerCount }, (_, i) =>
      member(`worker-${i + 1}`, 'worker', {
        ...memberEnv,
        ...(config.metrics.workerPort
          ? { DOSSIER_WORKER_METRICS_PORT: String(config.metrics.workerPort + i) }
          : {}),
      }),
    );
    const gateways = Array.from({ length: gatewayCount }, (_, i) =>
      member(
        `gateway-${i + 1}`,
        'gateway',
        {
          ...memberEnv,
          DOSSIER_PORT: String(config.port + i),
          // A client or load balancer may address any replica by its own port.
          DOSSIER_ALLOWED_HOSTS: [
            ...config.allowedHosts,
            ...Array.from({ length: gatewayCount }, (_, j) => `${host}:${config.port + j}`),
          ]
            .filter(Boolean)
            .join(','),
        },
        gatewayUrl(i),
      ),
    );
    stoppers.push(async () => {
      await Promise.all([...gateways, ...workers].map((w) => w.halt(config.shutdownGraceMs + 5_000)));
    });
    // Members start one at a time: each loads the same code, and two cores load it faster in turn.
    for (const w of [...workers, ...gateways]) await w.launch();

    let ui: UiServer | undefined;
    if (uiBinary) {
      // The UI's guard asks the cluster's store whose a token is.
      const tokens = await openStore(storeUrl);
      stoppers.push(() => tokens.close());
      // The UI server reaches Temporal through a door that passes its reads only; the door holds its certificate.
      const reads = await startTemporalReads({
        upstream: address,
        tls: withName(certs.sets.ui),
        host: '127.0.0.1',
        port: 0,
      });
      stoppers.push(() => reads.stop());
      ui = await startUiServer({
        viewer: (token) => tokens.tokens.resolve(token),
        binary: uiBinary,
        dir: path.join(clusterDir, 'ui'),
        temporalAddress: reads.address,
        host: new URL(uiUrl).hostname,
        port: Number(new URL(uiUrl).port),
        namespace: config.namespace,
        codecEndpoint: gatewayUrl(0).replace(/\/mcp$/, '/codec'),
      });
      stoppers.push(() => ui!.stop());
    }

    const info: ClusterJson = {
      mcp_urls: gateways.map(({ m }) => m.url!),
      token: await clusterToken(config, storeUrl),
      temporal_address: address,
      temporal_tls: { ...certs.sets.client, server_name: TEMPORAL_SERVER_NAME },
      temporal_metrics_url: temporal.metricsUrl,
      ui_url: uiUrl,
      namespace: config.namespace,
      store: storeUrl,
    };
    writeFileSync(clusterJsonPath(config), `${JSON.stringify(info, null, 2)}\n`, { mode: 0o600 });

    return {
      info,
      gateways: gateways.map(({ m }) => m),
      workers: workers.map(({ m }) => m),
      get temporal() {
        return temporal;
      },
      async restartTemporal(restartOpts = {}) {
        if (restartOpts.graceful) await temporal.stop();
        else {
          temporal.process.child.kill('SIGKILL');
          await temporal.process.exited;
        }
        await new Promise((r) => setTimeout(r, restartOpts.downMs ?? 0));
        temporal = await startTemporalServer(temporalOpts);
        await waitForPort(temporalHost, ports.frontend, 60_000);
      },
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
