// A device operation's session and turn: the session is opened first (an
// unknown host key or an unreachable device fails before anything is
// journaled); an operation that changes a device (MUTATING_DEVICE_TOOLS of
// src/tools/devices.ts) then waits its turn in the device's line, journals
// `started`, and keeps the turn alive while it runs.
import { whenAborted } from '../../domain/abort.ts';
import { DossierError } from '../../domain/errors.ts';
import type { DeviceSession, ExecResult } from '../../devices/device.ts';
import { openDevice } from '../../devices/open.ts';
import type { DeviceRecord } from '../../store/devices.ts';
import type { ToolContract } from '../../tools/contract.ts';
import { MUTATING_DEVICE_TOOLS } from '../../tools/devices.ts';
import type { EffectContext } from '../effect.ts';
import { rootfsKept } from '../workspaces/teamDisk.ts';

// Waiters ask the store again every POLL_MS (turns left on other workers); a
// turn left on this worker wakes its waiters at once.
const POLL_MS = 250;
const waiters = new Map<string, Set<() => void>>();

function nextChance(line: string): Promise<void> {
  return new Promise((resolve) => {
    const set = waiters.get(line) ?? new Set();
    waiters.set(line, set);
    const done = () => {
      clearTimeout(timer);
      set.delete(done);
      if (set.size === 0) waiters.delete(line);
      resolve();
    };
    const timer = setTimeout(done, POLL_MS);
    set.add(done);
  });
}

function wakeWaiters(line: string) {
  for (const wake of [...(waiters.get(line) ?? [])]) wake();
}

export interface DeviceInput {
  device: string;
}

export interface Turn {
  fencing: number | null;
  waited_ms: number;
  ahead_at_arrival: number;
}

async function registered(ctx: EffectContext, id: string): Promise<DeviceRecord> {
  const device = await ctx.store.devices.get(ctx.caller.team, id);
  if (!device) {
    throw new DossierError(
      'not_found',
      `Your team has no device ${id}.`,
      'list_devices shows your team’s devices.',
      {
        device: id,
      },
    );
  }
  if (device.status !== 'active') {
    throw new DossierError(
      'invalid_params',
      `Device ${id} was retired at ${device.retired_at}: it takes no new operation (its credential is erased); nothing was sent to it.`,
      'Its past launches and Evidence stay readable. If the device is back on the bench, register it under a new device_id (a retired id is never reused); list_devices shows your team’s active devices.',
      { device: id, status: device.status, retired_at: device.retired_at },
    );
  }
  return device;
}

/**
 * Runs `op` on a device: session first, then (mutating) the device's turn,
 * then the journal, then the operation, all within the launch's signal.
 */
export async function onDevice<T>(
  ctx: EffectContext,
  input: DeviceInput,
  tool: ToolContract,
  op: (session: DeviceSession, device: DeviceRecord, signal: AbortSignal) => Promise<T>,
): Promise<{ value: T; device: DeviceRecord; turn: Turn | null }> {
  const mutating = MUTATING_DEVICE_TOOLS.has(tool.name);
  const device = await registered(ctx, input.device);
  if (device.kind === 'emulated') await rootfsKept(ctx.store, ctx.caller.team, device);
  const credential = await ctx.store.devices.credential(ctx.caller.team, device.device_id);
  const session = await openDevice(
    {
      team: ctx.caller.team,
      device_id: device.device_id,
      kind: device.kind,
      config: device.config,
      credential,
    },
    { sandbox: ctx.sandbox, keys: ctx.keys },
  );
  const abort = new AbortController();
  const onCancel = () => abort.abort();
  const stopCancel = whenAborted(ctx.signal, onCancel);
  const turnId = `${ctx.launchId}#${ctx.attemptId}`;
  const line = `${ctx.caller.team}/${device.device_id}`;
  const { devices } = ctx.store;
  const aliveMs = ctx.config.deviceTurnMs;
  let keeper: NodeJS.Timeout | undefined;
  let lost = false;
  let turn: Turn | null = null;
  try {
    if (mutating) {
      const t0 = Date.now();
      await devices.arrive(turnId, ctx.caller.team, device.device_id, ctx.launchId, aliveMs);
      const aheadAtArrival = await devices.ahead(turnId, ctx.caller.team, device.device_id);
      let fencing: number | null = null;
      let lastAlive = Date.now();
      while (fencing === null) {
        if (ctx.signal.aborted)
          throw new DossierError(
            'cancelled',
            'The launch was cancelled while it waited for the device.',
            'Nothing was sent to the device.',
          );
        fencing = await devices.take(turnId, ctx.caller.team, device.device_id, aliveMs);
        if (fencing !== null) break;
        const position = await devices.ahead(turnId, ctx.caller.team, device.device_id);
        ctx.progress({
          phase: 'waiting_for_device',
          device: device.device_id,
          queue_position: position + 1,
          ahead: position,
        });
        if (Date.now() - lastAlive > aliveMs / 3) {
          await devices.keepAlive(turnId, aliveMs);
          lastAlive = Date.now();
        }
        await nextChance(line);
      }
      turn = { fencing, waited_ms: Date.now() - t0, ahead_at_arrival: aheadAtArrival };
      keeper = setInterval(() => {
        devices.keepAlive(turnId, aliveMs).then(
          (alive) => {
            if (!alive && !lost) {
              lost = true;
              abort.abort();
            }
          },
          () => undefined,
        );
      }, aliveMs / 3);
    }
    await ctx.begin();
    ctx.progress({ phase: 'on_device', device: device.device_id, fencing: turn?.fencing ?? null });
    const value = await op(session, device, abort.signal);
    // The device knows only that it was aborted; whether by a cancel or this worker's stop is known here.
    if (ctx.stopping() && isExecResult(value) && value.endedBy === 'cancel') value.endedBy = 'shutdown';
    if (lost) {
      throw new DossierError(
        'interrupted',
        `This worker lost its turn on device ${device.device_id} (its lease expired) while the operation ran; it was ended, and what it did is unknown.`,
        'Check the device, then launch again with a new idempotency_key if you still want the effect.',
        { device: device.device_id, fencing: turn?.fencing },
      );
    }
    return { value, device, turn };
  } finally {
    if (keeper) clearInterval(keeper);
    stopCancel();
    if (mutating) {
      await devices.leave(turnId).catch(() => undefined);
      wakeWaiters(line);
    }
    await session.close().catch(() => undefined);
  }
}

function isExecResult(value: unknown): value is ExecResult {
  return typeof value === 'object' && value !== null && 'endedBy' in value;
}
