// What a capture observes besides output: strace events and the files the
// process left in its workspace, each bounded, each a collection of rows.
import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { lstat, open, readdir, readlink, type FileHandle } from 'node:fs/promises';
import path from 'node:path';

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

/** Why a file the program could write was not read (it is not what its tracer writes). */
export const NOT_REGULAR =
  'the program replaced it with something other than a regular file (a link, a FIFO or a device), so it was not read';

/**
 * Opens a file in a folder the sandboxed program could write (its tracer's output, its workspace)
 * as the worker, which may be root: a regular file only, never through a link (a link to a host
 * file would read that file into the team's Evidence), never waiting on a FIFO. Undefined when the
 * file is absent; NOT_REGULAR when it is anything but a regular file.
 */
export async function openWritten(file: string): Promise<FileHandle | typeof NOT_REGULAR | undefined> {
  let handle: FileHandle;
  try {
    handle = await open(
      file,
      constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY,
    );
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return undefined;
    if (code === 'ELOOP' || code === 'ENXIO') return NOT_REGULAR;
    throw err;
  }
  if ((await handle.stat()).isFile()) return handle;
  await handle.close();
  return NOT_REGULAR;
}

/** The longest line of a tracer's output kept whole (events keep far less); the rest is cut. */
const MAX_LINE_CHARS = 65_536;

/** A file's lines, each cut to `max` characters: one line with no end cannot exhaust memory. */
async function* boundedLines(handle: FileHandle, max: number): AsyncGenerator<string> {
  let line = '';
  let full = false;
  for await (const chunk of handle.createReadStream({ encoding: 'utf8', autoClose: false })) {
    const text = chunk as string;
    for (let start = 0; ;) {
      const end = text.indexOf('\n', start);
      if (!full) {
        line += text.slice(start, end === -1 ? text.length : end);
        if (line.length > max) [line, full] = [line.slice(0, max), true];
      }
      if (end === -1) break;
      yield line.endsWith('\r') ? line.slice(0, -1) : line;
      [line, full, start] = ['', false, end + 1];
    }
  }
  if (line) yield line;
}

/** Reads at most `max` events from a tracer's output file, one parsed row per line. */
export async function readTrace<E>(
  file: string,
  max: number,
  parse: (line: string, seq: number) => E,
): Promise<{ events: E[]; truncated: boolean; unread?: string }> {
  const events: E[] = [];
  const handle = await openWritten(file);
  if (handle === undefined) return { events, truncated: false };
  if (handle === NOT_REGULAR) return { events, truncated: false, unread: NOT_REGULAR };
  try {
    for await (const line of boundedLines(handle, MAX_LINE_CHARS)) {
      if (!line) continue;
      if (events.length >= max) return { events, truncated: true };
      events.push(parse(line, events.length));
    }
    return { events, truncated: false };
  } finally {
    await handle.close();
  }
}

/**
 * How the traced program itself ended, from ltrace's output: its first process's
 * `+++ exited (status N) +++` or `+++ killed by SIGX +++` line (ltrace exits 0 whatever its
 * program did). Undefined when the file has no such line for it (the tracer was ended first).
 */
export async function tracedExit(
  file: string,
): Promise<{ code: number | null; signal: NodeJS.Signals | null } | undefined> {
  const handle = await openWritten(file);
  if (handle === undefined || handle === NOT_REGULAR) return undefined;
  let root: string | undefined;
  let ended: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  try {
    for await (const line of boundedLines(handle, MAX_LINE_CHARS)) {
      const pid = /^(\d+)\s/.exec(line)?.[1];
      if (!pid) continue;
      root ??= pid;
      if (pid !== root) continue;
      const exited = /^\d+\s+\+\+\+ exited \(status (\d+)\) \+\+\+$/.exec(line);
      const killed = /^\d+\s+\+\+\+ killed by (SIG[A-Z0-9]+)/.exec(line);
      if (exited) ended = { code: Number(exited[1]), signal: null };
      else if (killed) ended = { code: null, signal: killed[1] as NodeJS.Signals };
    }
  } finally {
    await handle.close();
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
        const handle = info.size <= budget ? await openWritten(full) : undefined;
        if (handle && handle !== NOT_REGULAR) {
          budget -= info.size;
          const hash = createHash('sha256');
          try {
            for await (const chunk of handle.createReadStream({ autoClose: false }))
              hash.update(chunk as Buffer);
          } finally {
            await handle.close();
          }
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
