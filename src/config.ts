// Configuration comes from DOSSIER_* environment variables only, validated once
// at start-up (each variable's default and bounds: src/configEnv.ts). A bad
// value stops the process with one line per problem that names the variable,
// what was given and what is accepted.
import os from 'node:os';
import path from 'node:path';
import type { Capability } from './domain/types.ts';
import type { SandboxPolicy } from './sandbox/sandbox.ts';
import { parsePayloadKeys, type PayloadKey } from './temporal/keys.ts';
import type { TemporalTls } from './temporal/tls.ts';
import { parseToolsets, type Toolset } from './tools/toolsets.ts';
import { DEFAULT_TEAM_WORKSPACE_BYTES, schema, type Env } from './configEnv.ts';

export { FETCH_BLOCKED_PORTS } from './configEnv.ts';

export interface Config {
  home: string;
  host: string;
  port: number;
  allowedHosts: string[];
  allowedOrigins: string[];
  temporalPort: number;
  uiPort: number;
  temporalAddress: string | undefined;
  /** The client certificate, key and CA this process connects to Temporal with; undefined: plain TCP. */
  temporalTls: TemporalTls | undefined;
  uiUrl: string | undefined;
  namespace: string;
  temporalCli: string | undefined;
  temporalServerBin: string | undefined;
  /** The SQLite file, or the PostgreSQL URL, of the evidence store. */
  store: string;
  allowedRoots: string[];
  bundleRoots: string[];
  /** Per-team intake folders: <inbox>/<team>/. */
  inbox: string;
  replyBudgetBytes: number;
  /** A launch or analysis reply's size unless it asks for detail "complete": the tools/call result on the wire. */
  firstReplyBytes: number;
  /** The toolsets a connection lists unless its URL or token chooses. */
  toolsets: Toolset[];
  maxRequestBytes: number;
  maxUploadBytes: number;
  /** How deeply a JSON value from outside (a request body, a bundle) may nest arrays and objects. */
  maxJsonDepth: number;
  retentionDays: number;
  rateLimitPerMinute: number;
  http: { maxSessions: number; maxSessionsPerPrincipal: number; bodyTimeoutMs: number };
  /** Rows one collection of one result keeps; the rest is counted and named in its limitations. */
  maxCollectionRows: number;
  /** How long a stopping worker lets running launches finish before they are recorded interrupted. */
  shutdownGraceMs: number;
  /** Bytes a launch's workspace may hold (each file is capped at this size). */
  workspaceBytes: number;
  /** How long a finished launch's workspace is kept before it is removed (0: at once). */
  workspaceRetentionMs: number;
  /** Bytes one team's finished launches may keep on one worker's disk; past it the oldest are reclaimed. */
  teamWorkspaceBytes: number;
  /** Bytes one team may publish to a shared store. */
  sharedBytesPerTeam: number;
  capabilities: Capability[];
  workerConcurrency: number;
  team: string;
  principal: string;
  sandbox: SandboxPolicy;
  /** Configured payload keys; empty means the embedded stack's own key file under DOSSIER_HOME. */
  payloadKeys: PayloadKey[];
  temporalUiServer: string | undefined;
  analysis: { python: string; timeBudgetS: number; memoryMb: number };
  deviceTurnMs: number;
  metrics: { token: string | undefined; workerPort: number | undefined; sdkAddress: string | undefined };
  /** Where OpenTelemetry traces go (OTLP/HTTP); undefined: nowhere, and no spans are made. */
  tracesEndpoint: string | undefined;
  /**
   * Process launches (captures) ask a human first: through the client's form
   * elicitation when it has one; when it has none, `withoutElicitation` decides.
   */
  approval: { mode: 'elicit' | 'off'; withoutElicitation: 'operators' | 'require' };
  /** How launches this gateway starts dispatch their effect (the request carries it to the workflow). */
  launchDispatch: 'activity' | 'local' | 'standalone';
}

export class ConfigError extends Error {
  constructor(
    readonly problems: string[],
    heading = 'Invalid configuration',
  ) {
    super(`${heading}:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

const list = (v: string) =>
  v
    .split(',')
    .map((s) => s.trim().toLowerCase())
    .filter(Boolean);

/** The folders and sizes the checks across variables and the Config both need. */
interface Placement {
  home: string;
  allowedRoots: string[];
  readOnlyPaths: string[];
  inbox: string;
  teamWorkspaceBytes: number;
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const c = parseEnv(env);
  const home = path.resolve(c.DOSSIER_HOME);
  const placement: Placement = {
    home,
    allowedRoots: c.DOSSIER_ALLOWED_ROOTS.split(':').filter(Boolean),
    readOnlyPaths: c.DOSSIER_SANDBOX_READ_ONLY_PATHS.split(':')
      .filter(Boolean)
      .map((r) => path.resolve(r)),
    // register_artifact reads <inbox>/<team>/.
    inbox: path.resolve(c.DOSSIER_INBOX ?? path.join(home, 'inbox')),
    teamWorkspaceBytes:
      c.DOSSIER_TEAM_WORKSPACE_BYTES ?? Math.max(DEFAULT_TEAM_WORKSPACE_BYTES, c.DOSSIER_WORKSPACE_BYTES),
  };
  const problems = crossProblems(c, placement);
  if (problems.length) throw new ConfigError([...new Set(problems)]);
  return toConfig(c, placement);
}

/** Each variable on its own: the set ones (an empty value is unset) against the schema. */
function parseEnv(env: NodeJS.ProcessEnv): Env {
  const raw: Record<string, string> = {};
  for (const key of Object.keys(schema.shape)) {
    const value = env[key];
    if (value !== undefined && value !== '') raw[key] = value;
  }
  const parsed = schema.safeParse(raw);
  if (parsed.success) return parsed.data;
  throw new ConfigError(
    parsed.error.issues.map((issue) => {
      const key = String(issue.path[0]);
      return `${key}=${JSON.stringify(raw[key] ?? '')}: ${issue.message}`;
    }),
  );
}

/** What no single variable shows: state that sandboxed programs could read, sizes that do not fit, TLS half set. */
function crossProblems(c: Env, { home, allowedRoots, readOnlyPaths, inbox, teamWorkspaceBytes }: Placement) {
  const problems: string[] = [];
  // Programs see /usr, /etc files, the allowed roots and the read-only paths: none may hold dossier's state.
  const shown: [string, string][] = [
    ['DOSSIER_HOME', '/usr'],
    ['DOSSIER_HOME', '/etc'],
    ...allowedRoots.map((r): [string, string] => ['DOSSIER_ALLOWED_ROOTS', path.resolve(r)]),
    ...readOnlyPaths.map((r): [string, string] => ['DOSSIER_SANDBOX_READ_ONLY_PATHS', r]),
  ];
  for (const [variable, root] of shown) {
    if (home === root || home.startsWith(`${root}/`) || root.startsWith(`${home}/`)) {
      problems.push(
        `${variable}: ${root} and DOSSIER_HOME (${home}) overlap; sandboxed programs may read ${root}, so dossier's state must live outside it`,
      );
    }
  }
  // register_artifact reads <inbox>/<team>/: the inbox must not reach the store, artifacts or extractions.
  const ownInbox = path.join(home, 'inbox');
  if (
    inbox === home ||
    home.startsWith(`${inbox}/`) ||
    (inbox.startsWith(`${home}/`) && inbox !== ownInbox && !inbox.startsWith(`${ownInbox}/`))
  ) {
    problems.push(
      `DOSSIER_INBOX: ${inbox} overlaps dossier's state in DOSSIER_HOME (${home}); use a folder of its own (the default is ${ownInbox})`,
    );
  }
  // One launch's workspace must fit what its whole team may keep.
  if (teamWorkspaceBytes < c.DOSSIER_WORKSPACE_BYTES) {
    problems.push(
      `DOSSIER_TEAM_WORKSPACE_BYTES=${teamWorkspaceBytes}: expected at least DOSSIER_WORKSPACE_BYTES (${c.DOSSIER_WORKSPACE_BYTES}), so that one launch's workspace fits what its team may keep`,
    );
  }
  const tls = [c.DOSSIER_TEMPORAL_TLS_CERT, c.DOSSIER_TEMPORAL_TLS_KEY, c.DOSSIER_TEMPORAL_TLS_CA];
  if ((tls.some(Boolean) || c.DOSSIER_TEMPORAL_TLS_SERVER_NAME) && !tls.every(Boolean))
    problems.push(
      'DOSSIER_TEMPORAL_TLS_CERT, DOSSIER_TEMPORAL_TLS_KEY and DOSSIER_TEMPORAL_TLS_CA: set all three (the client certificate, its key and the CA of the server) or none',
    );
  return problems;
}

function toConfig(c: Env, { home, allowedRoots, inbox, teamWorkspaceBytes, ...p }: Placement): Config {
  return {
    home,
    host: c.DOSSIER_HOST,
    port: c.DOSSIER_PORT,
    allowedHosts: list(c.DOSSIER_ALLOWED_HOSTS),
    allowedOrigins: list(c.DOSSIER_ALLOWED_ORIGINS),
    temporalPort: c.DOSSIER_TEMPORAL_PORT,
    uiPort: c.DOSSIER_UI_PORT,
    temporalAddress: c.DOSSIER_TEMPORAL_ADDRESS,
    temporalTls:
      c.DOSSIER_TEMPORAL_TLS_CERT && c.DOSSIER_TEMPORAL_TLS_KEY && c.DOSSIER_TEMPORAL_TLS_CA
        ? {
            cert: c.DOSSIER_TEMPORAL_TLS_CERT,
            key: c.DOSSIER_TEMPORAL_TLS_KEY,
            ca: c.DOSSIER_TEMPORAL_TLS_CA,
            serverName: c.DOSSIER_TEMPORAL_TLS_SERVER_NAME,
          }
        : undefined,
    uiUrl: c.DOSSIER_UI_URL,
    namespace: c.DOSSIER_NAMESPACE,
    temporalCli: c.DOSSIER_TEMPORAL_CLI,
    temporalServerBin: c.DOSSIER_TEMPORAL_SERVER_BIN,
    store: /^postgres(ql)?:\/\//.test(c.DOSSIER_STORE)
      ? c.DOSSIER_STORE
      : path.resolve(home, c.DOSSIER_STORE),
    allowedRoots: allowedRoots.map((r) => path.resolve(r)),
    inbox,
    bundleRoots: (c.DOSSIER_BUNDLE_ROOTS ?? path.join(home, 'exports')).split(':').filter(Boolean),
    replyBudgetBytes: c.DOSSIER_REPLY_BUDGET_BYTES,
    firstReplyBytes: c.DOSSIER_FIRST_REPLY_BYTES,
    toolsets: parseToolsets(c.DOSSIER_TOOLSETS),
    maxRequestBytes: c.DOSSIER_MAX_REQUEST_BYTES,
    maxUploadBytes: c.DOSSIER_MAX_UPLOAD_BYTES,
    maxJsonDepth: c.DOSSIER_MAX_JSON_DEPTH,
    retentionDays: c.DOSSIER_RETENTION_DAYS,
    rateLimitPerMinute: c.DOSSIER_RATE_LIMIT_PER_MINUTE,
    http: {
      maxSessions: c.DOSSIER_MAX_SESSIONS,
      maxSessionsPerPrincipal: c.DOSSIER_MAX_SESSIONS_PER_PRINCIPAL,
      bodyTimeoutMs: c.DOSSIER_REQUEST_BODY_TIMEOUT_MS,
    },
    maxCollectionRows: c.DOSSIER_MAX_COLLECTION_ROWS,
    shutdownGraceMs: c.DOSSIER_SHUTDOWN_GRACE_MS,
    workspaceBytes: c.DOSSIER_WORKSPACE_BYTES,
    workspaceRetentionMs: c.DOSSIER_WORKSPACE_RETENTION_HOURS * 3_600_000,
    teamWorkspaceBytes,
    sharedBytesPerTeam: c.DOSSIER_SHARED_BYTES_PER_TEAM,
    capabilities: [...new Set(c.DOSSIER_WORKER_CAPABILITIES.split(',').map((s) => s.trim()))] as Capability[],
    workerConcurrency: c.DOSSIER_WORKER_CONCURRENCY,
    team: c.DOSSIER_TEAM,
    principal: c.DOSSIER_PRINCIPAL,
    payloadKeys: c.DOSSIER_PAYLOAD_KEYS ? parsePayloadKeys(c.DOSSIER_PAYLOAD_KEYS) : [],
    temporalUiServer: c.DOSSIER_TEMPORAL_UI_SERVER,
    deviceTurnMs: c.DOSSIER_DEVICE_TURN_MS,
    metrics: {
      token: c.DOSSIER_METRICS_TOKEN,
      workerPort: c.DOSSIER_WORKER_METRICS_PORT,
      sdkAddress: c.DOSSIER_SDK_METRICS_ADDRESS,
    },
    tracesEndpoint: c.DOSSIER_OTLP_TRACES_ENDPOINT,
    launchDispatch: c.DOSSIER_LAUNCH_DISPATCH,
    approval: {
      mode: c.DOSSIER_CAPTURE_APPROVAL,
      withoutElicitation: c.DOSSIER_APPROVAL_WITHOUT_ELICITATION,
    },
    analysis: {
      python: c.DOSSIER_ANALYSIS_PYTHON,
      timeBudgetS: c.DOSSIER_ANALYSIS_TIME_BUDGET_S,
      memoryMb: c.DOSSIER_ANALYSIS_MEMORY_MB,
    },
    sandbox: sandboxPolicy(c, allowedRoots, p.readOnlyPaths),
  };
}

function sandboxPolicy(c: Env, allowedRoots: string[], readOnlyPaths: string[]): SandboxPolicy {
  const [firstUid, lastUid] = c.DOSSIER_SANDBOX_UIDS.split('-').map(Number) as [number, number];
  return {
    readOnlyPaths: [
      ...new Set([...allowedRoots.map((r) => path.resolve(r)), ...readOnlyPaths].filter(outsideUsr)),
    ],
    uids: { first: firstUid, last: lastUid },
    leaseDir: c.DOSSIER_SANDBOX_LEASE_DIR ?? defaultLeaseDir(),
    allowNetwork: c.DOSSIER_SANDBOX_NETWORK === 'allow',
    allowUnsandboxed: c.DOSSIER_ALLOW_UNSANDBOXED === 'true',
    tmpBytes: c.DOSSIER_SANDBOX_TMP_BYTES,
  };
}

/** /usr is always shown; the root-level links into it (/bin, /sbin) need no mount of their own. */
function outsideUsr(dir: string): boolean {
  return !(dir === '/usr' || dir.startsWith('/usr/') || ['/bin', '/sbin', '/lib', '/lib64'].includes(dir));
}

function defaultLeaseDir(): string {
  return process.getuid?.() === 0
    ? '/run/dossier/sandbox-uids'
    : path.join(os.tmpdir(), 'dossier-sandbox-uids');
}
