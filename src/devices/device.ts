// What every kind of device offers an operation, whatever carries it (SSH,
// adb, qemu-user): run a program, move a file each way, follow a log,
// install a package, reboot. Output is capped as it arrives.
import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import { DossierError } from '../domain/errors.ts';

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
  endedBy: 'exit' | 'timeout' | 'cancel';
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

/** A stream's bytes up to a cap, with its full size and digest. */
export class CappedOutput {
  readonly chunks: Buffer[] = [];
  retained = 0;
  total = 0;
  private readonly hash = createHash('sha256');
  constructor(private readonly cap: number) {}

  push(chunk: Buffer) {
    this.total += chunk.length;
    this.hash.update(chunk);
    const room = this.cap - this.retained;
    if (room > 0) {
      const kept = chunk.length <= room ? chunk : chunk.subarray(0, room);
      this.chunks.push(kept);
      this.retained += kept.length;
    }
  }

  private digest: string | undefined;

  /** Size, what was kept, and the SHA-256 of everything (the stream is complete once this is asked). */
  describe() {
    this.digest ??= this.hash.digest('hex');
    return {
      bytes: this.total,
      retained_bytes: this.retained,
      truncated: this.total > this.retained,
      sha256: this.digest,
    };
  }

  text(): string {
    return Buffer.concat(this.chunks).toString('utf8');
  }
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
