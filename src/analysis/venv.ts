// The angr provider's Python environment: a virtualenv made from hash-locked
// requirements (every file's SHA-256 checked by pip), cached under the
// per-user cache folder by the digest of the locks and the interpreter, so a
// change to either makes a new one and nothing is ever half-installed in place.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const PROVIDER_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'angr');
const LOCKS = ['requirements-build.lock', 'requirements.lock'];

export interface AnalysisProvider {
  name: 'angr';
  /** angr's version, as the environment reports it. */
  version: string;
  /** The venv's interpreter and the folder it lives in (mounted read-only into the sandbox). */
  python: string;
  venv: string;
  /** The folder of dossier's provider scripts (angr_db.py, angr_decompile.py). */
  scripts: string;
}

function cacheRoot(env: NodeJS.ProcessEnv): string {
  return path.join(env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'dossier', 'analysis');
}

/** The venv folder for these locks and this interpreter. */
export function venvDir(interpreter: string, env: NodeJS.ProcessEnv = process.env): string {
  const hash = createHash('sha256').update(interpreter);
  for (const lock of LOCKS) hash.update(readFileSync(path.join(PROVIDER_DIR, lock)));
  return path.join(cacheRoot(env), `angr-${hash.digest('hex').slice(0, 16)}`);
}

/** The provisioned provider, or undefined when it is not (yet) installed. */
export function cachedProvider(interpreter: string, env: NodeJS.ProcessEnv = process.env) {
  const dir = venvDir(interpreter, env);
  const marker = path.join(dir, 'dossier-provider.json');
  if (!existsSync(marker)) return undefined;
  const { version } = JSON.parse(readFileSync(marker, 'utf8')) as { version: string };
  return {
    name: 'angr',
    version,
    python: path.join(dir, 'bin', 'python'),
    venv: dir,
    scripts: PROVIDER_DIR,
  } as const;
}

function run(command: string, args: string[], env: NodeJS.ProcessEnv, onLine: (line: string) => void) {
  return new Promise<string>((resolve, reject) => {
    const child = spawn(command, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let tail = '';
    const take = (chunk: Buffer) => {
      const text = chunk.toString();
      out += text;
      tail = (tail + text).slice(-2_000);
      for (const line of text.split('\n')) if (line.trim()) onLine(line.trim());
    };
    child.stdout.on('data', take);
    child.stderr.on('data', take);
    child.once('error', reject);
    child.once('close', (code) =>
      code === 0
        ? resolve(out)
        : reject(new Error(`${path.basename(command)} ${args[0]} exited ${code}: ${tail}`)),
    );
  });
}

/**
 * Makes the venv (about a minute and 440 MB, once), showing progress every
 * 15 s: `python -m venv`, then the build backend and the requirements, each
 * with --require-hashes and no build isolation (so no unpinned setuptools is
 * fetched for the three sdist-only packages), then an import check.
 */
export async function provisionProvider(
  interpreter: string,
  opts: { env?: NodeJS.ProcessEnv; log?: (line: string) => void } = {},
): Promise<AnalysisProvider> {
  const env = opts.env ?? process.env;
  const log = opts.log ?? ((line: string) => console.error(line));
  const cached = cachedProvider(interpreter, env);
  if (cached) return cached;
  if (!existsSync(interpreter)) {
    throw new Error(
      `${interpreter} does not exist: install Debian's python3 and python3-venv, or set DOSSIER_ANALYSIS_PYTHON.`,
    );
  }
  const dir = venvDir(interpreter, env);
  mkdirSync(path.dirname(dir), { recursive: true });
  // One provisioner at a time per venv: others wait for its result.
  const lock = `${dir}.lock`;
  for (;;) {
    try {
      writeFileSync(lock, String(process.pid), { flag: 'wx' });
      break;
    } catch {
      const holder = Number(readFileSync(lock, 'utf8'));
      if (!alive(holder)) {
        rmSync(lock, { force: true });
        continue;
      }
      await new Promise((r) => setTimeout(r, 2_000));
      const done = cachedProvider(interpreter, env);
      if (done) return done;
    }
  }
  try {
    return cachedProvider(interpreter, env) ?? (await install(interpreter, dir, env, log));
  } finally {
    rmSync(lock, { force: true });
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function install(
  interpreter: string,
  dir: string,
  env: NodeJS.ProcessEnv,
  log: (line: string) => void,
) {
  rmSync(dir, { recursive: true, force: true });
  const started = Date.now();
  let last = '';
  const note = (line: string) => (last = line.slice(0, 160));
  const ticker = setInterval(
    () => log(`dossier: still provisioning angr (${Math.round((Date.now() - started) / 1000)}s): ${last}`),
    15_000,
  );
  log(`dossier: provisioning the angr provider into ${dir} (hash-locked; about a minute, once).`);
  try {
    // Made where it will live (pip writes absolute paths into its scripts); ready only once the marker is written.
    await run(interpreter, ['-m', 'venv', dir], env, note);
    const pip = path.join(dir, 'bin', 'pip');
    const pipEnv = { ...env, PIP_FIND_LINKS: '', PIP_DISABLE_PIP_VERSION_CHECK: '1' };
    for (const [lock, extra] of [
      ['requirements-build.lock', []],
      ['requirements.lock', ['--no-build-isolation']],
    ] as const) {
      await run(
        pip,
        ['install', '--require-hashes', '--no-deps', ...extra, '-r', path.join(PROVIDER_DIR, lock)],
        pipEnv,
        note,
      );
    }
    const version = (
      await run(
        path.join(dir, 'bin', 'python'),
        ['-c', 'import angr; print(angr.__version__)'],
        env,
        () => undefined,
      )
    )
      .trim()
      .split('\n')
      .pop()!;
    writeFileSync(path.join(dir, 'dossier-provider.json'), `${JSON.stringify({ version })}\n`);
    log(`dossier: angr ${version} provisioned in ${Math.round((Date.now() - started) / 1000)}s.`);
    return cachedProvider(interpreter, env)!;
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  } finally {
    clearInterval(ticker);
  }
}

let key: string | undefined;

/**
 * The provider's identity in analysis and database keys: the locks and
 * dossier's provider scripts. A change to either is a new provider, whose
 * databases are built anew.
 */
export function providerKey(): string {
  if (!key) {
    const hash = createHash('sha256');
    for (const file of [...LOCKS, 'angr_db.py', 'angr_decompile.py'])
      hash.update(readFileSync(path.join(PROVIDER_DIR, file)));
    key = hash.digest('hex').slice(0, 12);
  }
  return key;
}
