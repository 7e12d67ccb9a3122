// Go programs dossier runs but does not ship (the Temporal CLI, the Temporal
// UI server): found in the per-user cache, or built there once with the local
// Go toolchain, showing that the build is alive every 15 s.
import { spawn } from 'node:child_process';
import { accessSync, constants, existsSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export interface GoTool {
  /** Folder name under the cache, and the name in messages. */
  name: string;
  /** The `go install` package path. */
  module: string;
  /** The binary `go install` writes. */
  binary: string;
}

/** dossier's per-user cache folder: built tools and bundles that any DOSSIER_HOME may reuse. */
export function userCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  return path.join(env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'dossier');
}

export function isExecutable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

export function onPath(command: string, env: NodeJS.ProcessEnv): string | undefined {
  for (const dir of (env.PATH ?? '').split(path.delimiter)) {
    if (!dir) continue;
    const candidate = path.join(dir, command);
    if (isExecutable(candidate)) return candidate;
  }
  return undefined;
}

/** Where a version of a tool lives once built. */
export function cachedToolPath(tool: GoTool, version: string, env: NodeJS.ProcessEnv = process.env): string {
  return path.join(userCacheDir(env), tool.name, version, tool.binary);
}

/** The first cached build among `versions`, if any. */
export function cachedTool(tool: GoTool, versions: readonly string[], env: NodeJS.ProcessEnv = process.env) {
  return versions.map((v) => cachedToolPath(tool, v, env)).find(isExecutable);
}

/** Builds a tool with `go install` into the cache (several minutes, once) and returns its path. */
export async function buildWithGo(
  tool: GoTool,
  version: string,
  opts: { env?: NodeJS.ProcessEnv; log?: (line: string) => void } = {},
): Promise<string> {
  const env = opts.env ?? process.env;
  const log = opts.log ?? ((line: string) => console.error(line));
  const go = onPath('go', env);
  if (!go) throw new Error('there is no `go` on PATH to build it with');
  const finalDir = path.dirname(cachedToolPath(tool, version, env));
  const stagingDir = `${finalDir}.partial-${process.pid}`;
  mkdirSync(stagingDir, { recursive: true });
  log(
    `dossier: building ${tool.name} ${version} with Go into ${finalDir}; this takes several minutes, once.`,
  );
  const started = Date.now();
  let lastLine = '';
  const child = spawn(go, ['install', `${tool.module}@${version}`], {
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
    log(`dossier: still building ${tool.name} (${secs}s)${lastLine ? `: ${lastLine}` : ''}`);
  }, 15_000);
  try {
    const code = await new Promise<number | null>((resolve, reject) => {
      child.once('error', reject);
      child.once('close', resolve);
    });
    const binary = path.join(stagingDir, tool.binary);
    if (code !== 0 || !existsSync(binary)) throw new Error(`go install exited ${code}: ${lastLine}`);
    rmSync(finalDir, { recursive: true, force: true });
    renameSync(stagingDir, finalDir);
    log(`dossier: ${tool.name} ${version} built in ${Math.round((Date.now() - started) / 1000)}s.`);
    return path.join(finalDir, tool.binary);
  } finally {
    clearInterval(ticker);
    rmSync(stagingDir, { recursive: true, force: true });
  }
}
