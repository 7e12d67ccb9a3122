// Opens a session on a registered device of whatever kind, as the worker that
// runs the operation: SSH with the credential opened from its seal, adb and
// emulation through the sandbox.
import { existsSync } from 'node:fs';
import type { DeviceKind } from '../domain/devices.ts';
import type { Sandbox } from '../sandbox/sandbox.ts';
import type { PayloadKey } from '../temporal/codec.ts';
import { openAdb } from './adb.ts';
import { type DeviceSession, unavailable } from './device.ts';
import { openEmulated } from './emulated.ts';
import { openCredential } from './secrets.ts';
import { openSsh, type SshConfig, type SshCredential } from './ssh.ts';

export interface DeviceFacts {
  team: string;
  device_id: string;
  kind: DeviceKind;
  config: Record<string, unknown>;
  /** The sealed credential (ssh), as the registry keeps it. */
  credential: string | null;
}

type OpenDeps = { sandbox: Sandbox; keys: PayloadKey[] };

/** How each kind of device is opened. */
const OPENERS: Record<
  DeviceKind,
  (d: DeviceFacts, deps: OpenDeps) => Promise<DeviceSession> | DeviceSession
> = {
  ssh: (d, deps) => {
    if (!d.credential)
      throw unavailable(
        d.device_id,
        'it has no stored credential',
        'Register the device again with its private key.',
      );
    const credential = JSON.parse(
      openCredential(deps.keys, d.team, d.device_id, d.credential),
    ) as SshCredential;
    return openSsh(d.device_id, d.config as unknown as SshConfig, credential);
  },
  adb: (d, deps) => openAdb(d.device_id, String(d.config.serial), deps.sandbox),
  emulated: (d, deps) => {
    const rootfs = String(d.config.rootfs);
    if (!existsSync(rootfs)) {
      throw unavailable(
        d.device_id,
        'its rootfs is not on this worker',
        'Run the device on a worker that shares DOSSIER_HOME/extractions with the one that extracted it.',
      );
    }
    return openEmulated(d.device_id, rootfs, String(d.config.arch), deps.sandbox);
  },
};

export async function openDevice(d: DeviceFacts, deps: OpenDeps): Promise<DeviceSession> {
  return OPENERS[d.kind](d, deps);
}
