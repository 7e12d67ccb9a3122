// What every kind of device offers an operation, whatever carries it (SSH,
// adb, qemu-user): run a program, move a file each way, follow a log,
// install a package, reboot. Output is capped as it arrives.
import type { Readable } from 'node:stream';
import type { CappedOutput } from '../domain/capped.ts';
import { DossierError } from '../domain/errors.ts';

export { CappedOutput } from '../domain/capped.ts';

export interface ExecRequest {
  argv: string[];
  env: Record<string, string>;
  stdin?: string;
  timeoutMs: number;
  maxOutputBytes: number;
  signal: AbortSignal;
}

export interface ExecResult {
  code: number | null;
  signal: string | null;
  /** A device session says `cancel` when its signal ended it; the launch says whether its worker's stop did (`shutdown`). */
  endedBy: 'exit' | 'timeout' | 'cancel' | 'shutdown';
  stdout: CappedOutput;
  stderr: CappedOutput;
  durationMs: number;
}

export interface LogRequest {
  source: 'logcat' | 'journal' | 'dmesg' | 'file';
  path?: string;
  durationMs: number;
  maxBytes: number;
  signal: AbortSignal;
  /**
   * Called once the capture is about to follow, with what it follows from (a file's byte offset):
   * every line written after it is in the capture.
   */
  onFollowing?: (facts: Record<string, unknown>) => void;
}

export interface DeviceSession {
  exec(req: ExecRequest): Promise<ExecResult>;
  /** A file's bytes, or a folder as a tar stream; the stream ends when it is all sent. */
  pull(path: string, signal: AbortSignal): Promise<{ kind: 'file' | 'dir'; stream: Readable }>;
  /** Writes a local file's bytes; refuses (nothing written) when `path` exists and overwrite is false. */
  push(file: string, path: string, mode: number, overwrite: boolean): Promise<void>;
  logs(req: LogRequest): Promise<CappedOutput>;
  install(file: string, signal: AbortSignal): Promise<ExecResult>;
  reboot(signal: AbortSignal): Promise<ExecResult>;
  close(): Promise<void>;
}

export function unavailable(device: string, why: string, how: string): DossierError {
  return new DossierError('device_unavailable', `Device ${device} cannot be reached: ${why}`, how, {
    device,
  });
}

export function unsupported(device: string, kind: string, what: string): DossierError {
  return new DossierError(
    'unsupported_target',
    `A ${kind} device cannot ${what}.`,
    kind === 'emulated'
      ? 'An emulated device runs programs from its rootfs, read-only; use device_exec or device_pull.'
      : 'Use a device kind that supports it.',
    { device, kind },
  );
}
