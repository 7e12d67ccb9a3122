// The one way dossier starts a program on a target's behalf: captures, and
// every helper that parses untrusted bytes (7-Zip, sqfs2tar, binwalk, file,
// the decompressors, analysis providers). Bubblewrap gives the program its own
// mount, PID, IPC, UTS and network namespaces with a minimal read-only view of
// the system — /usr, a handful of /etc files, nothing of DOSSIER_HOME — plus
// only the paths the caller mounts. When the worker is root, bubblewrap sets
// up with root's rights and the program then runs as an unprivileged uid of
// its own (setpriv: no capabilities, no_new_privs, no supplementary groups);
// prlimit applies the resource limits last, as that uid.
import { existsSync } from 'node:fs';
import path from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { DossierError } from '../domain/errors.ts';
import { sandboxRefusals } from '../metrics/metrics.ts';
import { IdentityPool, type Identity } from './identities.ts';
import type { Limits, SandboxPolicy, SandboxRequest } from './request.ts';
import { startProgram, type PipeContent, type ProgramChild } from './launcher.ts';
import { bwrapView, SYSTEM_ETC } from './bwrap.ts';
import {
  childrenOf,
  liveGroupMembers,
  liveNamespaceTree,
  pidNamespaceOf,
  signalGroup,
  signalProcess,
} from './processes.ts';

export type { Limits, Mount, SandboxPolicy, SandboxRequest } from './request.ts';

export interface SandboxFacts {
  isolation: 'sandbox' | 'none';
  uid: number;
  gid: number;
  network: boolean;
  visible: string[];
  writable: string[];
}

export interface SandboxedProcess {
  child: ProgramChild & { stdout: Readable; stderr: Readable; stdin: Writable | null };
  facts: SandboxFacts;
  /** SIGTERM to every process of the program, wherever it forked. */
  terminate(): void;
  /** SIGKILL to all of them; the sandbox goes with its first process. */
  kill(): void;
  /** Live processes of the program besides its first (for the Evidence: strays left running). */
  members(): number[];
  /** Resolves once the program started, or could not (then `exited` says why): mounted descriptors may be closed. */
  started: Promise<void>;
  /** Resolves when the first process has exited and the uid is given back. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; error?: Error }>;
}

const isRoot = () => process.getuid?.() === 0;

/** This process's PID namespace: never a sandbox's. */
const OWN_PID_NAMESPACE = pidNamespaceOf(process.pid);

function which(name: string, pkg: string): string {
  for (const dir of ['/usr/bin', '/usr/sbin', '/usr/local/bin']) {
    const candidate = path.join(dir, name);
    if (existsSync(candidate)) return candidate;
  }
  throw new DossierError(
    'provider_unavailable',
    `${name} is not installed on this host.`,
    `Install it (Debian package ${pkg}) on the workers and gateways.`,
    { program: name, package: pkg },
  );
}

/** Absolute path of a helper program, or a clear provider_unavailable error. */
export const helperPath = which;

export class Sandbox {
  private readonly identities: IdentityPool | undefined;

  constructor(readonly policy: SandboxPolicy) {
    this.identities = isRoot() ? new IdentityPool(policy.uids, policy.leaseDir) : undefined;
  }

  /** Refuses what the policy does not allow a tool input to ask for, before anything runs. */
  check(req: Pick<SandboxRequest, 'network' | 'isolation'>) {
    if (req.network && !this.policy.allowNetwork) {
      sandboxRefusals.inc({ reason: 'network' });
      throw new DossierError(
        'policy_denied',
        'This cluster gives sandboxed programs no network.',
        'Run without network, or ask an admin to set DOSSIER_SANDBOX_NETWORK=allow.',
      );
    }
    if (req.isolation === 'none' && !this.policy.allowUnsandboxed) {
      sandboxRefusals.inc({ reason: 'isolation' });
      throw new DossierError(
        'policy_denied',
        'isolation "none" is disabled on this cluster: programs always run in the sandbox.',
        'Use the default isolation ("sandbox"), or ask an admin to set DOSSIER_ALLOW_UNSANDBOXED=true.',
      );
    }
  }

  /** A uid of its own for one program; the workspace it writes must belong to it. */
  identity(): Identity {
    if (this.identities) return this.identities.acquire();
    const uid = process.getuid?.() ?? 65534;
    return { uid, gid: process.getgid?.() ?? uid, release: () => undefined };
  }

  spawn(req: SandboxRequest, identity: Identity = this.identity()): SandboxedProcess {
    try {
      // Nothing dossier starts for itself has network (adb reaches its server through a relayed
      // socket): only a tool input may ask for it, and only where the policy allows.
      this.check({ network: req.network, isolation: req.isolation });
      return this.start(req, identity);
    } catch (err) {
      identity.release();
      throw err;
    }
  }

  private start(req: SandboxRequest, identity: Identity): SandboxedProcess {
    const isolation = req.isolation ?? 'sandbox';
    const network = req.network ?? false;
    const fds: number[] = [];
    /** Contents bwrap reads from pipes after the mounted descriptors (--ro-bind-data). */
    const data: PipeContent[] = [];
    let argv = [...limitArgs(req.limits), ...req.argv];
    if (isRoot()) {
      argv = [
        which('setpriv', 'util-linux'),
        `--reuid=${identity.uid}`,
        `--regid=${identity.gid}`,
        '--clear-groups',
        '--no-new-privs',
        '--inh-caps=-all',
        '--bounding-set=-all',
        ...(isolation === 'none' ? ['--pdeathsig=KILL'] : []),
        '--',
        ...argv,
      ];
    }
    const visible = ['/usr', ...SYSTEM_ETC.map((e) => `/etc/${e}`)];
    const writable: string[] = [];
    if (isolation === 'sandbox') {
      const bwrap = which('bwrap', 'bubblewrap');
      const view = bwrapView({ policy: this.policy, req, identity, network, root: isRoot(), fds, data });
      visible.push(...view.visible);
      writable.push(...view.writable);
      argv = [bwrap, ...view.args, '--', ...argv];
    }
    const child = startProgram({
      file: argv[0]!,
      args: argv.slice(1),
      // The program leads its own process group, so `none` captures can be ended as a whole.
      cwd: isolation === 'none' ? (req.cwd ?? process.cwd()) : '/',
      env: req.env,
      stdin: req.stdin ?? 'pipe',
      fds,
      data,
      // A sandbox dies with its first process; `none` leaves strays in the group: end them too.
      endGroupOnExit: isolation === 'none',
    });
    child.stdin?.on('error', () => undefined); // the program may exit without reading its input
    const { members, signalAll, exited } = supervise(child, isolation, identity);
    return {
      child,
      facts: { isolation, uid: identity.uid, gid: identity.gid, network, visible, writable },
      terminate: () => signalAll('SIGTERM'),
      kill: () => signalAll('SIGKILL'),
      members,
      started: new Promise<void>((resolve) => {
        child.once('spawn', resolve);
        child.once('error', () => resolve());
      }),
      exited,
    };
  }
}

/**
 * Follows a started program's processes: which are alive besides its first, a signal to all of
 * them, and its end (when its uid is given back).
 */
function supervise(child: ProgramChild, isolation: 'sandbox' | 'none', identity: Identity) {
  let over = false;
  child.once('exit', () => (over = true));
  child.once('error', () => (over = true));

  // bwrap's first process stays outside; its child is the sandbox's PID 1, and every
  // process the program forks lives in that namespace.
  // Learned only while the first process runs (pids are handed out in sequence: the one it had
  // is not another process's within the moment its exit report takes), and never the worker's
  // own namespace, which would be every process on the host.
  let sandboxed: { init: number; namespace: string } | undefined;
  const learnNamespace = () => {
    if (isolation !== 'sandbox' || child.pid === undefined || sandboxed || over) return;
    const init = childrenOf(child.pid)[0];
    const namespace = init === undefined ? undefined : pidNamespaceOf(init);
    if (!over && namespace && namespace !== OWN_PID_NAMESPACE) sandboxed = { init: init!, namespace };
  };
  const members = (): number[] => {
    if (child.pid === undefined) return [];
    learnNamespace();
    if (isolation === 'none') return liveGroupMembers(child.pid).filter((p) => p !== child.pid);
    return sandboxed ? liveNamespaceTree(sandboxed.init, sandboxed.namespace) : [];
  };
  const signalAll = (signal: NodeJS.Signals): void => {
    // Once the first process is gone, so is its sandbox (and the rest of its group was ended).
    if (over) return;
    // Asked before the launcher said it started: as soon as it has.
    if (child.pid === undefined) return void child.once('spawn', () => signalAll(signal));
    if (isolation === 'none') {
      signalGroup(child.pid, signal);
      return;
    }
    for (const pid of members()) signalProcess(pid, signal);
    if (signal === 'SIGKILL') child.kill(signal);
  };
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; error?: Error }>(
    (resolve) => {
      child.once('error', (error) => {
        identity.release();
        resolve({ code: null, signal: null, error });
      });
      child.once('exit', (code, signal) => {
        identity.release();
        resolve({ code, signal, ...(child.lostBecause ? { error: launcherLost(child.lostBecause) } : {}) });
      });
    },
  );
  // Learn the namespace while the program runs, to reach every process it forks.
  child.once('spawn', () => setImmediate(learnNamespace));
  return { members, signalAll, exited };
}

/** A program ended by the loss of the launcher that started it: the worker's fault, not the input's. */
function launcherLost(why: string): DossierError {
  return new DossierError(
    'provider_unavailable',
    `${why}; the program was killed with it.`,
    'Try again (a launch with a new idempotency_key): the next program starts from a new launcher. If it keeps happening, check the worker host (memory, process limits).',
    {},
    true,
  );
}

function limitArgs(limits: Limits | undefined): string[] {
  if (!limits) return [];
  const args: string[] = [];
  if (limits.addressSpaceBytes) args.push(`--as=${limits.addressSpaceBytes}`);
  if (limits.openFiles) args.push(`--nofile=${limits.openFiles}`);
  if (limits.processes) args.push(`--nproc=${limits.processes}`);
  if (limits.fileBytes) args.push(`--fsize=${limits.fileBytes}`);
  if (limits.cpuSeconds) args.push(`--cpu=${limits.cpuSeconds}`);
  return args.length ? [which('prlimit', 'util-linux'), ...args, '--'] : [];
}
