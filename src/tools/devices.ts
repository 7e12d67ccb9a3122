// Devices a team shares: boards and routers over SSH, Android phones over adb,
// and firmware run under emulation (qemu-user). The registry is the team's
// ledger; every operation on a device is a keyed launch on the `device`
// capability, and operations that change a device run one at a time, in
// arrival order, across the whole cluster.
import { z } from 'zod';
import { DEVICE_KINDS } from '../domain/devices.ts';
import { ARTIFACT_DIGEST } from '../domain/types.ts';
import {
  bounded,
  defineTool,
  type EffectAudit,
  investigationSchema,
  LIST_LIMIT,
  listCursorSchema,
  listLimitSchema,
  detailSchema,
} from './contract.ts';
import { CAPTURE_LIMITS, stdinSchema } from './capture.ts';
import { EVIDENCE_ID } from './ledger.ts';

export const DEVICE_LIMITS = {
  timeout_ms: { default: 30_000, max: 600_000, unit: 'ms' },
  max_output_bytes: CAPTURE_LIMITS.max_output_bytes,
  max_bytes: { default: 64 * 1024 * 1024, max: 1024 * 1024 * 1024, unit: 'bytes pulled' },
  duration_ms: { default: 10_000, max: 600_000, unit: 'ms of logs' },
  max_lines: { default: 10_000, max: 1_000_000, unit: 'log lines' },
  private_key_bytes: { default: 0, max: 16 * 1024, unit: 'bytes' },
};

export const DEVICE_ID = /^[a-z0-9][a-z0-9._-]{0,62}$/;
export const EMULATED_ARCHS = [
  'arm',
  'armeb',
  'aarch64',
  'mips',
  'mipsel',
  'mips64',
  'mips64el',
  'ppc',
  'ppc64',
  'riscv64',
  'i386',
  'x86_64',
  'sh4',
  'm68k',
] as const;

const deviceRef = z
  .string()
  .regex(DEVICE_ID, { error: 'device is a device_id: 1-63 of a-z 0-9 . _ - (list_devices shows them)' })
  .describe('The device, by the device_id it was registered with.');

const LEDGER_WRITE: EffectAudit = {
  idempotent: true,
  readOnly: false,
  destructive: false,
  openWorld: false,
  effects: ['writes the team’s device registry'],
};
const READ: EffectAudit = {
  idempotent: true,
  readOnly: true,
  destructive: false,
  openWorld: false,
  effects: [],
};

export const registerDevice = defineTool({
  name: 'register_device',
  title: 'Register a device',
  description:
    'Add a device to your team’s bench: ssh {host, port, user, host_key (pinned: an unknown or changed key refuses the connection), private_key (given once, stored encrypted, never returned)}, adb {serial or host:port}, or emulated {evidence_id of an extraction, prefix of its rootfs, arch} (run under qemu-user in the sandbox). Registering the same device again changes nothing; another config under the same id is refused.',
  input: z
    .strictObject({
      device_id: z
        .string()
        .regex(DEVICE_ID, { error: 'device_id is 1-63 of a-z 0-9 . _ - starting with a letter or digit' }),
      description: z.string().max(1_024).optional(),
      ssh: z
        .strictObject({
          host: z
            .string()
            .min(1)
            .max(253)
            .regex(/^[A-Za-z0-9.:_-]+$/, { error: 'host is a name or an address' }),
          port: z.number().int().min(1).max(65_535).default(22),
          user: z.string().regex(/^[a-z_][a-z0-9_.-]{0,31}$/, { error: 'user is a POSIX user name' }),
          host_key: z
            .string()
            .min(10)
            .max(16_384)
            .describe(
              'The host key to pin: its OpenSSH public key line ("ssh-ed25519 AAAA…") or its SHA256 fingerprint ("SHA256:…").',
            ),
          private_key: z
            .string()
            .min(64)
            .max(DEVICE_LIMITS.private_key_bytes.max)
            .describe('An OpenSSH or PEM private key; stored encrypted, never returned.'),
          passphrase: z.string().max(1_024).optional(),
          reboot_command: z
            .array(z.string().max(1_024))
            .min(1)
            .max(16)
            .default(['reboot'])
            .describe('argv that reboots it.'),
        })
        .optional(),
      adb: z
        .strictObject({
          serial: z
            .string()
            .min(1)
            .max(256)
            .regex(/^[A-Za-z0-9.:_-]+$/, { error: 'serial is a serial number or host:port' }),
        })
        .optional(),
      emulated: z
        .strictObject({
          evidence_id: z
            .string()
            .regex(EVIDENCE_ID)
            .describe('An extract_firmware or extract_artifact result of your team.'),
          prefix: z
            .string()
            .max(1_024)
            .default('')
            .describe('The rootfs inside that extraction, e.g. "squashfs-0x0/".'),
          arch: z.enum(EMULATED_ARCHS),
        })
        .optional(),
    })
    .refine((d) => DEVICE_KINDS.filter((kind) => d[kind]).length === 1, {
      error: `give exactly one of ${DEVICE_KINDS.join(', ')}`,
    }),
  effect: LEDGER_WRITE,
  runsOn: 'gateway',
  toolset: 'devices',
  limits: { private_key_bytes: DEVICE_LIMITS.private_key_bytes },
  collections: {},
});

export const listDevices = defineTool({
  name: 'list_devices',
  title: 'List devices',
  description: "Your team's devices (never their credentials), newest first; retired ones only when asked.",
  input: z.strictObject({
    include_retired: z.boolean().default(false),
    cursor: listCursorSchema,
    limit: listLimitSchema,
  }),
  effect: READ,
  runsOn: 'gateway',
  toolset: 'devices',
  limits: { limit: LIST_LIMIT },
  collections: {},
});

export const getDevice = defineTool({
  name: 'get_device',
  title: 'Get a device',
  description:
    'One device of your team: kind, connection facts, pinned host key fingerprint, status; never its credential.',
  input: z.strictObject({ device: deviceRef }),
  effect: READ,
  runsOn: 'gateway',
  toolset: 'devices',
  limits: {},
  collections: {},
});

export const retireDevice = defineTool({
  name: 'retire_device',
  title: 'Retire a device',
  description:
    'Take a device off the bench: no new operation may use it; its credential is erased. Its past launches and Evidence stay.',
  input: z.strictObject({ device: deviceRef }),
  effect: {
    ...LEDGER_WRITE,
    destructive: true,
    effects: ['retires a device and erases its stored credential'],
  },
  runsOn: 'gateway',
  toolset: 'devices',
  limits: {},
  collections: {},
});

const ON_DEVICE: EffectAudit = {
  idempotent: false,
  readOnly: false,
  destructive: false,
  openWorld: true,
  effects: ['acts on a shared device'],
};
const common = {
  device: deviceRef,
  detail: detailSchema,
  investigation: investigationSchema.optional(),
};

export const deviceExec = defineTool({
  name: 'device_exec',
  title: 'Run a program on a device',
  description:
    'Run one program on a device with exactly the given argv (quoted for the device’s shell over SSH and adb; run directly under emulation), environment and stdin; retain its exit status and output. Mutating: it waits its turn on the device.',
  input: z.object({
    ...common,
    argv: z
      .array(
        z
          .string()
          .max(CAPTURE_LIMITS.arg_bytes.max)
          .refine((a) => !a.includes('\0'), { error: 'no NUL in arguments' }),
      )
      .min(1)
      .max(CAPTURE_LIMITS.args.max),
    env: z
      .record(
        z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/),
        z
          .string()
          .max(4_096)
          .refine((v) => !v.includes('\0'), { error: 'no NUL in values' }),
      )
      .refine((e) => Object.keys(e).length <= CAPTURE_LIMITS.env_vars.max, {
        error: `at most ${CAPTURE_LIMITS.env_vars.max} variables`,
      })
      .default({}),
    stdin: stdinSchema,
    timeout_ms: bounded(DEVICE_LIMITS.timeout_ms, 'Wall-clock limit; then the program is ended').refine(
      (v) => v >= 100,
    ),
    max_output_bytes: bounded(DEVICE_LIMITS.max_output_bytes, 'Cap on retained stdout and stderr, each'),
  }),
  effect: { ...ON_DEVICE, effects: ['runs a program on a shared device'] },
  runsOn: 'device',
  toolset: 'devices',
  limits: { timeout_ms: DEVICE_LIMITS.timeout_ms, max_output_bytes: DEVICE_LIMITS.max_output_bytes },
  collections: {
    stdout: { description: 'Standard output, one row per line: {line, part, text}', filterable: ['line'] },
    stderr: { description: 'Standard error, one row per line: {line, part, text}', filterable: ['line'] },
  },
  maxRunMs: (i) => i.timeout_ms + 15 * 60_000,
});

export const devicePull = defineTool({
  name: 'device_pull',
  title: 'Pull a file from a device',
  description:
    'Copy a file (a folder comes as a tar) from a device into the artifact store, registered for your team with its provenance (device and path).',
  input: z.object({
    ...common,
    path: z
      .string()
      .min(1)
      .max(4_096)
      .refine((p) => p.startsWith('/') && !p.includes('\0'), { error: 'path is absolute' }),
    max_bytes: bounded(DEVICE_LIMITS.max_bytes, 'Largest content accepted'),
  }),
  effect: {
    ...ON_DEVICE,
    effects: ['reads a file on a shared device', 'writes the artifact store'],
  },
  runsOn: 'device',
  toolset: 'devices',
  limits: { max_bytes: DEVICE_LIMITS.max_bytes },
  collections: {},
  maxRunMs: () => 30 * 60_000,
});

export const devicePush = defineTool({
  name: 'device_push',
  title: 'Push an artifact to a device',
  description:
    'Write a registered artifact to a path on an ssh or adb device with a mode (an emulated device’s rootfs is read-only); an existing file is refused unless overwrite is true, and then nothing is written.',
  input: z.object({
    ...common,
    artifact: z.string().regex(ARTIFACT_DIGEST),
    path: z
      .string()
      .min(1)
      .max(4_096)
      .refine((p) => p.startsWith('/') && !p.includes('\0'), { error: 'path is absolute' }),
    mode: z
      .string()
      .regex(/^0?[0-7]{3}$/, { error: 'mode is octal, e.g. "0644"' })
      .default('0644'),
    overwrite: z.boolean().default(false),
  }),
  effect: { ...ON_DEVICE, effects: ['writes a file on a shared device'] },
  runsOn: 'device',
  toolset: 'devices',
  limits: {},
  collections: {},
  maxRunMs: () => 30 * 60_000,
});

export const deviceInstallPackage = defineTool({
  name: 'device_install_package',
  title: 'Install a package on a device',
  description:
    'Install a registered package on a device: an APK with adb install. Mutating: it waits its turn on the device.',
  input: z.object({ ...common, artifact: z.string().regex(ARTIFACT_DIGEST) }),
  effect: { ...ON_DEVICE, effects: ['installs software on a shared device'] },
  runsOn: 'device',
  toolset: 'devices',
  limits: {},
  collections: { output: { description: 'What the installer printed: {line, text}', filterable: ['line'] } },
  maxRunMs: () => 30 * 60_000,
});

export const deviceCaptureLogs = defineTool({
  name: 'device_capture_logs',
  title: 'Capture a device’s logs',
  description:
    'Follow a device’s log for duration_ms (logcat, the systemd journal, dmesg, or a file that grows) and retain the lines, optionally only those containing filter.',
  input: z
    .object({
      ...common,
      source: z.enum(['logcat', 'journal', 'dmesg', 'file']),
      path: z
        .string()
        .max(4_096)
        .refine((p) => p.startsWith('/') && !p.includes('\0'), { error: 'path is absolute' })
        .optional()
        .describe('The file, for source "file".'),
      duration_ms: bounded(DEVICE_LIMITS.duration_ms, 'How long to follow'),
      filter: z.string().min(1).max(1_024).optional(),
      max_lines: bounded(DEVICE_LIMITS.max_lines, 'Lines kept'),
    })
    .refine((i) => i.source !== 'file' || i.path, { error: 'source "file" needs path' }),
  effect: { ...ON_DEVICE, readOnly: true, effects: ['reads a shared device’s logs'] },
  runsOn: 'device',
  toolset: 'devices',
  limits: { duration_ms: DEVICE_LIMITS.duration_ms, max_lines: DEVICE_LIMITS.max_lines },
  collections: { lines: { description: 'Log lines: {line, text}', filterable: ['line'] } },
  maxRunMs: (i) => i.duration_ms + 10 * 60_000,
});

export const deviceReboot = defineTool({
  name: 'device_reboot',
  title: 'Reboot a device',
  description:
    'Reboot a device (destructive: whatever runs on it is ended). Mutating: it waits its turn on the device.',
  input: z.object({ ...common }),
  effect: { ...ON_DEVICE, destructive: true, effects: ['reboots a shared device'] },
  runsOn: 'device',
  toolset: 'devices',
  limits: {},
  collections: {},
  maxRunMs: () => 20 * 60_000,
});

/**
 * Operations that change a device: one at a time per device, across the cluster (the device
 * effects take the device's turn for these, src/activities/devices/session.ts), and one lost
 * mid-way leaves an unknown on the device.
 */
export const MUTATING_DEVICE_CONTRACTS = [deviceExec, devicePush, deviceInstallPackage, deviceReboot];
export const MUTATING_DEVICE_TOOLS: ReadonlySet<string> = new Set(
  MUTATING_DEVICE_CONTRACTS.map((c) => c.name),
);
