// Configuration comes from DOSSIER_* environment variables only, validated once
// at start-up. A bad value stops the process with one line per problem that
// names the variable, what was given and what is accepted.
import path from 'node:path';
import { z } from 'zod';

export const CAPABILITIES = ['capture', 'extract', 'device', 'analysis'] as const;
export type Capability = (typeof CAPABILITIES)[number];

const NAME = /^[a-z0-9][a-z0-9._-]{0,62}$/;

function intIn(min: number, max: number, fallback: number) {
  const error = `expected a whole number from ${min} to ${max}`;
  return z.coerce.number({ error }).int({ error }).min(min, { error }).max(max, { error }).default(fallback);
}

const port = (fallback: number) => intIn(0, 65535, fallback);
const name = (fallback: string) =>
  z
    .string()
    .regex(NAME, { error: 'expected 1-63 of a-z 0-9 . _ - starting with a letter or digit' })
    .default(fallback);

const schema = z.object({
  DOSSIER_HOME: z.string().min(1).default('.dossier'),
  DOSSIER_HOST: z.string().min(1).default('127.0.0.1'),
  DOSSIER_PORT: port(7400),
  /** Extra Host header values (host:port) the gateway accepts, comma-separated, e.g. a load balancer's name. */
  DOSSIER_ALLOWED_HOSTS: z.string().default(''),
  /** Browser Origins the gateway accepts, comma-separated; requests without Origin are not browsers. */
  DOSSIER_ALLOWED_ORIGINS: z.string().default(''),
  DOSSIER_TEMPORAL_PORT: port(7233),
  DOSSIER_UI_PORT: port(8233),
  /** host:port of an existing Temporal frontend; unset means the embedded dev server. */
  DOSSIER_TEMPORAL_ADDRESS: z
    .string()
    .regex(/^[^\s:]+:\d+$/, { error: 'expected host:port' })
    .optional(),
  DOSSIER_UI_URL: z.url({ error: 'expected an http(s) URL' }).optional(),
  DOSSIER_NAMESPACE: name('dossier'),
  DOSSIER_TEMPORAL_CLI: z.string().min(1).optional(),
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
  DOSSIER_REPLY_BUDGET_BYTES: intIn(4_096, 1_000_000, 40_000),
  DOSSIER_MAX_REQUEST_BYTES: intIn(1_024, 16 * 1024 * 1024, 1024 * 1024),
  DOSSIER_MAX_UPLOAD_BYTES: intIn(1_024, 4 * 1024 * 1024 * 1024, 256 * 1024 * 1024),
  DOSSIER_RETENTION_DAYS: intIn(1, 3650, 7),
  DOSSIER_RATE_LIMIT_PER_MINUTE: intIn(1, 1_000_000, 6_000),
  DOSSIER_WORKER_CAPABILITIES: z
    .string()
    .refine((v) => v.split(',').every((c) => (CAPABILITIES as readonly string[]).includes(c.trim())), {
      error: 'expected a comma-separated list of capture, extract, device, analysis',
    })
    .default('capture,extract,device,analysis'),
  DOSSIER_WORKER_CONCURRENCY: intIn(1, 1000, 16),
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
  uiUrl: string | undefined;
  namespace: string;
  temporalCli: string | undefined;
  /** The SQLite file, or the PostgreSQL URL, of the evidence store. */
  store: string;
  allowedRoots: string[];
  bundleRoots: string[];
  replyBudgetBytes: number;
  maxRequestBytes: number;
  maxUploadBytes: number;
  retentionDays: number;
  rateLimitPerMinute: number;
  capabilities: Capability[];
  workerConcurrency: number;
  team: string;
  principal: string;
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
  return {
    home,
    host: c.DOSSIER_HOST,
    port: c.DOSSIER_PORT,
    allowedHosts: list(c.DOSSIER_ALLOWED_HOSTS),
    allowedOrigins: list(c.DOSSIER_ALLOWED_ORIGINS),
    temporalPort: c.DOSSIER_TEMPORAL_PORT,
    uiPort: c.DOSSIER_UI_PORT,
    temporalAddress: c.DOSSIER_TEMPORAL_ADDRESS,
    uiUrl: c.DOSSIER_UI_URL,
    namespace: c.DOSSIER_NAMESPACE,
    temporalCli: c.DOSSIER_TEMPORAL_CLI,
    store: /^postgres(ql)?:\/\//.test(c.DOSSIER_STORE)
      ? c.DOSSIER_STORE
      : path.resolve(home, c.DOSSIER_STORE),
    allowedRoots: allowedRoots.map((r) => path.resolve(r)),
    bundleRoots: (c.DOSSIER_BUNDLE_ROOTS ?? path.join(home, 'exports')).split(':').filter(Boolean),
    replyBudgetBytes: c.DOSSIER_REPLY_BUDGET_BYTES,
    maxRequestBytes: c.DOSSIER_MAX_REQUEST_BYTES,
    maxUploadBytes: c.DOSSIER_MAX_UPLOAD_BYTES,
    retentionDays: c.DOSSIER_RETENTION_DAYS,
    rateLimitPerMinute: c.DOSSIER_RATE_LIMIT_PER_MINUTE,
    capabilities: capabilities as Capability[],
    workerConcurrency: c.DOSSIER_WORKER_CONCURRENCY,
    team: c.DOSSIER_TEAM,
    principal: c.DOSSIER_PRINCIPAL,
  };
}
