// What a team may keep on a worker's disk after its launches end. Each
// finished launch's workspace (kept DOSSIER_WORKSPACE_RETENTION_HOURS) and
// extraction output (kept until reclaimed) is recorded in the store with its
// size, under this disk's id; when the team's total on this disk passes
// DOSSIER_TEAM_WORKSPACE_BYTES, its oldest folders are reclaimed until it is
// back under: never another team's, never a running launch's (only finished
// launches are recorded), never the rootfs of an active emulated device. The
// Evidence of a reclaimed launch is untouched (it lives in the store), and a
// reclaimed output keeps its row, so whatever later asks for it is told so.
import { randomBytes } from 'node:crypto';
import { link, lstat, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { reclaimedBytes } from '../../metrics/metrics.ts';
import type { DeviceRecord } from '../../store/devices.ts';
import { outputReclaimed, type RetainedFolder } from '../../store/retained.ts';
import type { Store } from '../../store/store.ts';
import { diskBytes, finishWorkspace, outputOf, removeWorkspace } from './workspaces.ts';

/** A reclaim a worker began and did not finish (it died) is finished by a later sweep within this window. */
const UNFINISHED_RECLAIMS_MS = 7 * 24 * 3_600_000;

const exists = (p: string) =>
  lstat(p).then(
    () => true,
    () => false,
  );

/**
 * This disk's id: made once in DOSSIER_HOME (a folder is one disk; workers
 * that share a home share its bound, and separate homes are separate hosts).
 */
async function homeId(home: string): Promise<string> {
  const file = path.join(home, 'home-id');
  if (!(await exists(file))) {
    // Written whole beside it, then linked into place: of workers starting together, one id wins.
    const id = randomBytes(16).toString('hex');
    const staging = `${file}.${id}`;
    await mkdir(home, { recursive: true, mode: 0o700 });
    await writeFile(staging, id, { mode: 0o600 });
    await link(staging, file).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'EEXIST') throw err;
    });
    await rm(staging, { force: true });
  }
  const kept = (await readFile(file, 'utf8')).trim();
  if (!/^[0-9a-f]{32}$/.test(kept)) throw new Error(`${file} does not hold a disk id`);
  return kept;
}

export class TeamDisk {
  private id: Promise<string> | undefined;

  constructor(
    private readonly deps: {
      store: Pick<Store, 'retained' | 'devices'>;
      home: string;
      /** DOSSIER_TEAM_WORKSPACE_BYTES */
      boundBytes: number;
      retentionMs: number;
      log?: (line: string) => void;
    },
  ) {}

  private home(): Promise<string> {
    if (!this.id) {
      this.id = homeId(this.deps.home);
      // A disk that could not be read now is asked again next time.
      this.id.catch(() => (this.id = undefined));
    }
    return this.id;
  }

  /**
   * A launch of `team` finished in `workspace`: its workspace is marked
   * finished (or removed, with retention 0), what it keeps (the workspace, an
   * extraction's output) is recorded, and the team is brought back under its
   * bound on this disk.
   */
  async retain(team: string, launch: string, workspace: string): Promise<void> {
    const kept = await finishWorkspace(workspace, this.deps.retentionMs);
    const output = outputOf(this.deps.home, team, workspace);
    const at = new Date().toISOString();
    const folders: RetainedFolder[] = [];
    if (kept && (await exists(workspace)))
      folders.push({
        path: workspace,
        kind: 'workspace',
        bytes: await diskBytes([workspace, `${workspace}.trace`]),
        retained_at: at,
      });
    if (await exists(output))
      folders.push({ path: output, kind: 'output', bytes: await diskBytes([output]), retained_at: at });
    if (folders.length === 0) return;
    const home = await this.home();
    await this.deps.store.retained.record(home, team, launch, folders);
    await this.bound(home, team);
  }

  /** Reclaims the team's oldest folders on this disk until it keeps no more than the bound. */
  private async bound(home: string, team: string): Promise<void> {
    const { store, boundBytes } = this.deps;
    let total = await store.retained.total(home, team);
    if (total <= boundBytes) return;
    const rootfs = await store.devices.rootfsInUse(team);
    const inUse = (f: RetainedFolder) =>
      f.kind === 'output' && rootfs.some((r) => r === f.path || r.startsWith(`${f.path}/`));
    while (total > boundBytes) {
      // Every folder a device pins is among the first rootfs.length, so a page this long holds others if any are left.
      const folders = (await store.retained.oldest(home, team, rootfs.length + 64)).filter((f) => !inUse(f));
      if (folders.length === 0) return;
      for (const f of folders) {
        if (total <= boundBytes) return;
        // Claimed by one statement: a worker sharing this disk that got there first is removing it already.
        if (await store.retained.claim(home, f.path, new Date().toISOString()))
          await this.reclaim(home, team, f);
        total -= f.bytes;
      }
      total = await store.retained.total(home, team);
    }
  }

  private async reclaim(home: string, team: string, f: RetainedFolder) {
    if (f.kind === 'workspace') {
      await removeWorkspace(f.path);
      // Nothing reads a finished workspace: its row goes with it.
      await this.deps.store.retained.forget(home, f.path);
    } else {
      // The row stays, marked reclaimed: registering from the output, or a device on it, says why it is gone.
      await rm(f.path, { recursive: true, force: true });
    }
    reclaimedBytes.inc({ kind: f.kind }, f.bytes);
    this.deps.log?.(
      `dossier: reclaimed a finished launch's ${f.kind} (${f.bytes} bytes, kept since ${f.retained_at}): team ${team} passed DOSSIER_TEAM_WORKSPACE_BYTES=${this.deps.boundBytes} on this worker`,
    );
  }

  /**
   * The hourly check, after the retention sweep: folders gone from this disk
   * (a workspace past its retention, a folder an admin removed) are no longer
   * counted, and reclaims a dead worker began are finished.
   */
  async sweep(now = Date.now()): Promise<void> {
    const home = await this.home();
    const { retained } = this.deps.store;
    for (const kind of ['workspace', 'output'] as const)
      for (const f of await retained.held(home, kind))
        if (!(await exists(f.path))) await retained.forget(home, f.path);
    const since = new Date(now - UNFINISHED_RECLAIMS_MS).toISOString();
    for (const f of await retained.reclaimedSince(home, since)) {
      if (f.kind === 'workspace') {
        await removeWorkspace(f.path);
        await retained.forget(home, f.path);
      } else if (await exists(f.path)) {
        await rm(f.path, { recursive: true, force: true });
      }
    }
  }
}

/**
 * An emulated device's rootfs must still be on this worker: one whose
 * extraction output was reclaimed (before the device pinned it) is
 * device_unavailable, saying so.
 */
export async function rootfsKept(store: Pick<Store, 'retained'>, team: string, device: DeviceRecord) {
  const rootfs = String(device.config.rootfs);
  if (await exists(rootfs)) return;
  const folders: string[] = [];
  for (let p = rootfs; p !== path.dirname(p); p = path.dirname(p)) folders.push(p);
  const reclaimed = await store.retained.reclaimed(team, folders);
  const evidenceId = String(device.config.evidence_id);
  if (reclaimed)
    throw outputReclaimed(evidenceId, reclaimed.reclaimed_at, {
      code: 'device_unavailable',
      subject: `The rootfs of device ${device.device_id}, in the output of extraction ${evidenceId},`,
      details: { device: device.device_id },
    });
}
