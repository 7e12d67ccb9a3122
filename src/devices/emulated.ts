// Emulated devices: a rootfs that an extraction produced, run under Debian's
// qemu-user-static inside the same sandbox as captures, the rootfs mounted
// read-only as the guest's root (-L), a private /tmp the only writable place.
import { createReadStream } from 'node:fs';
import { lstat } from 'node:fs/promises';
import path from 'node:path';
import type { Sandbox } from '../sandbox/sandbox.ts';
import { CappedOutput, type DeviceSession, type ExecResult, unsupported } from './device.ts';
import { whenAborted } from '../domain/abort.ts';

export const ROOTFS = '/rootfs';

/** The path of `inside` in the rootfs, refusing anything that climbs out of it. */
function underRoot(rootfs: string, inside: string): string {
  const resolved = path.resolve(rootfs, `.${path.posix.normalize(`/${inside}`)}`);
  if (resolved !== rootfs && !resolved.startsWith(`${rootfs}/`))
    throw new Error(`${inside} is outside the rootfs`);
  return resolved;
}

export function openEmulated(device: string, rootfs: string, arch: string, sandbox: Sandbox): DeviceSession {
  const qemu = `/usr/bin/qemu-${arch}-static`;
  return {
    async exec(req): Promise<ExecResult> {
      const t0 = performance.now();
      // argv[0] names a program of the rootfs ("bin/busybox" or "/bin/busybox").
      const program = path.posix.join(ROOTFS, path.posix.normalize(`/${req.argv[0]!}`));
      const proc = sandbox.spawn({
        argv: [qemu, '-L', ROOTFS, program, ...req.argv.slice(1)],
        env: req.env,
        cwd: '/tmp',
        mounts: [{ host: rootfs, inside: ROOTFS }],
      });
      const stdout = new CappedOutput(req.maxOutputBytes);
      const stderr = new CappedOutput(req.maxOutputBytes);
      proc.child.stdout.on('data', (c: Buffer) => stdout.push(c));
      proc.child.stderr.on('data', (c: Buffer) => stderr.push(c));
      proc.child.stdin?.end(req.stdin ?? '');
      let endedBy: ExecResult['endedBy'] = 'exit';
      const timer = setTimeout(() => ((endedBy = 'timeout'), proc.kill()), req.timeoutMs);
      const onAbort = () => ((endedBy = 'cancel'), proc.kill());
      const stopAbort = whenAborted(req.signal, onAbort);
      const exit = await proc.exited;
      clearTimeout(timer);
      stopAbort();
      if (exit.error) throw exit.error;
      return {
        code: exit.code,
        signal: exit.signal,
        endedBy,
        stdout,
        stderr,
        durationMs: Math.round(performance.now() - t0),
      };
    },
    async pull(file) {
      const host = underRoot(rootfs, file);
      const info = await lstat(host);
      if (!info.isFile())
        throw unsupported(device, 'emulated', 'pull anything but a regular file of its rootfs');
      return { kind: 'file', stream: createReadStream(host) };
    },
    push: async () => {
      throw unsupported(device, 'emulated', 'take files: its rootfs is a read-only extraction');
    },
    logs: async () => {
      throw unsupported(device, 'emulated', 'show logs');
    },
    install: async () => {
      throw unsupported(device, 'emulated', 'install packages');
    },
    reboot: async () => {
      throw unsupported(device, 'emulated', 'reboot (each device_exec starts it anew)');
    },
    async close() {},
  };
}
