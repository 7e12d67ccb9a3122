// The unpackers for flash file systems (jefferson for JFFS2, ubi_reader for
// UBI and UBIFS) and dossier's wrapper that runs them: a hash-locked venv of
// wheels only, made once per worker host on first use (seconds).
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { cachedEnv, provisionEnv, type PythonEnv, type PythonEnvSpec } from './venv.ts';

export const FLASH: PythonEnvSpec = {
  name: 'flash-unpackers',
  cacheFolder: 'python',
  dir: path.join(path.dirname(fileURLToPath(import.meta.url)), 'flash'),
  installs: [{ lock: 'requirements.lock', flags: ['--only-binary', ':all:'] }],
  scripts: ['unpack_flash.py'],
  versionProbe:
    "from importlib.metadata import version; print(f\"jefferson {version('jefferson')}, ubi_reader {version('ubi_reader')}\")",
  cost: 'a few seconds and 70 MB',
};

export const cachedFlash = (interpreter: string) => cachedEnv(FLASH, interpreter);

/** The unpackers' venv, made on first use. */
export const flashUnpackers = (interpreter: string, log?: (line: string) => void): Promise<PythonEnv> =>
  provisionEnv(FLASH, interpreter, { log });
