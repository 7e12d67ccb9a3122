// Paths a caller names are opened first and checked after: the kernel says
// which file the descriptor really is (/proc/self/fd), so a link swapped in
// between a check and a use can never redirect the read. Never check a name
// and open it again.
import { constants } from 'node:fs';
import { lstat, open, readlink, realpath, type FileHandle } from 'node:fs/promises';
import type { Stats } from 'node:fs';
import path from 'node:path';
import { DossierError } from '../domain/errors.ts';

export interface OpenedFile {
  handle: FileHandle;
  /** The path of the file that was opened, as the kernel names it. */
  real: string;
  stat: Stats;
}

export function isUnder(file: string, root: string): boolean {
  return file === root || file.startsWith(root.endsWith('/') ? root : `${root}/`);
}

/**
 * Opens a regular file the caller named and proves it lies under one of
 * `roots`; otherwise `not_found` (nothing there) or `policy_denied`.
 * `setting` names the configuration that lists the roots, for the remediation.
 */
export async function openUnder(file: string, roots: string[], setting: string): Promise<OpenedFile> {
  if (!path.isAbsolute(file) || file.includes('\0')) {
    throw new DossierError(
      'invalid_params',
      `${JSON.stringify(file)} is not an absolute path.`,
      'Pass an absolute path without NUL bytes.',
    );
  }
  const realRoots = await Promise.all(roots.map((r) => realpath(r).catch(() => r)));
  const outside = () =>
    new DossierError(
      'policy_denied',
      `${file} is outside the folders this tool may read.`,
      `Use a file under one of ${roots.join(', ') || '(none configured)'} (${setting}).`,
      { path: file, roots },
    );
  let handle: FileHandle;
  try {
    // O_NONBLOCK: a FIFO swapped in must not hang the open; O_NOCTTY: a terminal never becomes ours.
    handle = await open(file, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
  } catch (err) {
    // Where the kernel stopped lies outside every root (another team's inbox, /etc, through a link
    // or `..`): the same refusal as for a file that is there, saying nothing of what is missing or
    // unreadable.
    const reached = await whereOpenStopped(file);
    if (!realRoots.some((root) => isUnder(reached, root))) throw outside();
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EACCES' || code === 'EPERM') {
      throw new DossierError(
        'policy_denied',
        `${file} may not be read.`,
        'Use a file the workers can read.',
        {
          path: file,
        },
      );
    }
    throw new DossierError('not_found', `No file at ${file}.`, 'Check the path on the dossier host.', {
      path: file,
    });
  }
  try {
    const real = await readlink(`/proc/self/fd/${handle.fd}`);
    if (real.endsWith(' (deleted)') || !realRoots.some((root) => isUnder(real, root))) throw outside();
    const stat = await handle.stat();
    if (!stat.isFile()) {
      throw new DossierError(
        'unsupported_target',
        `${file} is not a regular file.`,
        'Name a file, not a folder, device or pipe.',
        { path: file, resolved: real },
      );
    }
    return { handle, real, stat };
  } catch (err) {
    await handle.close();
    throw err;
  }
}

/**
 * Where an open of `file` that failed stopped, as the kernel resolves it:
 * the real folder that holds the missing or unreadable name, following a
 * final link to its target (a dangling link stops where its target would
 * be). Names are cut at their last components, never normalized first.
 */
async function whereOpenStopped(file: string): Promise<string> {
  let name = file;
  for (let hops = 0; hops < 40; hops++) {
    const folder = await deepestReal(name);
    const st = await lstat(name).catch(() => undefined);
    if (!st?.isSymbolicLink()) return folder;
    const target = await readlink(name);
    name = path.isAbsolute(target) ? target : `${folder}/${target}`;
  }
  return '/'; // a loop of links: nowhere under a root
}

/** The real path of the deepest existing folder of `file` (the kernel resolving links and `..`). */
async function deepestReal(file: string): Promise<string> {
  for (let dir = path.dirname(file); ; dir = path.dirname(dir)) {
    try {
      return await realpath(dir);
    } catch {
      if (dir === '/') return '/';
    }
  }
}
