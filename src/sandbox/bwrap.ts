// The view bubblewrap gives a sandboxed program: /usr, a handful of /etc
// files, the policy's read-only paths, a private /tmp, the caller's mounts,
// names for its own uid only, and the seccomp filter that keeps it from the
// kernel's keyrings. Everything else of the host stays out of sight.
import { existsSync } from 'node:fs';
import path from 'node:path';
import type { Identity } from './identities.ts';
import type { PipeContent } from './launcher.ts';
import type { SandboxPolicy, SandboxRequest } from './request.ts';
import { keyCallFilterBytes } from './seccomp.ts';

/** What a program needs from /etc to run: loader, names, time zone, file magic, tracer prototypes. */
export const SYSTEM_ETC = [
  'alternatives',
  'ld.so.cache',
  'ld.so.conf',
  'ld.so.conf.d',
  'localtime',
  'timezone',
  'nsswitch.conf',
  'magic',
  'magic.mime',
  'mime.types',
  'ltrace.conf',
  'os-release',
  'debian_version',
  'protocols',
  'services',
];
/** Only with network: name resolution and certificates. */
const NETWORK_ETC = ['resolv.conf', 'hosts', 'host.conf', 'gai.conf', 'ssl', 'ca-certificates'];

export interface BwrapView {
  /** bwrap's arguments, before `--` and the program. */
  args: string[];
  /** What the program sees besides /usr and SYSTEM_ETC, and what it may write. */
  visible: string[];
  writable: string[];
}

/**
 * bwrap's arguments for one program. Mounted descriptors are appended to `fds` and
 * generated files (passwd, group, the seccomp filter) to `data`: bwrap reads them as
 * the descriptors that follow stdin, stdout and stderr, in that order.
 */
export function bwrapView(o: {
  policy: SandboxPolicy;
  req: SandboxRequest;
  identity: Identity;
  network: boolean;
  /** Whether the worker is root (then the program's uid is set by setpriv, inside). */
  root: boolean;
  fds: number[];
  data: PipeContent[];
}): BwrapView {
  const { policy, req, identity, network, root, fds, data } = o;
  const bwrap: string[] = [];
  const visible: string[] = [];
  const writable: string[] = [];
  bwrap.push(
    ...(root
      ? ['--unshare-ipc', '--unshare-pid', '--unshare-uts', '--unshare-cgroup-try']
      : ['--unshare-all', '--disable-userns']),
    ...(network ? ['--share-net'] : root ? ['--unshare-net'] : []),
    '--die-with-parent',
    '--new-session',
    '--ro-bind',
    '/usr',
    '/usr',
  );
  for (const link of ['bin', 'sbin', 'lib', 'lib64', 'lib32', 'libx32']) {
    if (existsSync(`/usr/${link}`)) bwrap.push('--symlink', `usr/${link}`, `/${link}`);
  }
  // bwrap makes missing parents 0700 (root's): make them traversable first.
  const made = new Set(['/', '/usr', '/proc', '/dev', '/tmp']);
  const parents = (dest: string) => {
    const chain: string[] = [];
    for (let dir = path.dirname(dest); !made.has(dir); dir = path.dirname(dir)) chain.unshift(dir);
    for (const dir of chain) {
      if (policy.readOnlyPaths.some((ro) => dir === ro || dir.startsWith(`${ro}/`))) continue;
      made.add(dir);
      bwrap.push('--perms', '0755', '--dir', dir);
    }
  };
  for (const entry of [...SYSTEM_ETC, ...(network ? NETWORK_ETC : [])]) {
    if (!existsSync(`/etc/${entry}`)) continue;
    parents(`/etc/${entry}`);
    bwrap.push('--ro-bind', `/etc/${entry}`, `/etc/${entry}`);
  }
  for (const extra of policy.readOnlyPaths) {
    if (!existsSync(extra)) continue;
    parents(extra);
    bwrap.push('--ro-bind', extra, extra);
    visible.push(extra);
  }
  bwrap.push('--proc', '/proc', '--dev', '/dev');
  bwrap.push('--perms', '1777', '--size', String(req.tmpBytes ?? policy.tmpBytes), '--tmpfs', '/tmp');
  if (req.shmBytes) bwrap.push('--perms', '1777', '--size', String(req.shmBytes), '--tmpfs', '/dev/shm');
  for (const m of req.mounts ?? []) {
    const inside = m.inside ?? (typeof m.host === 'string' ? m.host : undefined);
    if (!inside) throw new Error('a mount of a file descriptor needs its inside path');
    if (!inside.startsWith('/usr/')) parents(inside);
    if (typeof m.host === 'number') {
      fds.push(m.host);
      bwrap.push(m.writable ? '--bind-fd' : '--ro-bind-fd', String(2 + fds.length), inside);
    } else {
      bwrap.push(m.writable ? '--bind' : '--ro-bind', m.host, inside);
    }
    (m.writable ? writable : visible).push(inside);
  }
  // Names for the uids a program meets (getpwuid must not fail for its own uid), nothing of the host's.
  const names = {
    '/etc/passwd': `root:x:0:0:root:/root:/usr/sbin/nologin\nsandbox:x:${identity.uid}:${identity.gid}:dossier sandbox:/tmp:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n`,
    '/etc/group': `root:x:0:\nsandbox:x:${identity.gid}:\nnogroup:x:65534:\n`,
  };
  for (const [file, content] of Object.entries(names)) {
    data.push(content);
    bwrap.push('--perms', '0444', '--ro-bind-data', String(3 + fds.length + data.length - 1), file);
  }
  // No kernel keys: a key outlives the program under its uid, which the next launch may be leased.
  const filter = keyCallFilterBytes();
  if (filter) {
    data.push({ base64: filter.toString('base64') });
    bwrap.push('--seccomp', String(3 + fds.length + data.length - 1));
  }
  if (req.cwd) bwrap.push('--chdir', req.cwd);
  return { args: bwrap, visible, writable };
}
