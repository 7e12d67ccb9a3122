// Process facts from /proc. Zombies are not counted: a process that has
// exited but whose parent has not reaped it yet holds no resources and cannot
// act, and on hosts whose PID 1 does not reap, orphans stay zombies for good.
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

function read(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return ''; // ended while we looked
  }
}

/** A process's stat fields after its name (which is in parentheses and may hold spaces); undefined once it is gone. */
function statFields(pid: number | string): string[] | undefined {
  const stat = read(`/proc/${pid}/stat`);
  return stat ? stat.slice(stat.lastIndexOf(')') + 2).split(' ') : undefined;
}

/** Live (non-zombie) processes whose stat fields pass `accept`. */
function liveProcesses(accept: (statFields: string[]) => boolean): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (entry.charCodeAt(0) < 48 || entry.charCodeAt(0) > 57) continue;
    const fields = statFields(entry);
    if (fields && fields[0] !== 'Z' && accept(fields)) out.push(Number(entry));
  }
  return out;
}

/** PIDs of the live processes in process group `pgid`. */
export function liveGroupMembers(pgid: number): number[] {
  return liveProcesses((fields) => Number(fields[2]) === pgid);
}

/** The PID namespace of a process (`pid:[inode]`), or undefined when it is gone. */
export function pidNamespaceOf(pid: number): string | undefined {
  try {
    return readlinkSync(`/proc/${pid}/ns/pid`);
  } catch {
    return undefined;
  }
}

/** Whether a process exists and is not a zombie. */
function isLive(pid: number): boolean {
  const fields = statFields(pid);
  return fields !== undefined && fields[0] !== 'Z';
}

/**
 * PIDs of the live processes of a sandbox: its PID namespace's init and
 * everything under it. Every process of a PID namespace descends from its
 * init (an orphan is reparented to it), so this walks only the sandbox's own
 * processes, never the host's whole /proc; each is checked to be in the
 * namespace, so a pid that has become another process's is never counted.
 */
export function liveNamespaceTree(init: number, namespace: string, max = 100_000): number[] {
  const out: number[] = [];
  const queue = [init];
  const seen = new Set(queue);
  for (let next = 0; next < queue.length && seen.size <= max; next++) {
    const pid = queue[next]!;
    if (isLive(pid) && pidNamespaceOf(pid) === namespace) out.push(pid);
    let tasks: string[];
    try {
      tasks = readdirSync(`/proc/${pid}/task`);
    } catch {
      continue; // ended while we looked
    }
    for (const tid of tasks) {
      for (const child of read(`/proc/${pid}/task/${tid}/children`).trim().split(/\s+/)) {
        const c = Number(child);
        if (child && !seen.has(c)) {
          seen.add(c);
          queue.push(c);
        }
      }
    }
  }
  return out;
}

/** The children of a process, from /proc. */
export function childrenOf(pid: number): number[] {
  return read(`/proc/${pid}/task/${pid}/children`).trim().split(/\s+/).filter(Boolean).map(Number);
}

/** Sends `signal` to one process (or, negative, a group); false when it no longer exists. */
export function signalProcess(pid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(pid, signal);
    return true;
  } catch {
    return false;
  }
}

/** Sends `signal` to the whole group; false when the group no longer exists. */
export function signalGroup(pgid: number, signal: NodeJS.Signals): boolean {
  return signalProcess(-pgid, signal);
}
