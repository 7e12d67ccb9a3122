// The team's devices, and the turns that put operations on one device in a
// single line across the cluster: an operation arrives, waits until it is the
// oldest waiting turn and nobody holds the device, then holds it with a
// fencing token; every turn must keep itself alive, so a turn whose worker
// died expires and the line moves on.
import type { DeviceKind } from '../domain/devices.ts';
import type { Page } from '../domain/types.ts';
import { now, pageBy, teamFilter, type Row } from './rows.ts';
import { addCandidates } from './candidates.ts';
import type { SqlDriver } from './sql.ts';

export type { DeviceKind };

export interface DeviceRecord {
  device_id: string;
  kind: DeviceKind;
  description: string | null;
  /** Connection facts, never the credential. */
  config: Record<string, unknown>;
  config_digest: string;
  status: 'active' | 'retired';
  registered_by: string;
  created_at: string;
  retired_at: string | null;
}

function toDevice(r: Row): DeviceRecord {
  return {
    device_id: r.device_id as string,
    kind: r.kind as DeviceKind,
    description: (r.description as string | null) ?? null,
    config: JSON.parse(r.config as string) as Record<string, unknown>,
    config_digest: r.config_digest as string,
    status: r.status as DeviceRecord['status'],
    registered_by: r.registered_by as string,
    created_at: r.created_at as string,
    retired_at: (r.retired_at as string | null) ?? null,
  };
}

const later = (ms: number) => new Date(Date.now() + ms).toISOString();

export class DeviceStore {
  constructor(private readonly db: SqlDriver) {}

  /** Registers a device unless its id is taken; returns the record that holds the id. */
  async register(
    team: string,
    d: Omit<DeviceRecord, 'status' | 'created_at' | 'retired_at'> & { credential: string | null },
  ): Promise<{ created: boolean; device: DeviceRecord }> {
    const info = await this.db.run(
      `INSERT INTO devices (team, device_id, kind, description, config, config_digest, credential, status, registered_by, created_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, 'active', ?, ?) ON CONFLICT DO NOTHING`,
      [
        team,
        d.device_id,
        d.kind,
        d.description,
        JSON.stringify(d.config),
        d.config_digest,
        d.credential,
        d.registered_by,
        now(),
      ],
    );
    if (info.changes === 1) await addCandidates(this.db, team, [['device', '', d.device_id]]);
    return { created: info.changes === 1, device: (await this.get(team, d.device_id))! };
  }

  async get(team: string, deviceId: string): Promise<DeviceRecord | undefined> {
    const r = await this.db.get<Row>('SELECT * FROM devices WHERE team = ? AND device_id = ?', [
      team,
      deviceId,
    ]);
    return r ? toDevice(r) : undefined;
  }

  /** The sealed credential of an active device (workers open it; nothing returns it to callers). */
  async credential(team: string, deviceId: string): Promise<string | null> {
    const r = await this.db.get<Row>(
      "SELECT credential FROM devices WHERE team = ? AND device_id = ? AND status = 'active'",
      [team, deviceId],
    );
    return (r?.credential as string | null | undefined) ?? null;
  }

  async list(
    team: string,
    f: { includeRetired: boolean; cursor?: string; limit: number },
  ): Promise<Page<DeviceRecord>> {
    const { where, args } = teamFilter(team, []);
    if (!f.includeRetired) where.push("status = 'active'");
    return pageBy(this.db, 'devices', where, args, f, 'device_id', toDevice, (d) => [
      d.created_at,
      d.device_id,
    ]);
  }

  /** The rootfs folders the team's active emulated devices run on (kept while a device may use them). */
  async rootfsInUse(team: string): Promise<string[]> {
    const rows = await this.db.all<Row>(
      "SELECT config FROM devices WHERE team = ? AND kind = 'emulated' AND status = 'active'",
      [team],
    );
    return rows
      .map((r) => (JSON.parse(r.config as string) as { rootfs?: unknown }).rootfs)
      .filter((rootfs): rootfs is string => typeof rootfs === 'string');
  }

  /** Retires a device and erases its credential; false when there was no active device of that id. */
  async retire(team: string, deviceId: string): Promise<boolean> {
    const info = await this.db.run(
      "UPDATE devices SET status = 'retired', credential = NULL, retired_at = ? WHERE team = ? AND device_id = ? AND status = 'active'",
      [now(), team, deviceId],
    );
    return info.changes === 1;
  }

  // ── turns ───────────────────────────────────────────────────────────────

  /** Joins the line for a device. */
  async arrive(
    turnId: string,
    team: string,
    deviceId: string,
    launch: string,
    aliveMs: number,
  ): Promise<void> {
    await this.db.run(
      `INSERT INTO device_turns (turn_id, team, device_id, launch, arrived_at, state, alive_until)
       VALUES (?, ?, ?, ?, ?, 'waiting', ?) ON CONFLICT DO NOTHING`,
      [turnId, team, deviceId, launch, now(), later(aliveMs)],
    );
  }

  /** Takes the device when this turn is first in line and nobody holds it; returns the fencing token, or null. */
  async take(turnId: string, team: string, deviceId: string, aliveMs: number): Promise<number | null> {
    return this.db.transaction(async (tx) => {
      // PostgreSQL: one taker per device at a time (SQLite transactions are serialized already).
      if (this.db.dialect === 'postgres')
        await tx.run('SELECT pg_advisory_xact_lock(hashtext(?))', [`${team}/${deviceId}`]);
      const at = now();
      await tx.run(
        `UPDATE device_turns SET state = 'expired'
         WHERE team = ? AND device_id = ? AND state IN ('waiting', 'holding') AND alive_until <= ?`,
        [team, deviceId, at],
      );
      const holder = await tx.get<Row>(
        "SELECT turn_id FROM device_turns WHERE team = ? AND device_id = ? AND state = 'holding' LIMIT 1",
        [team, deviceId],
      );
      if (holder) return null;
      const first = await tx.get<Row>(
        `SELECT turn_id FROM device_turns WHERE team = ? AND device_id = ? AND state = 'waiting'
         ORDER BY arrived_at, turn_id LIMIT 1`,
        [team, deviceId],
      );
      if (first?.turn_id !== turnId) return null;
      const last = await tx.get<Row>(
        'SELECT COALESCE(MAX(fencing), 0) AS n FROM device_turns WHERE team = ? AND device_id = ?',
        [team, deviceId],
      );
      const fencing = Number(last?.n ?? 0) + 1;
      await tx.run(
        "UPDATE device_turns SET state = 'holding', fencing = ?, alive_until = ? WHERE turn_id = ? AND state = 'waiting'",
        [fencing, later(aliveMs), turnId],
      );
      return fencing;
    });
  }

  /** Turns ahead of this one (holding or waiting, alive). */
  async ahead(turnId: string, team: string, deviceId: string): Promise<number> {
    const r = await this.db.get<Row>(
      `SELECT COUNT(*) AS n FROM device_turns t, device_turns me
       WHERE me.turn_id = ? AND t.team = ? AND t.device_id = ? AND t.turn_id <> me.turn_id
         AND t.state IN ('waiting', 'holding') AND t.alive_until > ?
         AND (t.state = 'holding' OR t.arrived_at < me.arrived_at OR (t.arrived_at = me.arrived_at AND t.turn_id < me.turn_id))`,
      [turnId, team, deviceId, now()],
    );
    return Number(r?.n ?? 0);
  }

  /** Keeps a turn alive; false when it expired (its hold is gone: stop at once). */
  async keepAlive(turnId: string, aliveMs: number): Promise<boolean> {
    const info = await this.db.run(
      "UPDATE device_turns SET alive_until = ? WHERE turn_id = ? AND state IN ('waiting', 'holding') AND alive_until > ?",
      [later(aliveMs), turnId, now()],
    );
    return info.changes === 1;
  }

  async leave(turnId: string): Promise<void> {
    await this.db.run("UPDATE device_turns SET state = 'done' WHERE turn_id = ?", [turnId]);
  }
}
