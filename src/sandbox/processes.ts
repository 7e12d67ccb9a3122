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

/** Live (non-zombie) processes, optionally only those whose stat fields (after the name) pass `accept`. */
function liveProcesses(accept: (statFields: string[]) => boolean = () => true): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (entry.charCodeAt(0) < 48 || entry.charCodeAt(0) > 57) continue;
    const stat = read(`/proc/${entry}/stat`);
    if (!stat) continue;
    // Fields after the command name, which is in parentheses and may hold spaces.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (fields[0] !== 'Z' && accept(fields)) out.push(Number(entry));
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

/** PIDs of the live processes in a PID namespace (a sandbox's processes, wherever they forked). */
export function liveNamespaceMembers(namespace: string): number[] {
  return liveProcesses().filter((pid) => pidNamespaceOf(pid) === namespace);
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
