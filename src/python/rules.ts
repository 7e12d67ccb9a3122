// The rule engine of scan_with_rules: YARA-X (the Rust rewrite of YARA,
// chosen for its memory safety on hostile input; as fast as libyara's yara
// command here: docs/benchmarks.md) and dossier's script that compiles bundles and scans
// with them, in a hash-locked venv of wheels only, made once per host.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { cachedEnv, envKey, provisionEnv, type PythonEnv, type PythonEnvSpec } from './venv.ts';

export const RULES: PythonEnvSpec = {
  name: 'rules-yara-x',
  cacheFolder: 'python',
  dir: path.join(path.dirname(fileURLToPath(import.meta.url)), 'rules'),
  installs: [{ lock: 'requirements.lock', flags: ['--only-binary', ':all:'] }],
  scripts: ['scan_rules.py'],
  versionProbe: 'from importlib.metadata import version; print(f"yara-x {version(\'yara-x\')}")',
  cost: 'a few seconds and 30 MB',
};

export const cachedRules = (interpreter: string) => cachedEnv(RULES, interpreter);

/** The rule engine's venv, made on first use. */
export const rulesEnv = (interpreter: string, log?: (line: string) => void): Promise<PythonEnv> =>
  provisionEnv(RULES, interpreter, { log });

/** The engine's identity in scan keys: a new engine or script is a new scan. */
export const rulesEngineKey = () => `yara-x-${envKey(RULES)}`;
