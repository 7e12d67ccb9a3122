// Python environments for the tools dossier runs from PyPI (angr for static
// analysis, jefferson and ubi_reader for flash file systems): a virtualenv
// made from hash-locked requirements (every file's SHA-256 checked by pip),
// cached under the per-user cache folder by the digest of the locks and the
// interpreter, so a change to either makes a new one and nothing is ever
// half-installed in place.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export interface PythonEnvSpec {
  /** The environment's name: its cache folder's prefix and the subject of its messages. */
  name: string;
  /** The cache folder under ~/.cache/dossier that holds it. */
  cacheFolder: string;
  /** The folder of its locks and of dossier's scripts that run in it. */
  dir: string;
  /** Locks installed in order, each with pip's extra flags. */
  installs: { lock: string; flags: string[] }[];
  /** dossier's scripts in `dir`: with the locks, they make the environment's identity (key). */
  scripts: string[];
  /** Python code whose last printed line is the version to report. */
  versionProbe: string;
  /** What a first install costs, for the progress message. */
  cost: string;
}

export interface PythonEnv {
  name: string;
  /** The main package's version, as the environment reports it. */
  version: string;
  /** The venv's interpreter and the folder it lives in (mounted read-only into the sandbox). */
  python: string;
  venv: string;
  /** The folder of dossier's scripts for it. */
  scripts: string;
}

/** Where a Python environment is in the sandbox: its venv and dossier's scripts for it, at fixed paths. */
const SANDBOXED = { venv: '/opt/venv', scripts: '/opt/scripts' } as const;

/**
 * A Python environment as a sandboxed program runs it: the venv and the scripts mounted at fixed
 * paths (a venv finds itself from its interpreter's path), so a traceback names those, never the
 * worker's cache or source folders.
 */
export function sandboxedEnv(env: PythonEnv): {
  python: string;
  script: (name: string) => string;
  mounts: { host: string; inside: string }[];
} {
  return {
    python: path.posix.join(SANDBOXED.venv, path.relative(env.venv, env.python)),
    script: (name) => path.posix.join(SANDBOXED.scripts, name),
    mounts: [
      { host: env.venv, inside: SANDBOXED.venv },
      { host: env.scripts, inside: SANDBOXED.scripts },
    ],
  };
}

function cacheRoot(spec: PythonEnvSpec, env: NodeJS.ProcessEnv): string {
  return path.join(env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'dossier', spec.cacheFolder);
}

const dirs = new Map<string, string>();

/** The venv folder for these locks and this interpreter (the locks are read once per process). */
function venvDir(spec: PythonEnvSpec, interpreter: string, env: NodeJS.ProcessEnv = process.env) {
  const root = cacheRoot(spec, env);
  const key = `${spec.name}\n${interpreter}\n${root}`;
  let dir = dirs.get(key);
  if (!dir) {
    const hash = createHash('sha256').update(interpreter);
    for (const { lock } of spec.installs) hash.update(readFileSync(path.join(spec.dir, lock)));
    dir = path.join(root, `${spec.name}-${hash.digest('hex').slice(0, 16)}`);
    dirs.set(key, dir);
  }
  return dir;
}

/** The provisioned environment, or undefined when it is not (yet) installed. */
export function cachedEnv(
  spec: PythonEnvSpec,
  interpreter: string,
  env: NodeJS.ProcessEnv = process.env,
): PythonEnv | undefined {
  const dir = venvDir(spec, interpreter, env);
  const marker = path.join(dir, 'dossier-provider.json');
  if (!existsSync(marker)) return undefined;
  const { version } = JSON.parse(readFileSync(marker, 'utf8')) as { version: string };
  return { name: spec.name, version, python: path.join(dir, 'bin', 'python'), venv: dir, scripts: spec.dir };
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

const inFlight = new Map<string, Promise<PythonEnv>>();

/**
 * The environment, made once: the callers of one process share one install
 * (a failure is tried again by the next call), and processes share it through
 * the cache folder and its lock file.
 */
export function provisionEnv(
  spec: PythonEnvSpec,
  interpreter: string,
  opts: { env?: NodeJS.ProcessEnv; log?: (line: string) => void } = {},
): Promise<PythonEnv> {
  const env = opts.env ?? process.env;
  const cached = cachedEnv(spec, interpreter, env);
  if (cached) return Promise.resolve(cached);
  const key = venvDir(spec, interpreter, env);
  let install = inFlight.get(key);
  if (!install) {
    install = provisionOnce(spec, interpreter, opts);
    inFlight.set(key, install);
    const forget = () => inFlight.delete(key);
    install.then(forget, forget);
  }
  return install;
}

/**
 * Makes the venv once, showing progress every 15 s: `python -m venv`, then
 * each lock with --require-hashes and --no-deps, then the version probe. One
 * provisioner at a time per venv (a lock file); others wait for its result.
 */
async function provisionOnce(
  spec: PythonEnvSpec,
  interpreter: string,
  opts: { env?: NodeJS.ProcessEnv; log?: (line: string) => void },
): Promise<PythonEnv> {
  const env = opts.env ?? process.env;
  const log = opts.log ?? ((line: string) => console.error(line));
  const cached = cachedEnv(spec, interpreter, env);
  if (cached) return cached;
  if (!existsSync(interpreter)) {
    throw new Error(
      `${interpreter} does not exist: install Debian's python3 and python3-venv, or set DOSSIER_ANALYSIS_PYTHON.`,
    );
  }
  const dir = venvDir(spec, interpreter, env);
  mkdirSync(path.dirname(dir), { recursive: true });
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
      const done = cachedEnv(spec, interpreter, env);
      if (done) return done;
    }
  }
  try {
    return cachedEnv(spec, interpreter, env) ?? (await install(spec, interpreter, dir, env, log));
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
  spec: PythonEnvSpec,
  interpreter: string,
  dir: string,
  env: NodeJS.ProcessEnv,
  log: (line: string) => void,
): Promise<PythonEnv> {
  rmSync(dir, { recursive: true, force: true });
  const started = Date.now();
  let last = '';
  const note = (line: string) => (last = line.slice(0, 160));
  const ticker = setInterval(
    () =>
      log(
        `dossier: still provisioning ${spec.name} (${Math.round((Date.now() - started) / 1000)}s): ${last}`,
      ),
    15_000,
  );
  log(`dossier: provisioning ${spec.name} into ${dir} (hash-locked; ${spec.cost}, once).`);
  try {
    // Made where it will live (pip writes absolute paths into its scripts); ready only once the marker is written.
    await run(interpreter, ['-m', 'venv', dir], env, note);
    const pip = path.join(dir, 'bin', 'pip');
    const pipEnv = { ...env, PIP_FIND_LINKS: '', PIP_DISABLE_PIP_VERSION_CHECK: '1' };
    for (const { lock, flags } of spec.installs) {
      await run(
        pip,
        ['install', '--require-hashes', '--no-deps', ...flags, '-r', path.join(spec.dir, lock)],
        pipEnv,
        note,
      );
    }
    const probe = await run(path.join(dir, 'bin', 'python'), ['-c', spec.versionProbe], env, () => undefined);
    const version = probe.trim().split('\n').pop()!;
    writeFileSync(path.join(dir, 'dossier-provider.json'), `${JSON.stringify({ version })}\n`);
    log(`dossier: ${spec.name} ${version} provisioned in ${Math.round((Date.now() - started) / 1000)}s.`);
    return cachedEnv(spec, interpreter, env)!;
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  } finally {
    clearInterval(ticker);
  }
}

const keys = new Map<string, string>();

/**
 * The environment's identity in keys that outlive a process (analysis and
 * database keys): its locks and dossier's scripts. A change to either is a
 * new environment, whose results are made anew.
 */
export function envKey(spec: PythonEnvSpec): string {
  let key = keys.get(spec.name);
  if (!key) {
    const hash = createHash('sha256');
    for (const file of [...spec.installs.map((i) => i.lock), ...spec.scripts])
      hash.update(readFileSync(path.join(spec.dir, file)));
    key = hash.digest('hex').slice(0, 12);
    keys.set(spec.name, key);
  }
  return key;
}
