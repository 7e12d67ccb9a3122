// The DOSSIER_* variables, one line each: its default, its bounds and what a
// bad value is told (src/config.ts reads them into a Config). Every error
// names what is accepted; a variable not listed here is never read.
import { accessSync, constants, statSync } from 'node:fs';
import { isIP } from 'node:net';
import { z } from 'zod';
import { CAPABILITIES } from './domain/types.ts';
import { JSON_DEPTH } from './domain/json.ts';
import { parsePayloadKeys } from './temporal/keys.ts';
import { DEFAULT_TOOLSETS, toolsetsProblem } from './tools/toolsets.ts';

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
export const DEFAULT_TEAM_WORKSPACE_BYTES = 10 * 1024 ** 3;

export const schema = z.object({
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
  /**
   * How a launch's effect is dispatched: `activity`, an activity on its capability's queue; `local`,
   * first as a local activity of the workflow task (one round trip fewer; see docs/operations.md).
   */
  DOSSIER_LAUNCH_DISPATCH: z
    .enum(['activity', 'local', 'standalone'], { error: 'expected activity, local or standalone' })
    .default('activity'),
  DOSSIER_CAPTURE_APPROVAL: z.enum(['elicit', 'off']).default('elicit'),
  DOSSIER_APPROVAL_WITHOUT_ELICITATION: z.enum(['operators', 'require']).default('operators'),
  DOSSIER_TEAM: name('local'),
  DOSSIER_PRINCIPAL: name('local'),
});

/** The variables as validated, defaults filled in. */
export type Env = z.infer<typeof schema>;
