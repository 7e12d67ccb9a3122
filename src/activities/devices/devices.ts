// The device effects. Each opens a session on the device first (an unknown
// host key or an unreachable device fails before anything is journaled),
// then, for operations that change a device, waits its turn in the device's
// line (reporting waiting_for_device and its position), journals `started`,
// and only then sends the operation. The turn is kept alive while it runs;
// if it is lost (this worker stalled past the lease), the operation is ended.
import path from 'node:path';
import { DossierError } from '../../domain/errors.ts';
import type { NewUnknown } from '../../domain/types.ts';
import type { CappedOutput, DeviceSession, ExecResult } from '../../devices/device.ts';
import { openDevice } from '../../devices/open.ts';
import { detectType, storeArtifact } from '../../evidence/artifacts.ts';
import type { DeviceRecord } from '../../store/devices.ts';
import { lineRows } from '../capture/capture.ts';
import type { Effect, EffectContext } from '../effect.ts';
import { verifiedArtifact } from '../policy.ts';
import { rootfsKept } from '../workspaces/teamDisk.ts';
import { execDocument, execStatus, outputLimitations } from './deviceResults.ts';
import { whenAborted } from '../../domain/abort.ts';

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
const HEAD_CHARS = 512;

interface DeviceInput {
  device: string;
}

interface Turn {
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
async function onDevice<T>(
  ctx: EffectContext,
  input: DeviceInput,
  mutating: boolean,
  op: (session: DeviceSession, device: DeviceRecord, signal: AbortSignal) => Promise<T>,
): Promise<{ value: T; device: DeviceRecord; turn: Turn | null }> {
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

export const deviceExec: Effect<
  DeviceInput & {
    argv: string[];
    env: Record<string, string>;
    stdin?: string;
    timeout_ms: number;
    max_output_bytes: number;
  }
> = async (input, ctx) => {
  const {
    value: r,
    device,
    turn,
  } = await onDevice(ctx, input, true, (session, _d, signal) =>
    session.exec({
      argv: input.argv,
      env: input.env,
      stdin: input.stdin,
      timeoutMs: input.timeout_ms,
      maxOutputBytes: input.max_output_bytes,
      signal,
    }),
  );
  const limitations = outputLimitations(r, input.max_output_bytes, input.timeout_ms);
  const out = r.stdout.text();
  const err = r.stderr.text();
  return {
    status: execStatus(r),
    document: {
      device: device.device_id,
      kind: device.kind,
      argv: input.argv,
      env_names: Object.keys(input.env).sort(),
      turn,
      ...execDocument(r),
    },
    collections: {
      stdout: lineRows(out, ctx.config.maxCollectionRows + 1),
      stderr: lineRows(err, ctx.config.maxCollectionRows + 1),
    },
    summary: {
      device: device.device_id,
      exit_code: r.code,
      signal: r.signal,
      ended_by: r.endedBy,
      duration_ms: r.durationMs,
      stdout_head: out.slice(0, HEAD_CHARS),
      stderr_head: err.slice(0, HEAD_CHARS),
    },
    truncated: limitations.some((l) => l.includes('capped')),
    limitations,
    target: { path: `device:${device.device_id}` },
  };
};

export const devicePull: Effect<DeviceInput & { path: string; max_bytes: number }> = async (input, ctx) => {
  const { value, device } = await onDevice(ctx, input, false, async (session, _d, signal) => {
    const { kind, stream } = await session.pull(input.path, signal);
    const stored = await storeArtifact(
      ctx.config.home,
      stream,
      input.max_bytes,
      ctx.store.blobs,
      ctx.caller.team,
    );
    return { kind, stored };
  });
  const type = await detectType(ctx.sandbox, value.stored.file);
  const name = `${path.posix.basename(input.path) || 'root'}${value.kind === 'dir' ? '.tar' : ''}`;
  const { artifact } = await ctx.store.artifacts.put(ctx.caller.team, {
    digest: value.stored.digest,
    size: value.stored.size,
    ...type,
    name,
    origin: `device:${device.device_id}:${input.path}`,
    registered_by: ctx.caller.principal,
    provenance: null,
    created_at: new Date().toISOString(),
  });
  const summary = {
    device: device.device_id,
    path: input.path,
    kind: value.kind,
    artifact: artifact.digest,
    size: artifact.size,
    mime_type: artifact.mime_type,
  };
  return {
    status: 'succeeded',
    document: { ...summary, artifact_record: artifact },
    collections: {},
    summary,
    truncated: false,
    limitations: value.kind === 'dir' ? ['the folder was pulled as a tar made on the device'] : [],
    target: { path: `device:${device.device_id}:${input.path}`, digest: artifact.digest },
  };
};

export const devicePush: Effect<
  DeviceInput & { artifact: string; path: string; mode: string; overwrite: boolean }
> = async (input, ctx) => {
  const { file } = await verifiedArtifact(ctx, input.artifact);
  const mode = Number.parseInt(input.mode, 8);
  const { device, turn } = await onDevice(ctx, input, true, (session) =>
    session.push(file, input.path, mode, input.overwrite),
  );
  const summary = {
    device: device.device_id,
    path: input.path,
    artifact: input.artifact,
    mode: input.mode,
    overwrite: input.overwrite,
  };
  return {
    status: 'succeeded',
    document: { ...summary, turn },
    collections: {},
    summary,
    truncated: false,
    limitations: [],
    target: { digest: input.artifact, path: `device:${device.device_id}:${input.path}` },
  };
};

export const deviceInstallPackage: Effect<DeviceInput & { artifact: string }> = async (input, ctx) => {
  const { file } = await verifiedArtifact(ctx, input.artifact);
  const {
    value: r,
    device,
    turn,
  } = await onDevice(ctx, input, true, (session, _d, signal) => session.install(file, signal));
  const out = `${r.stdout.text()}${r.stderr.text()}`;
  return {
    status: execStatus(r),
    document: { device: device.device_id, artifact: input.artifact, turn, ...execDocument(r) },
    collections: {
      output: out
        .split('\n')
        .filter(Boolean)
        .map((text, i) => ({ line: i + 1, text })),
    },
    summary: {
      device: device.device_id,
      artifact: input.artifact,
      exit_code: r.code,
      output_head: out.slice(0, HEAD_CHARS),
    },
    truncated: false,
    limitations: outputLimitations(r, 256 * 1024, 600_000),
    target: { digest: input.artifact, path: `device:${device.device_id}` },
  };
};

export const deviceCaptureLogs: Effect<
  DeviceInput & {
    source: 'logcat' | 'journal' | 'dmesg' | 'file';
    path?: string;
    duration_ms: number;
    filter?: string;
    max_lines: number;
  }
> = async (input, ctx) => {
  const { value, device } = await onDevice(ctx, input, false, (session, _d, signal) =>
    session.logs({
      source: input.source,
      path: input.path,
      durationMs: input.duration_ms,
      maxBytes: 64 * 1024 * 1024,
      signal,
      onFollowing: (facts) => ctx.progress({ ...facts, device: input.device }),
    }),
  );
  const all = (value as CappedOutput)
    .text()
    .split('\n')
    .filter((l) => l !== '');
  const kept = all.filter((l) => !input.filter || l.includes(input.filter));
  const lines = kept.slice(0, input.max_lines).map((text, i) => ({ line: i + 1, text }));
  const capped = (value as CappedOutput).describe().truncated;
  const limitations = [
    ...(kept.length > lines.length
      ? [`lines were capped at max_lines=${input.max_lines} of ${kept.length}`]
      : []),
    ...(capped ? ['the log output was capped at 64 MiB'] : []),
  ];
  return {
    status: 'succeeded',
    document: {
      device: device.device_id,
      source: input.source,
      path: input.path ?? null,
      duration_ms: input.duration_ms,
      filter: input.filter ?? null,
    },
    collections: { lines },
    summary: {
      device: device.device_id,
      source: input.source,
      lines: lines.length,
      seen: all.length,
      head: lines.slice(0, 5).map((l) => l.text),
    },
    truncated: limitations.length > 0,
    limitations,
    target: { path: `device:${device.device_id}` },
  };
};

export const deviceReboot: Effect<DeviceInput> = async (input, ctx) => {
  const {
    value: r,
    device,
    turn,
  } = await onDevice(ctx, input, true, (session, _d, signal) => session.reboot(signal));
  const summary = {
    device: device.device_id,
    exit_code: r.code,
    ended_by: r.endedBy,
    output_head: `${r.stdout.text()}${r.stderr.text()}`.slice(0, HEAD_CHARS),
  };
  return {
    status: execStatus(r),
    document: { ...summary, turn, ...execDocument(r) },
    collections: {},
    summary,
    truncated: false,
    limitations: [],
    target: { path: `device:${device.device_id}` },
  };
};

/** What stays unknown about a device when an operation on it was interrupted mid-way. */
export function interruptedOnDevice(
  tool: string,
  input: Record<string, unknown>,
  workflowId: string,
): NewUnknown {
  return {
    question: `What state is device ${String(input.device)} in after ${tool} (launch ${workflowId}) was interrupted?`,
    scope: `device:${String(input.device)}`,
  };
}
