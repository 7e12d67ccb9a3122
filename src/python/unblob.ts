// unblob, the breadth reader (about 80 formats: compression streams, file
// systems such as erofs, FAT, NTFS, yaffs, vendor firmware headers), and
// dossier's wrapper that runs it: a hash-locked venv of wheels only, made once
// per worker host on first use. Its external tools come from Debian.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { cachedEnv, provisionEnv, type PythonEnv, type PythonEnvSpec } from './venv.ts';

export const UNBLOB: PythonEnvSpec = {
  name: 'unblob',
  cacheFolder: 'python',
  dir: path.join(path.dirname(fileURLToPath(import.meta.url)), 'unblob'),
  installs: [{ lock: 'requirements.lock', flags: ['--only-binary', ':all:'] }],
  scripts: ['unpack_unblob.py'],
  versionProbe: 'from importlib.metadata import version; print(f"unblob {version(\'unblob\')}")',
  cost: 'about twenty seconds and 200 MB',
};

export const cachedUnblob = (interpreter: string) => cachedEnv(UNBLOB, interpreter);

/** unblob's venv, made on first use. */
export const unblobEnv = (interpreter: string, log?: (line: string) => void): Promise<PythonEnv> =>
  provisionEnv(UNBLOB, interpreter, { log });
