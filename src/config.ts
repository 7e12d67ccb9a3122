// Configuration comes from DOSSIER_* environment variables only, validated once
// at start-up. A bad value stops the process with one line per problem that
// names the variable, what was given and what is accepted.
import { accessSync, constants, statSync } from 'node:fs';
import os from 'node:os';
import { isIP } from 'node:net';
import path from 'node:path';
import { z } from 'zod';
import { CAPABILITIES, type Capability } from './domain/types.ts';
import { JSON_DEPTH } from './domain/json.ts';
import type { SandboxPolicy } from './sandbox/sandbox.ts';
import { parsePayloadKeys, type PayloadKey } from './temporal/keys.ts';
import type { TemporalTls } from './temporal/tls.ts';
import { DEFAULT_TOOLSETS, parseToolsets, toolsetsProblem, type Toolset } from './tools/toolsets.ts';

const NAME = /^[a-z0-9][a-z0-9._-]{0,62}$/;

function wholeIn(min: number, max: number) {
  const error = `expected a whole number from ${min} to ${max}`;
  return z.coerce.number({ error }).int({ error }).min(min, { error }).max(max, { error });
}

const intIn = (min: number, max: number, fallback: number) => wholeIn(min, max).default(fallback);

const port = (fallback: number) => intIn(0, 65535, fallback);

function readableFile(file: string): boolean {
  try {
    accessSync(file, constants.R_OK);
    return statSync(file).isFile();
  } catch {
    return false;
  }
}
const pemFile = z
  .string()
  .refine((v) => v.startsWith('/') && readableFile(v), {
    error: 'expected the absolute path of a readable file',
  })
  .optional();

/**
 * The Fetch standard's "bad ports": browsers and Node's fetch() (so every MCP SDK client) refuse
 * to connect to them, whatever listens there.
 */
export const FETCH_BLOCKED_PORTS: ReadonlySet<number> = new Set([
  1, 7, 9, 11, 13, 15, 17, 19, 20, 21, 22, 23, 25, 37, 42, 43, 53, 69, 77, 79, 87, 95, 101, 102, 103, 104,
  109, 110, 111, 113, 115, 117, 119, 123, 135, 137, 139, 143, 161, 179, 389, 427, 465, 512, 513, 514, 515,
  526, 530, 531, 532, 540, 548, 554, 556, 563, 587, 601, 636, 989, 990, 993, 995, 1719, 1720, 1723, 2049,
  3659, 4045, 4190, 5060, 5061, 6000, 6566, 6665, 6666, 6667, 6668, 6669, 6679, 6697, 10080,
]);

/** A port browsers and HTTP clients reach: not one the Fetch standard blocks. */
const webPort = (fallback: number) =>
  port(fallback).refine((p) => !FETCH_BLOCKED_PORTS.has(p), {
    error:
      "browsers and fetch() (so MCP clients) refuse to connect to this port (the Fetch standard's bad ports); choose another",
  });
const name = (fallback: string) =>
  z
    .string()
    .regex(NAME, { error: 'expected 1-63 of a-z 0-9 . _ - starting with a letter or digit' })
    .default(fallback);

/** What a team's finished launches may keep on one worker by default (or DOSSIER_WORKSPACE_BYTES, if larger). */
const DEFAULT_TEAM_WORKSPACE_BYTES = 10 * 1024 ** 3;

const schema = z.object({
  DOSSIER_HOME: z.string().min(1).default('.dossier'),
  DOSSIER_HOST: z.string().min(1).default('127.0.0.1'),
  DOSSIER_PORT: webPort(7400),
  /** Extra Host header values (host:port) the gateway accepts, comma-separated, e.g. a load balancer's name. */
  DOSSIER_ALLOWED_HOSTS: z.string().default(''),
  /** Browser Origins the gateway accepts, comma-separated; requests without Origin are not browsers. */
  DOSSIER_ALLOWED_ORIGINS: z.string().default(''),
  DOSSIER_TEMPORAL_PORT: port(7233),
  DOSSIER_UI_PORT: webPort(8233),
  /** host:port of an existing Temporal frontend; unset means the embedded dev server. */
  DOSSIER_TEMPORAL_ADDRESS: z
    .string()
    .regex(/^[^\s:]+:\d+$/, { error: 'expected host:port' })
    .optional(),
  /** Mutual TLS to Temporal: this process's certificate, its key and the CA of the server's (PEM), all or none. */
  DOSSIER_TEMPORAL_TLS_CERT: pemFile,
  DOSSIER_TEMPORAL_TLS_KEY: pemFile,
  DOSSIER_TEMPORAL_TLS_CA: pemFile,
  /** The name the server's certificate carries, when DOSSIER_TEMPORAL_ADDRESS names the server otherwise. */
  DOSSIER_TEMPORAL_TLS_SERVER_NAME: z
    .string()
    .regex(/^[A-Za-z0-9][A-Za-z0-9.-]{0,252}$/, { error: 'expected a DNS name' })
    .optional(),
  DOSSIER_UI_URL: z.url({ error: 'expected an http(s) URL' }).optional(),
  DOSSIER_NAMESPACE: name('dossier'),
  DOSSIER_TEMPORAL_CLI: z.string().min(1).optional(),
  /** A folder holding a Temporal server build (`server`) and temporal-sql-tool (`sql`) for `dossier cluster up`. */
  DOSSIER_TEMPORAL_SERVER_BIN: z.string().min(1).optional(),
  /** A SQLite file path (relative paths resolve under DOSSIER_HOME) or a postgres:// URL. */
  DOSSIER_STORE: z.string().min(1).default('dossier.db'),
  DOSSIER_ALLOWED_ROOTS: z
    .string()
    .refine(
      (v) => v.split(':').filter(Boolean).length > 0 && v.split(':').every((r) => !r || r.startsWith('/')),
      {
        error: 'expected absolute paths separated by ":"',
      },
    )
    .default('/usr/bin:/bin:/usr/local/bin:/usr/sbin:/sbin'),
  /** Folders import_evidence_bundle may read from; default DOSSIER_HOME/exports. */
  DOSSIER_BUNDLE_ROOTS: z
    .string()
    .refine((v) => v.split(':').every((r) => !r || r.startsWith('/')), {
      error: 'expected absolute paths separated by ":"',
    })
    .optional(),
  /** Per-team intake folders (<inbox>/<team>/) register_artifact reads besides the allowed roots; default DOSSIER_HOME/inbox. */
  DOSSIER_INBOX: z
    .string()
    .refine((v) => v.startsWith('/'), { error: 'expected an absolute path' })
    .optional(),
  /** The ceiling of one reply's JSON: detail "complete", pages, lists. */
  DOSSIER_REPLY_BUDGET_BYTES: intIn(4_096, 1_000_000, 40_000),
  /** A launch or analysis reply's default size: the whole tools/call result on the wire (text and structured). */
  DOSSIER_FIRST_REPLY_BYTES: intIn(2_048, 1_000_000, 8_000),
  /** What tools/list shows a connection whose URL and token choose nothing ("all", or toolsets). */
  DOSSIER_TOOLSETS: z
    .string()
    .refine((v) => !toolsetsProblem(v), { error: (issue) => toolsetsProblem(issue.input as string) })
    .default(DEFAULT_TOOLSETS),
  DOSSIER_MAX_REQUEST_BYTES: intIn(1_024, 16 * 1024 * 1024, 1024 * 1024),
  DOSSIER_MAX_UPLOAD_BYTES: intIn(1_024, 4 * 1024 * 1024 * 1024, 256 * 1024 * 1024),
  DOSSIER_MAX_JSON_DEPTH: intIn(JSON_DEPTH.min, JSON_DEPTH.max, JSON_DEPTH.default),
  DOSSIER_RETENTION_DAYS: intIn(1, 3650, 7),
  DOSSIER_RATE_LIMIT_PER_MINUTE: intIn(1, 1_000_000, 6_000),
  DOSSIER_MAX_SESSIONS: intIn(16, 100_000, 10_000),
  DOSSIER_MAX_SESSIONS_PER_PRINCIPAL: intIn(1, 10_000, 64),
  DOSSIER_REQUEST_BODY_TIMEOUT_MS: intIn(1_000, 600_000, 30_000),
  DOSSIER_MAX_COLLECTION_ROWS: intIn(1_000, 5_000_000, 250_000),
  DOSSIER_SHUTDOWN_GRACE_MS: intIn(0, 600_000, 30_000),
  DOSSIER_WORKSPACE_BYTES: intIn(1024 * 1024, 1024 * 1024 * 1024 * 1024, 1024 * 1024 * 1024),
  DOSSIER_WORKSPACE_RETENTION_HOURS: intIn(0, 8_760, 24),
  /** Bytes one team's finished launches may keep on one worker's disk (workspaces and extraction outputs). */
  DOSSIER_TEAM_WORKSPACE_BYTES: wholeIn(1024 * 1024, 1024 ** 5).optional(),
  /** Bytes one team may publish to a shared (PostgreSQL) store: artifacts, extraction outputs, bundles, databases. */
  DOSSIER_SHARED_BYTES_PER_TEAM: intIn(1024 * 1024, 1024 ** 5, 100 * 1024 ** 3),
  DOSSIER_WORKER_CAPABILITIES: z
    .string()
    .refine((v) => v.split(',').every((c) => (CAPABILITIES as readonly string[]).includes(c.trim())), {
      error: 'expected a comma-separated list of capture, extract, device, analysis',
    })
    .default('capture,extract,device,analysis'),
  DOSSIER_WORKER_CONCURRENCY: intIn(1, 1000, 16),
  /** uid range (FIRST-LAST) the sandbox leases one uid per running program from (the worker must be root). */
  DOSSIER_SANDBOX_UIDS: z
    .string()
    .regex(/^\d{1,10}-\d{1,10}$/, { error: 'expected FIRST-LAST, e.g. 1000000-1065535' })
    .refine(
      (v) => {
        const [first, last] = v.split('-').map(Number) as [number, number];
        return (
          first >= 1_000 && last >= first + 63 && last < 4_294_967_294 && (65534 < first || 65534 > last)
        );
      },
      { error: 'expected at least 64 uids from 1000 up, below 4294967294, not containing 65534' },
    )
    .default('1000000-1065535'),
  /** Host-wide folder where workers lease sandbox uids (shared by every worker on the host). */
  DOSSIER_SANDBOX_LEASE_DIR: z
    .string()
    .refine((v) => v.startsWith('/'), { error: 'expected an absolute path' })
    .optional(),
  /** Host paths every sandboxed program may read besides /usr and the system /etc files, ":"-separated. */
  DOSSIER_SANDBOX_READ_ONLY_PATHS: z
    .string()
    .refine((v) => v.split(':').every((r) => !r || r.startsWith('/')), {
      error: 'expected absolute paths separated by ":"',
    })
    .default(''),
  DOSSIER_SANDBOX_NETWORK: z.enum(['deny', 'allow'], { error: 'expected deny or allow' }).default('deny'),
  DOSSIER_SANDBOX_TMP_BYTES: intIn(1024 * 1024, 64 * 1024 * 1024 * 1024, 256 * 1024 * 1024),
  /** The admin's escape: lets a capture ask for isolation "none" (still an unprivileged uid). */
  DOSSIER_ALLOW_UNSANDBOXED: z.enum(['true', 'false'], { error: 'expected true or false' }).default('false'),
  /** Keys that seal Temporal payloads (id:base64 of 32 bytes, comma-separated; the first seals). */
  DOSSIER_PAYLOAD_KEYS: z
    .string()
    .refine(
      (v) => {
        try {
          return parsePayloadKeys(v).length > 0;
        } catch {
          return false;
        }
      },
      { error: 'expected id:base64 entries whose secret is 32 bytes, e.g. k1:<44 base64 characters>' },
    )
    .optional(),
  /** The operator's bearer token for GET /metrics (gateways) and the workers' metrics listener; unset: off. */
  DOSSIER_METRICS_TOKEN: z.string().min(16, { error: 'expected at least 16 characters' }).max(512).optional(),
  /** A `dossier worker` serves GET /metrics on this port (on DOSSIER_HOST); unset: no listener. */
  DOSSIER_WORKER_METRICS_PORT: z.coerce
    .number({ error: 'expected a port number' })
    .int()
    .min(1)
    .max(65535, { error: 'expected a port number' })
    .optional(),
  /** host:port where the Temporal SDK's own Prometheus exporter listens in worker processes; unset: off. */
  /** OTLP/HTTP traces endpoint (e.g. http://collector:4318/v1/traces); unset: no traces. */
  DOSSIER_OTLP_TRACES_ENDPOINT: z.url({ protocol: /^https?$/, error: 'expected an http(s) URL' }).optional(),
  DOSSIER_SDK_METRICS_ADDRESS: z
    .string()
    .refine(
      (v) => {
        const at = v.lastIndexOf(':');
        const port = Number(v.slice(at + 1));
        return at > 0 && isIP(v.slice(0, at).replace(/^\[|\]$/g, '')) !== 0 && port >= 1 && port <= 65535;
      },
      { error: 'expected an IP address and port, e.g. 127.0.0.1:9464 (the SDK takes no host names)' },
    )
    .optional(),
  /** The Temporal UI server binary for the embedded stack's audit UI (default: found or built with Go). */
  DOSSIER_TEMPORAL_UI_SERVER: z.string().min(1).optional(),
  /** The interpreter the angr provider's venv is made with (Debian's python3 with python3-venv). */
  DOSSIER_ANALYSIS_PYTHON: z
    .string()
    .refine((v) => v.startsWith('/'), { error: 'expected an absolute path' })
    .default('/usr/bin/python3'),
  /** Time budget of one analysis database build, in seconds. */
  DOSSIER_ANALYSIS_TIME_BUDGET_S: intIn(10, 7_200, 900),
  /** Address space of the provider while it builds, in MiB (RLIMIT_AS). */
  DOSSIER_ANALYSIS_MEMORY_MB: intIn(256, 65_536, 8_192),
  /** How long a device turn lives without renewal: a worker lost while holding a device frees it after this. */
  DOSSIER_DEVICE_TURN_MS: intIn(2_000, 600_000, 30_000),
  DOSSIER_CAPTURE_APPROVAL: z.enum(['elicit', 'off']).default('elicit'),
  DOSSIER_APPROVAL_WITHOUT_ELICITATION: z.enum(['operators', 'require']).default('operators'),
  DOSSIER_TEAM: name('local'),
  DOSSIER_PRINCIPAL: name('local'),
});

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

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const raw: Record<string, string> = {};
  for (const key of Object.keys(schema.shape)) {
    const value = env[key];
    if (value !== undefined && value !== '') raw[key] = value;
  }
  const parsed = schema.safeParse(raw);
  const problems: string[] = [];
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      const key = String(issue.path[0]);
      problems.push(`${key}=${JSON.stringify(raw[key] ?? '')}: ${issue.message}`);
    }
    throw new ConfigError(problems);
  }
  const c = parsed.data;
  const home = path.resolve(c.DOSSIER_HOME);
  const allowedRoots = c.DOSSIER_ALLOWED_ROOTS.split(':').filter(Boolean);
  const capabilities = [...new Set(c.DOSSIER_WORKER_CAPABILITIES.split(',').map((s) => s.trim()))];
  const readOnlyPaths = c.DOSSIER_SANDBOX_READ_ONLY_PATHS.split(':')
    .filter(Boolean)
    .map((r) => path.resolve(r));
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
  const inbox = path.resolve(c.DOSSIER_INBOX ?? path.join(home, 'inbox'));
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
  const teamWorkspaceBytes =
    c.DOSSIER_TEAM_WORKSPACE_BYTES ?? Math.max(DEFAULT_TEAM_WORKSPACE_BYTES, c.DOSSIER_WORKSPACE_BYTES);
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
  if (problems.length) throw new ConfigError([...new Set(problems)]);
  const [firstUid, lastUid] = c.DOSSIER_SANDBOX_UIDS.split('-').map(Number) as [number, number];
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
    capabilities: capabilities as Capability[],
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
    approval: {
      mode: c.DOSSIER_CAPTURE_APPROVAL,
      withoutElicitation: c.DOSSIER_APPROVAL_WITHOUT_ELICITATION,
    },
    analysis: {
      python: c.DOSSIER_ANALYSIS_PYTHON,
      timeBudgetS: c.DOSSIER_ANALYSIS_TIME_BUDGET_S,
      memoryMb: c.DOSSIER_ANALYSIS_MEMORY_MB,
    },
    sandbox: {
      readOnlyPaths: [
        ...new Set([...allowedRoots.map((r) => path.resolve(r)), ...readOnlyPaths].filter(outsideUsr)),
      ],
      uids: { first: firstUid, last: lastUid },
      leaseDir: c.DOSSIER_SANDBOX_LEASE_DIR ?? defaultLeaseDir(),
      allowNetwork: c.DOSSIER_SANDBOX_NETWORK === 'allow',
      allowUnsandboxed: c.DOSSIER_ALLOW_UNSANDBOXED === 'true',
      tmpBytes: c.DOSSIER_SANDBOX_TMP_BYTES,
    },
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
