// Launch workspaces on disk: how much one holds while its program runs, and
// the stated policy that reclaims them. A workspace (and its `.trace` folder)
// is kept DOSSIER_WORKSPACE_RETENTION_HOURS after its launch finished (the
// `.done` stamp beside it), then removed; one whose worker died without
// finishing it is removed a week after it was made.
import { lstat, readdir, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';

/** Disk a workspace uses (allocated blocks, links not followed), or `over` once past `maxBytes` or `maxEntries`. */
export async function workspaceUsage(
  dir: string,
  maxBytes: number,
  maxEntries = 200_000,
): Promise<{ bytes: number; entries: number; over: boolean }> {
  let bytes = 0;
  let entries = 0;
  const pending = [dir];
  while (pending.length) {
    const current = pending.pop()!;
    let names: string[];
    try {
      names = await readdir(current);
    } catch {
      continue; // gone, or not a folder any more: the program is racing us, and loses nothing
    }
    for (const name of names) {
      const full = path.join(current, name);
      const st = await lstat(full).catch(() => undefined);
      if (!st) continue;
      entries++;
      bytes += st.blocks * 512;
      if (bytes > maxBytes || entries > maxEntries) return { bytes, entries, over: true };
      if (st.isDirectory()) pending.push(full);
    }
  }
  return { bytes, entries, over: false };
}

/** Marks a workspace finished: the retention clock starts now (or it goes at once). */
export async function finishWorkspace(workspace: string, retentionMs: number): Promise<void> {
  if (retentionMs === 0) return removeWorkspace(workspace);
  await writeFile(`${workspace}.done`, '').catch(() => undefined);
}

async function removeWorkspace(workspace: string) {
  for (const p of [workspace, `${workspace}.trace`, `${workspace}.done`])
    await rm(p, { recursive: true, force: true }).catch(() => undefined);
}

const ORPHAN_AFTER_MS = 7 * 24 * 3_600_000;

/** Removes workspaces past their retention, and orphans; returns how many went. */
export async function sweepWorkspaces(home: string, retentionMs: number, now = Date.now()): Promise<number> {
  const root = path.join(home, 'workspaces');
  let removed = 0;
  for (const launch of await readdir(root).catch(() => [] as string[])) {
    const dir = path.join(root, launch);
    const names = await readdir(dir).catch(() => [] as string[]);
    for (const name of names) {
      if (name.endsWith('.done') || name.endsWith('.trace')) continue;
      const workspace = path.join(dir, name);
      const done = await stat(`${workspace}.done`).catch(() => undefined);
      const made = await stat(workspace).catch(() => undefined);
      const expired = done
        ? now - done.mtimeMs > retentionMs
        : made !== undefined && now - made.mtimeMs > ORPHAN_AFTER_MS;
      if (!expired) continue;
      await removeWorkspace(workspace);
      removed++;
    }
    if ((await readdir(dir).catch(() => ['?'])).length === 0) await rm(dir, { recursive: true, force: true });
  }
  return removed;
}
