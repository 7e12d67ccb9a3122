// A real Temporal server (not the CLI's dev server) on PostgreSQL, for the
// process-level cluster: the server and temporal-sql-tool built once with Go
// into the per-user cache, both schemas created and migrated with the tool,
// then every service (frontend, history, matching, worker) in one process
// that the cluster owns. Every listener stays below 32768: the server stores
// membership ports as smallint.
import { execFile } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { ConfigError } from '../config.ts';
import { TEMPORAL_SERVER_NAME, type CertSet } from './certs.ts';
import { buildWithGo, cachedTool, isExecutable, type GoTool } from './goTools.ts';
import { startOwned, waitForPort, type OwnedProcess } from './owned.ts';

const run = promisify(execFile);

export const TEMPORAL_SERVER: GoTool = {
  name: 'temporal-server',
  module: 'go.temporal.io/server/cmd/server',
  binary: 'server',
};
export const TEMPORAL_SQL_TOOL: GoTool = {
  name: 'temporal-sql-tool',
  module: 'go.temporal.io/server/cmd/tools/sql',
  binary: 'sql',
};
/** v1.30 and later need a newer Go than Debian's machines here have. */
export const SERVER_VERSIONS = ['v1.29.1'] as const;

export interface ServerBinaries {
  server: string;
  sqlTool: string;
}

/** The server and its SQL tool: DOSSIER_TEMPORAL_SERVER_BIN folder, cached builds, or fresh builds (about 10 minutes, once). */
export async function resolveTemporalServer(
  configuredDir: string | undefined,
  log: (line: string) => void = (line) => console.error(line),
): Promise<ServerBinaries> {
  if (configuredDir) {
    const found = { server: path.join(configuredDir, 'server'), sqlTool: path.join(configuredDir, 'sql') };
    for (const file of Object.values(found))
      if (!isExecutable(file))
        throw new Error(
          `DOSSIER_TEMPORAL_SERVER_BIN=${configuredDir} must hold the executables \`server\` and \`sql\` (temporal-sql-tool); ${file} is not one.`,
        );
    return found;
  }
  // One after the other: the second build reuses the first's Go build cache.
  const server =
    cachedTool(TEMPORAL_SERVER, SERVER_VERSIONS) ??
    (await buildWithGo(TEMPORAL_SERVER, SERVER_VERSIONS[0], { log }));
  const sqlTool =
    cachedTool(TEMPORAL_SQL_TOOL, SERVER_VERSIONS) ??
    (await buildWithGo(TEMPORAL_SQL_TOOL, SERVER_VERSIONS[0], { log }));
  return { server, sqlTool };
}

export interface PostgresTarget {
  host: string;
  port: number;
  user: string;
  password?: string;
  /** The main store's database; visibility uses `<database>_visibility`. Both must exist. */
  database: string;
}

export function visibilityDatabase(target: PostgresTarget): string {
  return `${target.database}_visibility`;
}

/**
 * Brings both schemas to the version this server needs: version tables on a
 * fresh database, then every migration not yet applied (idempotent, so it runs
 * on every start, and an upgraded server migrates its own data).
 */
export async function migrateSchemas(sqlTool: string, target: PostgresTarget) {
  for (const [database, schema] of [
    [target.database, 'postgresql/v12/temporal'],
    [visibilityDatabase(target), 'postgresql/v12/visibility'],
  ] as const) {
    const common = [
      '--endpoint',
      target.host,
      '--port',
      String(target.port),
      '--user',
      target.user,
      '--database',
      database,
      '--plugin',
      'postgres12',
    ];
    for (const task of [
      ['setup-schema', '-v', '0.0'],
      ['update-schema', '--schema-name', schema],
    ]) {
      try {
        // The password by environment, not argument: a command line is visible to every local user.
        await run(sqlTool, [...common, ...task], {
          timeout: 300_000,
          env: { ...process.env, SQL_PASSWORD: target.password ?? '' },
        });
      } catch (err) {
        const e = err as { stderr?: string; message: string };
        throw new Error(
          `temporal-sql-tool ${task[0]} on ${database} failed: ${(e.stderr || e.message).trim().slice(-2_000)}`,
        );
      }
    }
  }
}

export interface ServerPorts {
  frontend: number;
  frontendHttp: number;
  history: number;
  matching: number;
  worker: number;
  /** Membership (ringpop) ports of the four services, in that order. */
  membership: [number, number, number, number];
  /** Where the server's own Prometheus metrics are served. */
  metrics: number;
}

/** The upstream development layout around a frontend port: 7233 gives 7234, 7235, 7239, 7243, 6933… and 8000. */
export function serverPorts(frontend: number): ServerPorts {
  const ports: ServerPorts = {
    frontend,
    frontendHttp: frontend + 10,
    history: frontend + 1,
    matching: frontend + 2,
    worker: frontend + 6,
    membership: [frontend - 300, frontend - 299, frontend - 298, frontend - 294],
    metrics: frontend + 767,
  };
  const all = [...Object.values(ports).flat()] as number[];
  if (all.some((p) => p < 1024 || p > 32767))
    throw new ConfigError([
      `DOSSIER_TEMPORAL_PORT=${frontend} puts the server's ports at ${Math.min(...all)}–${Math.max(...all)}; they must stay within 1024–32767 (Temporal stores membership ports as smallint). Pick a frontend port between 1324 and 32000.`,
    ]);
  return ports;
}

export interface ServerConfigOptions {
  host: string;
  ports: ServerPorts;
  pg: PostgresTarget;
  dynamicConfigFile: string;
  /** The server's certificate, key and CA: every listener requires a client certificate that CA signed. */
  tls: CertSet;
  /** Default 4; fixed for the life of the database. */
  historyShards?: number;
}

/**
 * Mutual TLS on every gRPC listener: the frontend and the internal services (history, matching,
 * worker) accept only clients with a certificate of the cluster's CA, and present, to each other
 * and as the system worker's client, the server's own (which names TEMPORAL_SERVER_NAME).
 */
function tlsConfig(tls: CertSet): string[] {
  const files = [`certFile: ${JSON.stringify(tls.cert)}`, `keyFile: ${JSON.stringify(tls.key)}`];
  const server = [
    'server:',
    ...files.map((f) => `  ${f}`),
    '  requireClientAuth: true',
    '  clientCaFiles:',
    `    - ${JSON.stringify(tls.ca)}`,
  ];
  const client = [
    'client:',
    `  serverName: ${TEMPORAL_SERVER_NAME}`,
    '  rootCaFiles:',
    `    - ${JSON.stringify(tls.ca)}`,
  ];
  return [
    '  tls:',
    '    expirationChecks:',
    '      warningWindow: 720h',
    '      errorWindow: 168h',
    '      checkInterval: 1h',
    '    internode:',
    ...[...server, ...client].map((l) => `      ${l}`),
    '    frontend:',
    ...[...server, ...client].map((l) => `      ${l}`),
    '    systemWorker:',
    ...[...files, ...client].map((l) => `      ${l}`),
  ];
}

export function serverConfig(opts: ServerConfigOptions): string {
  const { host, ports, pg } = opts;
  const store = (database: string, conns: number) => [
    '      sql:',
    '        pluginName: postgres12',
    `        databaseName: ${JSON.stringify(database)}`,
    `        connectAddr: ${JSON.stringify(`${pg.host}:${pg.port}`)}`,
    '        connectProtocol: tcp',
    `        user: ${JSON.stringify(pg.user)}`,
    `        password: ${JSON.stringify(pg.password ?? '')}`,
    `        maxConns: ${conns}`,
    `        maxIdleConns: ${conns}`,
    '        maxConnLifetime: 1h',
  ];
  return `${[
    ...configHead(host, opts.historyShards ?? 4, store(pg.database, 20), store(visibilityDatabase(pg), 4)),
    '  metrics:',
    '    prometheus:',
    '      framework: tally',
    '      timerType: histogram',
    `      listenAddress: ${JSON.stringify(`${host}:${ports.metrics}`)}`,
    ...tlsConfig(opts.tls),
    ...serviceLayout(host, ports, opts.dynamicConfigFile),
  ].join('\n')}\n`;
}

/** The configuration's log, its two datastores (`sql:` blocks), and the membership's address. */
export function configHead(
  host: string,
  historyShards: number,
  main: string[],
  visibility: string[],
): string[] {
  return [
    'log:',
    '  stdout: true',
    '  level: warn',
    'persistence:',
    '  defaultStore: default',
    '  visibilityStore: visibility',
    `  numHistoryShards: ${historyShards}`,
    '  datastores:',
    '    default:',
    ...main,
    '    visibility:',
    ...visibility,
    'global:',
    '  membership:',
    '    maxJoinDuration: 30s',
    `    broadcastAddress: ${JSON.stringify(host)}`,
  ];
}

/**
 * The configuration's services, one cluster of them, and where the dynamic config is: every
 * service in one process, each on its port of `ports` and bound to `host`.
 */
export function serviceLayout(host: string, ports: ServerPorts, dynamicConfigFile: string): string[] {
  const service = (name: string, grpc: number, membership: number, extra: string[] = []) => [
    `  ${name}:`,
    '    rpc:',
    `      grpcPort: ${grpc}`,
    `      membershipPort: ${membership}`,
    `      bindOnIP: ${JSON.stringify(host)}`,
    ...extra,
  ];
  return [
    'services:',
    ...service('frontend', ports.frontend, ports.membership[0], [`      httpPort: ${ports.frontendHttp}`]),
    ...service('history', ports.history, ports.membership[1]),
    ...service('matching', ports.matching, ports.membership[2]),
    ...service('worker', ports.worker, ports.membership[3]),
    'clusterMetadata:',
    '  enableGlobalNamespace: false',
    '  failoverVersionIncrement: 10',
    '  masterClusterName: active',
    '  currentClusterName: active',
    '  clusterInformation:',
    '    active:',
    '      enabled: true',
    '      initialFailoverVersion: 1',
    '      rpcName: frontend',
    `      rpcAddress: ${JSON.stringify(`${host}:${ports.frontend}`)}`,
    'dcRedirectionPolicy:',
    '  policy: noop',
    'dynamicConfigClient:',
    `  filepath: ${JSON.stringify(dynamicConfigFile)}`,
    '  pollInterval: 10s',
  ];
}

/** The server's dynamic configuration, one file for `cluster up` and docker-compose.yml alike. */
export const DYNAMIC_CONFIG_FILE = fileURLToPath(
  new URL('../../deploy/temporal/dynamicconfig.yaml', import.meta.url),
);

/**
 * The settings of a dynamic config file in the flat form dossier writes (`key:`, then one
 * `  - value: …` line each, no constraints), key by key, each value as written.
 */
export function dynamicConfigValues(text: string): Map<string, string[]> {
  const settings = new Map<string, string[]>();
  let current: string[] | undefined;
  for (const line of text.split('\n')) {
    const key = /^([\w.]+):\s*$/.exec(line);
    const value = /^\s+- value: (.+)$/.exec(line);
    if (key) settings.set(key[1]!, (current = []));
    else if (value && current) current.push(value[1]!.trim());
    else if (!line.startsWith('#')) current = undefined;
  }
  return settings;
}

/** A dynamic config file of these settings, in that flat form. */
export function dynamicConfigText(settings: Map<string, string[]>): string {
  return [...settings]
    .map(([key, values]) => `${key}:\n${values.map((v) => `  - value: ${v}\n`).join('')}`)
    .join('');
}

export interface TemporalServer {
  address: string;
  /** The server executable. */
  binary: string;
  metricsUrl: string;
  process: OwnedProcess;
  stop(): Promise<void>;
}

export interface TemporalServerOptions {
  binaries: ServerBinaries;
  /** Holds config/ and the log. */
  dir: string;
  host: string;
  ports: ServerPorts;
  pg: PostgresTarget;
  /** The server's certificate set (certs.ts). */
  tls: CertSet;
}

/** Migrates the schemas, then starts every service and waits until the frontend answers. */
export async function startTemporalServer(opts: TemporalServerOptions): Promise<TemporalServer> {
  await migrateSchemas(opts.binaries.sqlTool, opts.pg);
  const configDir = path.join(opts.dir, 'config');
  mkdirSync(configDir, { recursive: true, mode: 0o700 });
  writeFileSync(
    path.join(configDir, 'dossier.yaml'),
    serverConfig({ ...opts, dynamicConfigFile: DYNAMIC_CONFIG_FILE }),
    { mode: 0o600 },
  );
  const proc = await startOwned({
    name: 'The Temporal server',
    command: opts.binaries.server,
    args: ['--root', opts.dir, '--config', 'config', '--env', 'dossier', '--allow-no-auth', 'start'],
    logFile: path.join(opts.dir, 'temporal.log'),
    hint: `are ports ${opts.ports.membership[0]}–${opts.ports.metrics} free? set DOSSIER_TEMPORAL_PORT`,
    ready: () => waitForPort(opts.host, opts.ports.frontend, 120_000),
  });
  return {
    address: `${opts.host}:${opts.ports.frontend}`,
    binary: opts.binaries.server,
    metricsUrl: `http://${opts.host}:${opts.ports.metrics}/metrics`,
    process: proc,
    stop: () => proc.stop(),
  };
}
