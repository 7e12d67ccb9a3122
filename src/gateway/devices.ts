// The team's device registry, served by the gateway: registering pins an SSH
// host key and seals the private key (never returned, never logged);
// emulated devices point at a rootfs of one of the team's own extractions.
import path from 'node:path';
import { digestOf, sha256Hex } from '../domain/canonical.ts';
import { DEVICE_KINDS, type DeviceKind } from '../domain/devices.ts';
import { DossierError } from '../domain/errors.ts';
import type { Principal } from '../domain/types.ts';
import { sealCredential } from '../devices/secrets.ts';
import { pinnedFingerprint } from '../devices/ssh.ts';
import { outputFolder } from '../evidence/artifacts.ts';
import { findEvidence } from '../evidence/views.ts';
import type { DeviceRecord } from '../store/devices.ts';
import { outputReclaimed } from '../store/retained.ts';
import type { Store } from '../store/store.ts';
import type { PayloadKey } from '../temporal/codec.ts';
import type { registerDevice } from '../tools/devices.ts';
import type { z } from 'zod';

type RegisterInput = z.output<typeof registerDevice.input>;

/** What a kind's register_device field becomes in the registry: the config shown, the credential sealed. */
interface KindRecord {
  config: Record<string, unknown>;
  credential?: string;
  /** A digest of the secret, so registering the same device again is told from another key. */
  secretDigest?: string;
}

type KindConfig<K extends DeviceKind> = (
  field: NonNullable<RegisterInput[K]>,
  at: { caller: Principal; device_id: string; keys: PayloadKey[] },
  rootfs: (caller: Principal, evidenceId: string, prefix: string) => Promise<string>,
) => Promise<KindRecord> | KindRecord;

/** Each kind's record: SSH pins the host key and seals the private key; emulated resolves its rootfs. */
const KIND_CONFIG: { [K in DeviceKind]: KindConfig<K> } = {
  ssh: ({ private_key, passphrase, host_key, ...facts }, { caller, device_id, keys }) => ({
    config: { ...facts, host_key_fingerprint: pinnedFingerprint(host_key) },
    credential: sealCredential(keys, caller.team, device_id, JSON.stringify({ private_key, passphrase })),
    secretDigest: sha256Hex(`${private_key}\0${passphrase ?? ''}`),
  }),
  adb: ({ serial }) => ({ config: { serial } }),
  emulated: async (emulated, { caller }, rootfs) => ({
    config: { ...emulated, rootfs: await rootfs(caller, emulated.evidence_id, emulated.prefix) },
  }),
};

export class DeviceRegistry {
  constructor(
    private readonly deps: {
      store: Pick<Store, 'devices' | 'evidence' | 'retained'>;
      keys: PayloadKey[];
      home: string;
    },
  ) {}

  async register(caller: Principal, input: RegisterInput) {
    // The refine of register_device lets exactly one kind's field through.
    const kind = DEVICE_KINDS.find((k) => input[k] !== undefined)!;
    const { config, credential = null, secretDigest = null } = await this.kindConfig(kind, caller, input);
    const configDigest = digestOf({ kind, config, secret: secretDigest });
    const { created, device } = await this.deps.store.devices.register(caller.team, {
      device_id: input.device_id,
      kind,
      description: input.description ?? null,
      config,
      config_digest: configDigest,
      credential,
      registered_by: caller.principal,
    });
    if (!created && (device.config_digest !== configDigest || device.status !== 'active')) {
      throw new DossierError(
        'invalid_params',
        device.status === 'active'
          ? `Device ${input.device_id} is already registered with another configuration; nothing was changed.`
          : `Device ${input.device_id} was retired; its id is not reused.`,
        device.status === 'active'
          ? 'Register it under a new device_id (and retire this one with retire_device if it is gone); a retired id is never reused.'
          : 'Pick another device_id.',
        { device_id: input.device_id, status: device.status },
      );
    }
    return { created, device: shown(device) };
  }

  /** The kind's connection facts (and sealed credential) from its register_device field. */
  private kindConfig<K extends DeviceKind>(kind: K, caller: Principal, input: RegisterInput) {
    const build: KindConfig<K> = KIND_CONFIG[kind];
    return build(input[kind]!, { caller, device_id: input.device_id, keys: this.deps.keys }, (...a) =>
      this.rootfs(...a),
    );
  }

  /** The rootfs folder of an extraction of the caller's team, with the prefix inside it. */
  private async rootfs(caller: Principal, evidenceId: string, prefix: string): Promise<string> {
    const record = await findEvidence(this.deps.store.evidence, caller.team, evidenceId);
    const named = record.summary.output;
    const output = typeof named === 'string' ? outputFolder(this.deps.home, named) : undefined;
    const extractions = path.join(this.deps.home, 'extractions', caller.team);
    if (output === undefined || !output.startsWith(`${extractions}/`)) {
      throw new DossierError(
        'invalid_params',
        `Evidence ${evidenceId} is not a successful extraction of your team.`,
        'Pass the evidence_id of an extract_firmware or extract_artifact launch that succeeded.',
        { evidence_id: evidenceId },
      );
    }
    const reclaimed = await this.deps.store.retained.reclaimed(caller.team, [output]);
    if (reclaimed) throw outputReclaimed(evidenceId, reclaimed.reclaimed_at);
    const root = path.resolve(output, `.${path.posix.normalize(`/${prefix}`)}`);
    if (root !== output && !root.startsWith(`${output}/`)) {
      throw new DossierError(
        'invalid_params',
        `prefix ${prefix} leaves the extraction.`,
        'Pass a path inside it, e.g. "squashfs-0x0/".',
      );
    }
    return root;
  }

  async list(caller: Principal, filter: { include_retired: boolean; cursor?: string; limit: number }) {
    const page = await this.deps.store.devices.list(caller.team, {
      includeRetired: filter.include_retired,
      cursor: filter.cursor,
      limit: filter.limit,
    });
    return { ...page, items: page.items.map(shown) };
  }

  async get(caller: Principal, deviceId: string) {
    return { device: shown(await this.find(caller, deviceId)) };
  }

  async retire(caller: Principal, deviceId: string) {
    await this.find(caller, deviceId);
    const retired = await this.deps.store.devices.retire(caller.team, deviceId);
    return { retired, device: shown(await this.find(caller, deviceId)) };
  }

  private async find(caller: Principal, deviceId: string): Promise<DeviceRecord> {
    const device = await this.deps.store.devices.get(caller.team, deviceId);
    if (!device) {
      throw new DossierError(
        'not_found',
        `Your team has no device ${deviceId}.`,
        'list_devices shows your team’s devices.',
        {
          device: deviceId,
        },
      );
    }
    return device;
  }
}

/** A device as callers see it: no credential, no digest of one; emulated rootfs paths stay on the workers. */
function shown(d: DeviceRecord) {
  const { config_digest: _digest, ...rest } = d;
  const { rootfs: _rootfs, ...config } = d.config;
  return { ...rest, config, has_credential: d.kind === 'ssh' && d.status === 'active' };
}
