// A sandbox's processes, wherever they forked: real programs in real bwrap.
import { readlinkSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { testSandbox } from '../../tests/helpers/sandbox.ts';

const sandbox = testSandbox(1_900_100);

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe("a sandbox's processes", () => {
  it('are all found, double-forked ones too, all in its own namespace, and all end with it', async () => {
    // Two background sleeps, one of them orphaned (reparented to the namespace's init).
    const proc = sandbox.spawn({
      argv: [
        '/usr/bin/sh',
        '-c',
        '(/usr/bin/sleep 30 &); /usr/bin/sleep 30 & echo started; /usr/bin/sleep 30',
      ],
      env: { PATH: '/usr/bin' },
      stdin: 'ignore',
    });
    await new Promise<void>((resolve) => proc.child.stdout.once('data', () => resolve()));
    proc.child.stderr.resume();
    let members: number[] = [];
    await expect.poll(() => (members = proc.members()).length, { timeout: 5_000 }).toBeGreaterThanOrEqual(5); // the namespace's init, sh and three sleeps
    const own = readlinkSync('/proc/self/ns/pid');
    const namespaces = new Set(members.map((pid) => readlinkSync(`/proc/${pid}/ns/pid`)));
    expect(namespaces.size).toBe(1);
    expect(namespaces.has(own)).toBe(false);
    expect(members).not.toContain(process.pid);

    proc.kill();
    // bwrap itself may see its namespace end first and exit on its own (status 137) before the kill
    // reaches it: either way, not a clean exit.
    const exit = await proc.exited;
    expect(exit.signal === 'SIGKILL' || exit.code === 137, JSON.stringify(exit)).toBe(true);
    await expect.poll(() => members.filter(alive).length, { timeout: 5_000 }).toBe(0);
    expect(proc.members()).toEqual([]);
  });
});

describe("a sandbox's kernel keys", () => {
  it('refuses add_key and keyctl with EPERM (a key would outlive the program under its uid); other calls run', async () => {
    const probe = [
      'import ctypes, os',
      'libc = ctypes.CDLL(None, use_errno=True)',
      'libc.syscall.restype = ctypes.c_long',
      // keyctl(KEYCTL_GET_PERSISTENT, -1, KEY_SPEC_USER_KEYRING); add_key("user", …, KEY_SPEC_USER_KEYRING)
      'r = libc.syscall(250, 22, ctypes.c_long(-1), ctypes.c_long(-4)); e = ctypes.get_errno()',
      'a = libc.syscall(248, b"user", b"dossier-probe", b"x", 1, ctypes.c_long(-4)); e2 = ctypes.get_errno()',
      'print(r, e, a, e2, os.getpid() > 0)',
    ].join('\n');
    const proc = sandbox.spawn({
      argv: ['/usr/bin/python3', '-c', probe],
      env: { PATH: '/usr/bin' },
      stdin: 'ignore',
    });
    let out = '';
    proc.child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    proc.child.stderr.resume();
    const exit = await proc.exited;
    expect(exit.code, out).toBe(0);
    expect(out.trim()).toBe('-1 1 -1 1 True');
  });
});
