// What a capture observes besides output: strace events and the files the
// process left in its workspace, each bounded, each a collection of rows.
import { createHash } from 'node:crypto';
import { createReadStream, existsSync } from 'node:fs';
import { lstat, readdir, readlink } from 'node:fs/promises';
import path from 'node:path';
import { createInterface } from 'node:readline';

export interface SyscallEvent {
  seq: number;
  pid: number | null;
  syscall: string;
  args: string;
  result: string | null;
}

const ARGS_CHARS = 256;
const CALL = /^(\d+)\s+([a-z_0-9]+)\((.*)\)\s+=\s+(.*)$/;
const UNFINISHED = /^(\d+)\s+([a-z_0-9]+)\((.*)\s+<unfinished \.\.\.>$/;
const RESUMED = /^(\d+)\s+<\.\.\. ([a-z_0-9]+) resumed>(.*)\)\s+=\s+(.*)$/;
const EXITED = /^(\d+)\s+\+\+\+ (exited with \d+|killed by \w+.*) \+\+\+$/;
const SIGNAL = /^(\d+)\s+--- (\w+) .*---$/;

export function parseStraceLine(line: string, seq: number): SyscallEvent {
  const clip = (s: string) => (s.length > ARGS_CHARS ? `${s.slice(0, ARGS_CHARS)}…` : s);
  let m = CALL.exec(line);
  if (m) return { seq, pid: Number(m[1]), syscall: m[2]!, args: clip(m[3]!), result: m[4]! };
  m = UNFINISHED.exec(line);
  if (m) return { seq, pid: Number(m[1]), syscall: m[2]!, args: clip(m[3]!), result: null };
  m = RESUMED.exec(line);
  if (m) return { seq, pid: Number(m[1]), syscall: m[2]!, args: clip(`…${m[3]!}`), result: m[4]! };
  m = EXITED.exec(line);
  if (m) return { seq, pid: Number(m[1]), syscall: '+++exit', args: m[2]!, result: null };
  m = SIGNAL.exec(line);
  if (m) return { seq, pid: Number(m[1]), syscall: '---signal', args: m[2]!, result: null };
  return { seq, pid: null, syscall: '?', args: clip(line), result: null };
}

export interface CallEvent {
  seq: number;
  pid: number | null;
  library: string | null;
  call: string;
  args: string;
  result: string | null;
}

const LCALL = /^(\d+)\s+(?:([\w.+-]+)->)?([\w@.]+)\((.*)\)\s+=\s+(.*)$/;
const LUNFINISHED = /^(\d+)\s+(?:([\w.+-]+)->)?([\w@.]+)\((.*)\s+<unfinished \.\.\.>$/;
const LRESUMED = /^(\d+)\s+<\.\.\. ([\w@.]+) resumed>(.*)\)\s+=\s+(.*)$/;
const LEXIT = /^(\d+)\s+\+\+\+ (.*) \+\+\+$/;
const LSIGNAL = /^(\d+)\s+--- (\w+).*---$/;

/** One line of `ltrace -f` output as an event row. */
export function parseLtraceLine(line: string, seq: number): CallEvent {
  const clip = (s: string) => (s.length > ARGS_CHARS ? `${s.slice(0, ARGS_CHARS)}…` : s);
  let m = LCALL.exec(line);
  if (m)
    return { seq, pid: Number(m[1]), library: m[2] ?? null, call: m[3]!, args: clip(m[4]!), result: m[5]! };
  m = LUNFINISHED.exec(line);
  if (m)
    return { seq, pid: Number(m[1]), library: m[2] ?? null, call: m[3]!, args: clip(m[4]!), result: null };
  m = LRESUMED.exec(line);
  if (m)
    return { seq, pid: Number(m[1]), library: null, call: m[2]!, args: clip(`…${m[3]!}`), result: m[4]! };
  m = LEXIT.exec(line);
  if (m) return { seq, pid: Number(m[1]), library: null, call: '+++exit', args: m[2]!, result: null };
  m = LSIGNAL.exec(line);
  if (m) return { seq, pid: Number(m[1]), library: null, call: '---signal', args: m[2]!, result: null };
  return { seq, pid: null, library: null, call: '?', args: clip(line), result: null };
}

/** Reads at most `max` events from an strace -f output file. */
export function readStrace(file: string, max: number) {
  return readTrace(file, max, parseStraceLine);
}

/** Reads at most `max` events from a tracer's output file, one parsed row per line. */
export async function readTrace<E>(
  file: string,
  max: number,
  parse: (line: string, seq: number) => E,
): Promise<{ events: E[]; truncated: boolean }> {
  const events: E[] = [];
  if (!existsSync(file)) return { events, truncated: false };
  const lines = createInterface({ input: createReadStream(file, 'utf8'), crlfDelay: Infinity });
  for await (const line of lines) {
    if (!line) continue;
    if (events.length >= max) {
      lines.close();
      return { events, truncated: true };
    }
    events.push(parse(line, events.length));
  }
  return { events, truncated: false };
}

/**
 * How the traced program itself ended, from ltrace's output: its first process's
 * `+++ exited (status N) +++` or `+++ killed by SIGX +++` line (ltrace exits 0 whatever its
 * program did). Undefined when the file has no such line for it (the tracer was ended first).
 */
export async function tracedExit(
  file: string,
): Promise<{ code: number | null; signal: NodeJS.Signals | null } | undefined> {
  if (!existsSync(file)) return undefined;
  let root: string | undefined;
  let ended: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  const lines = createInterface({ input: createReadStream(file, 'utf8'), crlfDelay: Infinity });
  for await (const line of lines) {
    const pid = /^(\d+)\s/.exec(line)?.[1];
    if (!pid) continue;
    root ??= pid;
    if (pid !== root) continue;
    const exited = /^\d+\s+\+\+\+ exited \(status (\d+)\) \+\+\+$/.exec(line);
    const killed = /^\d+\s+\+\+\+ killed by (SIG[A-Z0-9]+)/.exec(line);
    if (exited) ended = { code: Number(exited[1]), signal: null };
    else if (killed) ended = { code: null, signal: killed[1] as NodeJS.Signals };
  }
  return ended;
}

export interface FileRow {
  path: string;
  type: 'file' | 'dir' | 'symlink' | 'other';
  size: number;
  sha256: string | null;
  link_target: string | null;
}

/** Lists a tree without following links, hashing regular files within a byte budget. */
export async function listTree(
  root: string,
  maxEntries: number,
  hashBudgetBytes: number,
): Promise<{ files: FileRow[]; truncated: boolean; unhashed: number }> {
  const files: FileRow[] = [];
  let budget = hashBudgetBytes;
  let unhashed = 0;
  const walk = async (dir: string): Promise<boolean> => {
    const entries = (await readdir(dir, { withFileTypes: true })).sort((a, b) => (a.name < b.name ? -1 : 1));
    for (const entry of entries) {
      if (files.length >= maxEntries) return false;
      const full = path.join(dir, entry.name);
      const rel = path.relative(root, full);
      const info = await lstat(full);
      if (info.isSymbolicLink()) {
        files.push({ path: rel, type: 'symlink', size: 0, sha256: null, link_target: await readlink(full) });
      } else if (info.isDirectory()) {
        files.push({ path: rel, type: 'dir', size: 0, sha256: null, link_target: null });
        if (!(await walk(full))) return false;
      } else if (info.isFile()) {
        let sha256: string | null = null;
        if (info.size <= budget) {
          budget -= info.size;
          const hash = createHash('sha256');
          for await (const chunk of createReadStream(full)) hash.update(chunk as Buffer);
          sha256 = hash.digest('hex');
        } else unhashed++;
        files.push({ path: rel, type: 'file', size: info.size, sha256, link_target: null });
      } else {
        files.push({ path: rel, type: 'other', size: info.size, sha256: null, link_target: null });
      }
    }
    return true;
  };
  const complete = await walk(root);
  return { files, truncated: !complete, unhashed };
}
