// Finds or provisions the Temporal CLI (which bundles the dev server, SQLite and
// the Web UI). One module serves `npm start`, the tests and CI, in this order:
//   1. DOSSIER_TEMPORAL_CLI            an explicit path, used as given
//   2. `temporal` on PATH
//   3. a cached build under the per-user cache folder
//   4. a fresh build with the local Go toolchain into that cache (minutes, once)
//   5. the Temporal SDK's own download, where the internet is reachable
import { buildWithGo, cachedTool, isExecutable, onPath, userCacheDir, type GoTool } from './goTools.ts';

export { userCacheDir };

const CLI: GoTool = {
  name: 'temporal-cli',
  module: 'github.com/temporalio/cli/cmd/temporal',
  binary: 'temporal',
};

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

export function cachedCli(env: NodeJS.ProcessEnv = process.env): string | undefined {
  return cachedTool(CLI, CLI_VERSIONS, env);
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

  const tried = ['DOSSIER_TEMPORAL_CLI (unset)', '`temporal` on PATH (absent)', 'the dossier cache (empty)'];
  const go = onPath('go', env);
  if (go && opts.build !== false) {
    const errors: string[] = [];
    for (const version of CLI_VERSIONS) {
      try {
        const built = await buildWithGo(CLI, version, { env, log });
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
