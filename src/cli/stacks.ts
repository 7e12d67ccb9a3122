// Where the CLI finds the stack its user just started. `dossier start` and
// `dossier cluster up` record each running stack (its DOSSIER_HOME, the folder
// it was started from, its process) in a per-user folder; a client command run
// with no DOSSIER_HOME (and not both DOSSIER_URL and DOSSIER_TOKEN) takes the
// live stack started from its folder or the nearest folder above, else the
// nearest .dossier/ above with connection details, and says which. Reads only
// small files: the short commands stay short.
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig, type Config } from '../config.ts';

interface StackEntry {
  home: string;
  /** The folder `dossier start` ran in. */
  cwd: string;
  pid: number;
  /** The process's start time in clock ticks since boot (/proc/PID/stat), so a reused pid is no match. */
  pid_start: string;
  started_at: string;
}

/** `$XDG_STATE_HOME/dossier/stacks` (default ~/.local/state/dossier/stacks). */
export function stacksDir(env: NodeJS.ProcessEnv = process.env): string {
  const state = env.XDG_STATE_HOME || path.join(os.homedir(), '.local', 'state');
  return path.join(state, 'dossier', 'stacks');
}

function startTime(pid: number): string | undefined {
  try {
    // The command name (field 2) may hold spaces and parentheses: count fields after its last ')'.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}

/** Records this process's stack on `home`, started in `cwd`; returns what forgets it (at stop). Never fails the stack. */
export function recordStack(
  home: string,
  env: NodeJS.ProcessEnv = process.env,
  cwd: string = process.cwd(),
): () => void {
  const dir = stacksDir(env);
  const file = path.join(dir, `${createHash('sha256').update(home).digest('hex').slice(0, 16)}.json`);
  const entry: StackEntry = {
    home,
    cwd,
    pid: process.pid,
    pid_start: startTime(process.pid) ?? '',
    started_at: new Date().toISOString(),
  };
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    writeFileSync(file, `${JSON.stringify(entry, null, 2)}\n`, { mode: 0o600 });
  } catch {
    return () => undefined;
  }
  return () => {
    try {
      const kept = JSON.parse(readFileSync(file, 'utf8')) as StackEntry;
      if (kept.pid === process.pid) rmSync(file, { force: true });
    } catch {
      // gone already
    }
  };
}

/** The stacks recorded and still running (their process alive, dev.json or cluster.json there). */
export function liveStacks(env: NodeJS.ProcessEnv = process.env): StackEntry[] {
  const dir = stacksDir(env);
  const names = (() => {
    try {
      return readdirSync(dir).filter((n) => n.endsWith('.json'));
    } catch {
      return [];
    }
  })();
  const live: StackEntry[] = [];
  for (const name of names) {
    try {
      const e = JSON.parse(readFileSync(path.join(dir, name), 'utf8')) as StackEntry;
      if (startTime(e.pid) !== e.pid_start || !e.pid_start || !connectionFile(e.home)) continue;
      live.push(e);
    } catch {
      // a torn or foreign file: not a stack
    }
  }
  return live;
}

function connectionFile(home: string): string | undefined {
  return ['dev.json', 'cluster.json'].map((f) => path.join(home, f)).find((f) => existsSync(f));
}

const within = (dir: string, cwd: string) =>
  cwd === dir || cwd.startsWith(dir.endsWith('/') ? dir : `${dir}/`);

/**
 * The stack a client command in `cwd` means: the live stack started in `cwd` or the nearest folder
 * above it (the newest, if several), else the nearest `.dossier/` above `cwd` holding connection
 * details. `how` says which, in a sentence.
 */
export function findStack(
  cwd: string = process.cwd(),
  env: NodeJS.ProcessEnv = process.env,
): { home: string; how: string } | undefined {
  const started = liveStacks(env)
    .filter((e) => within(e.cwd, cwd))
    .sort((a, b) => b.cwd.length - a.cwd.length || b.started_at.localeCompare(a.started_at))[0];
  if (started)
    return {
      home: started.home,
      how: `using the stack started in ${started.cwd} (pid ${started.pid}, DOSSIER_HOME=${started.home})`,
    };
  for (let dir = cwd; ; dir = path.dirname(dir)) {
    const home = path.join(dir, '.dossier');
    if (connectionFile(home)) return { home, how: `using ${connectionFile(home)} (found from ${cwd})` };
    if (path.dirname(dir) === dir) return undefined;
  }
}

/**
 * The configuration of a command that talks to a running stack (call, launches, upload, mcp,
 * token): with no DOSSIER_HOME (and not both DOSSIER_URL and DOSSIER_TOKEN), the stack started
 * from this folder or one above it, said on stderr.
 */
export function clientConfig(): Config {
  const env = process.env;
  if (env.DOSSIER_HOME || (env.DOSSIER_URL && env.DOSSIER_TOKEN)) return loadConfig();
  const found = findStack(process.cwd(), env);
  if (!found) return loadConfig();
  console.error(`dossier: ${found.how}`);
  return loadConfig({ ...env, DOSSIER_HOME: found.home });
}

/**
 * The banner's line on running the CLI against a stack started in `here` by `script`
 * (bin/dossier.js). `npx dossier` finds dossier's own bin only inside its checkout; elsewhere npx
 * would fetch a package of that name from the registry, so there the line names the script.
 */
export function cliLine(script: string, here: string): string {
  const where = `(in ${here} or a folder in it: it finds this stack)`;
  const checkout = path.dirname(path.dirname(script));
  const inside = here === checkout || here.startsWith(`${checkout}${path.sep}`);
  const indent = ' '.repeat(17);
  return inside
    ? `npx dossier call whoami ${where}\n${indent}alias dossier='node ${script}' is as good and a second faster (npx starts npm first)`
    : `node ${script} call whoami ${where}\n${indent}alias dossier='node ${script}' makes it \`dossier call whoami\``;
}
