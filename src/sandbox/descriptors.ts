// Descriptors a process got from whoever started it, without close-on-exec,
// pass to every program it runs, whatever team's: a shell's or a supervisor's
// stray pipe, an open file. Node opens its own (its IPC channel included) with
// close-on-exec, so what lacks the flag above stderr was inherited.
import { closeSync, readdirSync, readFileSync } from 'node:fs';

const O_CLOEXEC = 0o2000000;

/** Closes this process's descriptors above stderr that would survive an exec; returns their numbers. */
export function closeInheritedDescriptors(): number[] {
  let names: string[];
  try {
    names = readdirSync('/proc/self/fdinfo');
  } catch {
    return []; // no /proc: nothing to look at
  }
  const closed: number[] = [];
  for (const name of names) {
    const fd = Number(name);
    if (!Number.isInteger(fd) || fd <= 2) continue;
    let flags: number;
    try {
      flags = parseInt(
        /^flags:\s*([0-7]+)/m.exec(readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8'))?.[1] ?? '',
        8,
      );
    } catch {
      continue; // closed meanwhile (the listing's own descriptor)
    }
    if (Number.isNaN(flags) || flags & O_CLOEXEC) continue;
    try {
      closeSync(fd);
      closed.push(fd);
    } catch {
      // gone already
    }
  }
  return closed;
}
