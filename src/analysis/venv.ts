// The angr provider's Python environment (see src/python/venv.ts): angr and
// its dependencies, hash-locked, plus dossier's provider scripts.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { cachedEnv, envKey, provisionEnv, type PythonEnv, type PythonEnvSpec } from '../python/venv.ts';

export const PROVIDER_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'angr');

const ANGR: PythonEnvSpec = {
  name: 'angr',
  cacheFolder: 'analysis',
  dir: PROVIDER_DIR,
  installs: [
    { lock: 'requirements-build.lock', flags: [] },
    // No build isolation: the three sdist-only packages build with the hash-locked setuptools above.
    { lock: 'requirements.lock', flags: ['--no-build-isolation'] },
  ],
  scripts: ['angr_db.py', 'angr_identity.py', 'angr_decompile.py', 'boundaries.py'],
  versionProbe: 'import angr; print(angr.__version__)',
  cost: 'about a minute and 440 MB',
};

export type AnalysisProvider = PythonEnv;

/** The provisioned provider, or undefined when it is not (yet) installed. */
export const cachedProvider = (interpreter: string, env: NodeJS.ProcessEnv = process.env) =>
  cachedEnv(ANGR, interpreter, env);

/** Makes the provider's venv (about a minute and 440 MB, once), or returns the cached one. */
export const provisionProvider = (
  interpreter: string,
  opts: { env?: NodeJS.ProcessEnv; log?: (line: string) => void } = {},
) => provisionEnv(ANGR, interpreter, opts);

/** The provider's identity in analysis and database keys: its locks and scripts. */
export const providerKey = () => envKey(ANGR);
