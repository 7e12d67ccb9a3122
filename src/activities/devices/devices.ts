// The device effects. Each opens a session on the device first (an unknown
// host key or an unreachable device fails before anything is journaled),
// then, for operations that change a device, waits its turn in the device's
// line (reporting waiting_for_device and its position), journals `started`,
// and only then sends the operation. The turn is kept alive while it runs;
// if it is lost (this worker stalled past the lease), the operation is ended.
import path from 'node:path';
import type { NewUnknown } from '../../domain/types.ts';
import type { CappedOutput } from '../../devices/device.ts';
import { detectType, storeArtifact } from '../../evidence/artifacts.ts';
import { lineRows } from '../capture/result.ts';
import type { Effect } from '../effect.ts';
import { verifiedArtifact } from '../policy.ts';
import { execDocument, execStatus, outputLimitations } from './deviceResults.ts';
import { onDevice, type DeviceInput } from './session.ts';
import {
  deviceCaptureLogs as deviceCaptureLogsContract,
  deviceExec as deviceExecContract,
  deviceInstallPackage as deviceInstallContract,
  devicePull as devicePullContract,
  devicePush as devicePushContract,
  deviceReboot as deviceRebootContract,
} from '../../tools/devices.ts';

const HEAD_CHARS = 512;

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
  } = await onDevice(ctx, input, deviceExecContract, (session, _d, signal) =>
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
  const { value, device } = await onDevice(ctx, input, devicePullContract, async (session, _d, signal) => {
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
  const { device, turn } = await onDevice(ctx, input, devicePushContract, (session) =>
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
  } = await onDevice(ctx, input, deviceInstallContract, (session, _d, signal) =>
    session.install(file, signal),
  );
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
  const { value, device } = await onDevice(ctx, input, deviceCaptureLogsContract, (session, _d, signal) =>
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
  } = await onDevice(ctx, input, deviceRebootContract, (session, _d, signal) => session.reboot(signal));
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
