// Launch workspaces on disk: how much one holds while its program runs, and
// the stated policy that reclaims them. A workspace (and its `.trace` folder)
// is kept DOSSIER_WORKSPACE_RETENTION_HOURS after its launch finished, then
// removed; one whose worker died without finishing it is removed a week after
// it was made. The clocks are stamps beside the workspace (`.made`, `.done`),
// in the launch's root-owned folder where no program can touch them; a
// program owns only its workspace, and by the time one is swept no program of
// it runs (the sandbox ends them all with their first process or worker).
// What a team keeps in all is bounded too (teamDisk.ts).
import { execFile } from 'node:child_process';
import { lstat, mkdir, readdir, readlink, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';

/** Where an extraction run in `workspace` for `team` leaves its output (a folder of its own, made whole). */
export function outputOf(home: string, team: string, workspace: string): string {
  return path.join(
    home,
    'extractions',
    team,
    path.basename(path.dirname(workspace)),
    path.basename(workspace),
  );
}

/** Makes a launch's workspace (never an existing one) and stamps when. */
export async function makeWorkspace(workspace: string): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    await mkdir(path.dirname(workspace), { recursive: true, mode: 0o700 });
    try {
      await mkdir(workspace); // fails if it exists: a workspace is never shared
      break;
    } catch (err) {
      // A sweep removed the (empty) launch folder between the two mkdirs: make it again.
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT' || attempt > 2) throw err;
    }
  }
  await writeFile(`${workspace}.made`, '');
}

/** How long one `du` may take; one that does not finish leaves the size unknown, which counts as over. */
const DU_TIMEOUT_MS = 10_000;

/**
 * Disk under a folder, allocated bytes or entries, links never followed (GNU du's fts: no symlink
 * race): 0 for a folder that is not there, or why du could not say (it failed, or did not finish
 * in time): a folder that cannot be measured is never taken for an empty one.
 */
async function du(dir: string, what: '-B1' | '--inodes', timeoutMs: number): Promise<number | string> {
  const missing = await lstat(dir).then(
    () => false,
    (err: NodeJS.ErrnoException) =>
      err.code === 'ENOENT' ? true : `it could not be looked at (${err.code})`,
  );
  if (missing !== false) return missing === true ? 0 : missing;
  return new Promise((resolve) => {
    execFile('/usr/bin/du', ['-s', '-P', '-x', what, dir], { timeout: timeoutMs }, (err, stdout) => {
      const measured = /^(\d+)\t/.exec(stdout)?.[1];
      if (!err && measured !== undefined) return resolve(Number(measured));
      resolve(
        err?.killed
          ? `du did not finish within ${timeoutMs} ms`
          : `du failed${typeof err?.code === 'number' ? ` with exit status ${err.code}` : ''}`,
      );
    });
  });
}

/**
 * Bytes held by files that are gone from every folder (unlinked) but that a
 * process still has open or mapped (a mapping outlives its descriptor); each
 * file counted once.
 */
async function unlinkedHeldBytes(pids: number[], maxLinks = 100_000): Promise<number> {
  const held = new Map<string, number>();
  let seen = 0;
  for (const pid of pids) {
    for (const kind of ['fd', 'map_files']) {
      const dir = `/proc/${pid}/${kind}`;
      for (const name of await readdir(dir).catch(() => [] as string[])) {
        // More than can be looked at: what was not looked at could hold anything. Over.
        if (++seen > maxLinks) return Number.POSITIVE_INFINITY;
        const target = await readlink(`${dir}/${name}`).catch(() => '');
        if (!target.endsWith(' (deleted)')) continue;
        const st = await stat(`${dir}/${name}`).catch(() => undefined);
        if (st?.isFile()) held.set(`${st.dev}:${st.ino}`, st.blocks * 512);
      }
    }
  }
  return total(held);
}

function total(sizes: Map<string, number>): number {
  let sum = 0;
  for (const bytes of sizes.values()) sum += bytes;
  return sum;
}

/**
 * Disk a running program uses: its workspace and its tracer's folder, plus
 * files it holds open or mapped after unlinking them; `over` once past the
 * bounds, or when the folders could not be measured (`unmeasured` says why).
 */
export async function workspaceUsage(
  workspace: string,
  pids: number[],
  maxBytes: number,
  maxEntries = 200_000,
  duTimeoutMs = DU_TIMEOUT_MS,
): Promise<{ bytes: number; entries: number; over: boolean; unmeasured?: string }> {
  const folders = [workspace, `${workspace}.trace`];
  const [sizes, counts, hidden] = await Promise.all([
    Promise.all(folders.map((f) => du(f, '-B1', duTimeoutMs))),
    Promise.all(folders.map((f) => du(f, '--inodes', duTimeoutMs))),
    unlinkedHeldBytes(pids),
  ]);
  const sum = (values: (number | string)[]) =>
    values.reduce((a: number, b) => a + (typeof b === 'number' ? b : 0), 0);
  const bytes = sum(sizes) + hidden;
  const entries = sum(counts);
  const unmeasured = [...sizes, ...counts].find((v) => typeof v === 'string');
  if (unmeasured !== undefined) return { bytes, entries, over: true, unmeasured };
  return { bytes, entries, over: bytes > maxBytes || entries > maxEntries };
}

/**
 * Allocated bytes under some folders (or files), as `du -B1` counts them:
 * links never followed, a file with several links counted once. A small tree
 * is walked here (no process to start); a large one is left to du, ten times
 * faster, and walked after all if du fails (never counted as nothing).
 */
export async function diskBytes(roots: string[], walkUpTo = 2_000): Promise<number> {
  return (
    (await walkBytes(roots, walkUpTo)) ??
    (await duTotal(roots)) ??
    (await walkBytes(roots, Number.POSITIVE_INFINITY))!
  );
}

/** Bytes under `roots`, or undefined once more than `limit` entries were seen. */
async function walkBytes(roots: string[], limit: number): Promise<number | undefined> {
  const seen = new Set<string>();
  let bytes = 0;
  let entries = 0;
  const visit = async (p: string): Promise<void> => {
    if (++entries > limit) return;
    const st = await lstat(p).catch(() => undefined);
    if (!st) return;
    if (st.nlink > 1 && !st.isDirectory()) {
      const id = `${st.dev}:${st.ino}`;
      if (seen.has(id)) return;
      seen.add(id);
    }
    bytes += st.blocks * 512;
    if (!st.isDirectory()) return;
    const names = await readdir(p).catch(() => [] as string[]);
    // A few at a time: a tree of 100,000 entries must not open them all at once.
    for (let i = 0; i < names.length && entries <= limit; i += 64)
      await Promise.all(names.slice(i, i + 64).map((n) => visit(path.join(p, n))));
  };
  for (const root of roots) await visit(root);
  return entries > limit ? undefined : bytes;
}

/** du's total over the roots that exist, or undefined when it fails. */
async function duTotal(roots: string[]): Promise<number | undefined> {
  const present = (
    await Promise.all(
      roots.map((r) =>
        lstat(r).then(
          () => r,
          () => null,
        ),
      ),
    )
  ).filter((r) => r !== null);
  if (present.length === 0) return 0;
  return new Promise((resolve) => {
    execFile(
      '/usr/bin/du',
      ['-s', '-c', '-P', '-x', '-B1', '--', ...present],
      { timeout: 120_000 },
      (err, stdout) => {
        const total = /^(\d+)\ttotal$/m.exec(stdout)?.[1];
        resolve(err || total === undefined ? undefined : Number(total));
      },
    );
  });
}

/**
 * Marks a workspace finished: the retention clock starts now (or it goes at
 * once); true when it is kept. A registered executable's private copy
 * (`.bin`) goes at once: the artifact store keeps its bytes.
 */
export async function finishWorkspace(workspace: string, retentionMs: number): Promise<boolean> {
  await rm(`${workspace}.bin`, { recursive: true, force: true }).catch(() => undefined);
  if (retentionMs === 0) {
    await removeWorkspace(workspace);
    return false;
  }
  await writeFile(`${workspace}.done`, '').catch(() => undefined);
  return true;
}

/** Removes a workspace with everything beside it (its tracer's folder, its executable's copy, its stamps). */
export async function removeWorkspace(workspace: string) {
  for (const p of [
    workspace,
    `${workspace}.trace`,
    `${workspace}.bin`,
    `${workspace}.done`,
    `${workspace}.made`,
  ])
    await rm(p, { recursive: true, force: true }).catch(() => undefined);
}

const ORPHAN_AFTER_MS = 7 * 24 * 3_600_000;
/** An empty launch folder is removed only this long after it last changed (a launch may be making one). */
const EMPTY_FOLDER_MS = 3_600_000;
const STAMPS = /\.(done|made|trace|bin)$/;

/** Removes workspaces past their retention, and orphans; returns how many went. */
export async function sweepWorkspaces(home: string, retentionMs: number, now = Date.now()): Promise<number> {
  const root = path.join(home, 'workspaces');
  let removed = 0;
  for (const launch of await readdir(root).catch(() => [] as string[])) {
    const dir = path.join(root, launch);
    const names = await readdir(dir).catch(() => [] as string[]);
    for (const name of names) {
      if (STAMPS.test(name)) continue;
      const workspace = path.join(dir, name);
      const [done, made, self] = await Promise.all(
        [`${workspace}.done`, `${workspace}.made`, workspace].map((p) => lstat(p).catch(() => undefined)),
      );
      if (!self?.isDirectory()) continue;
      // Without a stamp (made before stamps were kept), the folder's own time, which only its program could change.
      const expired = done
        ? now - done.mtimeMs > retentionMs
        : now - (made ?? self).mtimeMs > ORPHAN_AFTER_MS;
      if (!expired) continue;
      await removeWorkspace(workspace);
      removed++;
    }
    const left = await readdir(dir).catch(() => ['?']);
    const folder = await lstat(dir).catch(() => undefined);
    if (left.length === 0 && folder && now - folder.mtimeMs > EMPTY_FOLDER_MS)
      await rm(dir, { recursive: true, force: true });
  }
  return removed;
}
