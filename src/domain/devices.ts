// The kinds of device a team registers, declared once: register_device takes one
// field per kind (src/tools/devices.ts), the registry builds each kind's record
// (src/gateway/devices.ts), and a worker opens each kind's session
// (src/devices/open.ts); each keeps a table keyed by these kinds.

/** SSH boards and routers, Android phones over adb, firmware rootfs run under qemu-user. */
export const DEVICE_KINDS = ['ssh', 'adb', 'emulated'] as const;

export type DeviceKind = (typeof DEVICE_KINDS)[number];
