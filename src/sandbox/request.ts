// What a program is started with (sandbox.ts): the cluster's policy, the
// paths a caller mounts, the resource limits and the request itself. Types
// only, so the view bubblewrap gives a program (bwrap.ts) reads them too.
import type { UidRange } from './identities.ts';

export interface SandboxPolicy {
  /** Host paths shown read-only to every sandboxed program besides /usr and SYSTEM_ETC. */
  readOnlyPaths: string[];
  uids: UidRange;
  /** Host-wide folder of uid leases, shared by every worker on the host. */
  leaseDir: string;
  /** Whether a tool input may ask for network access. */
  allowNetwork: boolean;
  /** Whether a capture may ask for `isolation: "none"` (the admin's escape; the Evidence records it). */
  allowUnsandboxed: boolean;
  /** Size of the private /tmp every sandbox gets. */
  tmpBytes: number;
}

export interface Mount {
  /** A host path, or an open file descriptor (pins exactly the inode that was checked). */
  host: string | number;
  /** Where the program sees it (for a path, default: the same path). */
  inside?: string;
  writable?: boolean;
}

export interface Limits {
  addressSpaceBytes?: number;
  openFiles?: number;
  processes?: number;
  /** Largest file the program may write (RLIMIT_FSIZE). */
  fileBytes?: number;
  cpuSeconds?: number;
}

export interface SandboxRequest {
  /** Program and arguments, as the program sees its filesystem. */
  argv: string[];
  env: Record<string, string>;
  cwd?: string;
  mounts?: Mount[];
  network?: boolean;
  limits?: Limits;
  /** Size of the private /tmp (default: the policy's tmpBytes). */
  tmpBytes?: number;
  /** A private /dev/shm of this size, for programs whose processes share semaphores (Python's multiprocessing). */
  shmBytes?: number;
  /** `none` runs without namespaces (the admin's escape): still unprivileged when the worker is root. */
  isolation?: 'sandbox' | 'none';
  /** A pipe to write to (the default), nothing, or an input known in advance (written and closed). */
  stdin?: 'pipe' | 'ignore' | { content: string };
}

/** What the Evidence says about the place a program ran in. */
