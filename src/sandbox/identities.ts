// Unprivileged identities for sandboxed programs: one uid/gid per running
// program, leased from a configured range. RLIMIT_NPROC counts processes per
// real uid across the whole host, so a uid of its own is what makes the
// `processes` limit hold per launch, and what keeps two launches from ever
// sharing an owner of files or processes. Leases are files created with
// O_EXCL in a host-wide folder, so the workers of one host never hand out the
// same uid twice; a lease whose worker died is taken back. A lease names its
// holder by pid and the holder's start time, so a pid reused by another
// process since does not keep a dead worker's lease for good.
import { randomInt } from 'node:crypto';
import { closeSync, mkdirSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import path from 'node:path';
import { DossierError } from '../domain/errors.ts';

export interface UidRange {
  first: number;
  last: number;
}

export interface Identity {
  uid: number;
  gid: number;
  /** Gives the uid back; the caller calls it once the program and its processes are gone. */
  release(): void;
}

/** Draws that may hit taken uids before giving up: with thousands free, hitting this means the range is exhausted. */
const DRAWS = 64;

/** When a process started (clock ticks since boot, from /proc), or undefined when it is gone. */
function startTime(pid: number | 'self'): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The fields after the command's closing parenthesis; starttime is field 22 of the whole line.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}

/** Whether the lease's holder still runs: that pid, started when the lease says (when it says). */
function alive(pid: number, started: string | undefined): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  return started === undefined || startTime(pid) === started;
}

/** This process's lease line: its pid and start time. */
const HOLDER = `${process.pid} ${startTime('self') ?? ''}`.trim();

export class IdentityPool {
  private readonly held = new Set<number>();

  constructor(
    private readonly range: UidRange,
    private readonly leaseDir: string,
  ) {
    mkdirSync(leaseDir, { recursive: true, mode: 0o700 });
  }

  acquire(): Identity {
    const size = this.range.last - this.range.first + 1;
    for (let draw = 0; draw < DRAWS; draw++) {
      const uid = this.range.first + randomInt(size);
      if (this.held.has(uid) || !this.lease(uid)) continue;
      this.held.add(uid);
      let released = false;
      return {
        uid,
        gid: uid,
        release: () => {
          if (released) return;
          released = true;
          this.held.delete(uid);
          try {
            unlinkSync(this.file(uid));
          } catch {
            // already taken back
          }
        },
      };
    }
    throw new DossierError(
      'resource_constraint',
      `No free sandbox uid in ${this.range.first}-${this.range.last}: too many programs run on this host at once.`,
      'Retry later, or ask an admin to widen DOSSIER_SANDBOX_UIDS.',
      { range: this.range },
      true,
    );
  }

  private file(uid: number) {
    return path.join(this.leaseDir, String(uid));
  }

  /** Creates the lease file; takes over a lease whose holder process is gone. */
  private lease(uid: number, retry = true): boolean {
    try {
      const fd = openSync(this.file(uid), 'wx', 0o600);
      writeSync(fd, `${HOLDER}\n`);
      closeSync(fd);
      return true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST' || !retry) return false;
      let holder = NaN;
      let started: string | undefined;
      try {
        const [pid, since] = readFileSync(this.file(uid), 'utf8').trim().split(' ');
        holder = Number(pid);
        started = since || undefined;
      } catch {
        return false;
      }
      if (!Number.isInteger(holder) || holder <= 0 || alive(holder, started)) return false;
      try {
        unlinkSync(this.file(uid));
      } catch {
        return false;
      }
      return this.lease(uid, false);
    }
  }
}
