// Finds or provisions the Temporal CLI (which bundles the dev server, SQLite and
// the Web UI). One module serves `npm start`, the tests and CI, in this order:
//   1. DOSSIER_TEMPORAL_CLI            an explicit path, used as given
//   2. `temporal` on PATH
//   3. a cached build under the per-user cache folder
//   4. a fresh build with the local Go toolchain into that cache (minutes, once)
//   5. the Temporal SDK's own download, where the internet is reachable
import { spawn } from 'node:child_process';
import { accessSync, constants, existsSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** Newest tags that `go install` accepts, newest first (later tags carry a `replace` directive). */
export const CLI_VERSIONS = ['v1.5.1', 'v1.5.0', 'v1.4.1'] as const;

export type TemporalCli =
  { kind: 'path'; path: string; source: 'env' | 'PATH' | 'cache' | 'built' } | { kind: 'sdk-download' };

export interface ResolveOptions {
  configured?: string | undefined;
  /** Build with Go when nothing is found (default true). */
  build?: boolean;
  log?: (line: string) => void;
  env?: NodeJS.ProcessEnv;
}

/** dossier's per-user cache folder: built tools and bundles that any DOSSIER_HOME may reuse. */
export function userCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  return path.join(env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'dossier');
}

export function cacheDir(env: NodeJS.ProcessEnv = process.env): string {
  return path.join(userCacheDir(env), 'temporal-cli');
}

function isExecutable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function onPath(command: string, env: NodeJS.ProcessEnv): string | undefined {
  for (const dir of (env.PATH ?? '').split(path.delimiter)) {
    if (!dir) continue;
    const candidate = path.join(dir, command);
    if (isExecutable(candidate)) return candidate;
  }
  return undefined;
}

export function cachedCli(env: NodeJS.ProcessEnv = process.env): string | undefined {
  for (const version of CLI_VERSIONS) {
    const candidate = path.join(cacheDir(env), version, 'temporal');
    if (isExecutable(candidate)) return candidate;
  }
  return undefined;
}

export async function resolveTemporalCli(opts: ResolveOptions = {}): Promise<TemporalCli> {
  const env = opts.env ?? process.env;
  const log = opts.log ?? ((line: string) => console.error(line));
  if (opts.configured) {
    if (!isExecutable(opts.configured)) {
      throw new Error(
        `DOSSIER_TEMPORAL_CLI=${opts.configured} is not an executable file. Point it at a Temporal CLI binary, or unset it to let dossier find or build one.`,
      );
    }
    return { kind: 'path', path: opts.configured, source: 'env' };
  }
  const fromPath = onPath('temporal', env);
  if (fromPath) return { kind: 'path', path: fromPath, source: 'PATH' };
  const cached = cachedCli(env);
  if (cached) return { kind: 'path', path: cached, source: 'cache' };

  const tried = ['DOSSIER_TEMPORAL_CLI (unset)', '`temporal` on PATH (absent)', `${cacheDir(env)} (empty)`];
  const go = onPath('go', env);
  if (go && opts.build !== false) {
    const errors: string[] = [];
    for (const version of CLI_VERSIONS) {
      try {
        const built = await buildWithGo(go, version, env, log);
        return { kind: 'path', path: built, source: 'built' };
      } catch (err) {
        errors.push(`${version}: ${(err as Error).message}`);
        log(`dossier: building Temporal CLI ${version} failed; trying the next version`);
      }
    }
    tried.push(`go install of ${CLI_VERSIONS.join(', ')} (all failed:\n    ${errors.join('\n    ')})`);
  } else {
    tried.push(go ? 'go install (disabled)' : 'go install (no `go` on PATH)');
  }
  if (env.DOSSIER_ALLOW_SDK_DOWNLOAD !== '0') {
    log(`dossier: no Temporal CLI found (${tried.join('; ')}); falling back to the Temporal SDK's download.`);
    return { kind: 'sdk-download' };
  }
  throw new Error(
    `No Temporal CLI could be found or built. Tried: ${tried.join('; ')}.\n` +
      'Install Go (https://go.dev/dl) so dossier can build it, install the `temporal` CLI on PATH, ' +
      'or set DOSSIER_TEMPORAL_CLI to an existing binary.',
  );
}

/** Builds the CLI with `go install` into the cache, showing that it is alive every 15 s. */
async function buildWithGo(go: string, version: string, env: NodeJS.ProcessEnv, log: (l: string) => void) {
  const finalDir = path.join(cacheDir(env), version);
  const stagingDir = `${finalDir}.partial-${process.pid}`;
  mkdirSync(stagingDir, { recursive: true });
  log(
    `dossier: building the Temporal CLI ${version} with Go into ${finalDir}; this takes several minutes, once.`,
  );
  const started = Date.now();
  let lastLine = '';
  const child = spawn(go, ['install', `github.com/temporalio/cli/cmd/temporal@${version}`], {
    env: { ...env, GOTOOLCHAIN: 'local', GOBIN: stagingDir },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const collect = (chunk: Buffer) => {
    const lines = chunk.toString().trim().split('\n');
    lastLine = lines[lines.length - 1] ?? lastLine;
  };
  child.stdout.on('data', collect);
  child.stderr.on('data', collect);
  const ticker = setInterval(() => {
    const secs = Math.round((Date.now() - started) / 1000);
    log(`dossier: still building the Temporal CLI (${secs}s)${lastLine ? `: ${lastLine}` : ''}`);
  }, 15_000);
  try {
    const code = await new Promise<number | null>((resolve, reject) => {
      child.once('error', reject);
      child.once('close', resolve);
    });
    const binary = path.join(stagingDir, 'temporal');
    if (code !== 0 || !existsSync(binary)) throw new Error(`go install exited ${code}: ${lastLine}`);
    rmSync(finalDir, { recursive: true, force: true });
    renameSync(stagingDir, finalDir);
    log(`dossier: Temporal CLI ${version} built in ${Math.round((Date.now() - started) / 1000)}s.`);
    return path.join(finalDir, 'temporal');
  } finally {
    clearInterval(ticker);
    rmSync(stagingDir, { recursive: true, force: true });
  }
}
