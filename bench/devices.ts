// Device figures (issue 11), against a real OpenSSH server on loopback (the
// tests' throwaway sshd): a fresh keyed device_exec of /bin/true through the
// gateway against its floor, one ssh2 connection + exec of the same command
// from this process; a retry of a finished key; 8 concurrent mutating
// operations on one device (throughput and the gap between one holder's end
// and the next one's start, read from timestamps written on the device); and
// a firmware program under qemu-user through dossier against qemu run bare.
import { execFileSync, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client } from 'ssh2';
import { DEVICE_HOME, DEVICE_USER, startSshd, userIds } from '../tests/helpers/sshd.ts';
import { benchDir, benchStack, callTool, connect, median, ms, percentile, timed } from './lib.ts';

const RUNS = 30;

function sshExec(port: number, privateKey: string, command: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const c = new Client();
    c.once('error', reject);
    c.once('ready', () =>
      c.exec(command, (err, stream) => {
        if (err) return reject(err);
        stream.resume();
        stream.stderr.resume();
        stream.once('close', () => (c.end(), resolve()));
      }),
    );
    c.connect({ host: '127.0.0.1', port, username: DEVICE_USER, privateKey });
  });
}

export async function benchDevices(): Promise<string[]> {
  if (process.getuid?.() !== 0) return ['(skipped: the device benchmark starts sshd and needs root)'];
  const sshd = await startSshd();
  const roots = benchDir('roots');
  const stack = await benchStack({
    DOSSIER_RATE_LIMIT_PER_MINUTE: '1000000',
    DOSSIER_ALLOWED_ROOTS: `/usr/bin:/bin:${roots}`,
  });
  const lines = ['| figure | value |', '|---|---|'];
  try {
    const client = await connect(stack);
    const registered = await callTool(client, 'register_device', {
      device_id: 'bench-ssh',
      ssh: {
        host: '127.0.0.1',
        port: sshd.port,
        user: DEVICE_USER,
        host_key: sshd.hostKey,
        private_key: sshd.privateKey,
      },
    });
    if (registered.error) throw new Error(JSON.stringify(registered.error));

    // Warm both paths, then alternate them so both see the same machine.
    await sshExec(sshd.port, sshd.privateKey, "env -i '/bin/true'");
    await callTool(client, 'device_exec', {
      device: 'bench-ssh',
      argv: ['/bin/true'],
      idempotency_key: 'warm',
    });
    const bare: number[] = [];
    const viaDossier: number[] = [];
    const retries: number[] = [];
    const whoami: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      bare.push((await timed(() => sshExec(sshd.port, sshd.privateKey, "env -i '/bin/true'")))[0]);
      const [t, r] = await timed(() =>
        callTool(client, 'device_exec', {
          device: 'bench-ssh',
          argv: ['/bin/true'],
          idempotency_key: `exec-${i}`,
        }),
      );
      if (r.status !== 'succeeded') throw new Error(JSON.stringify(r.error ?? r));
      viaDossier.push(t);
      retries.push(
        (
          await timed(() =>
            callTool(client, 'device_exec', {
              device: 'bench-ssh',
              argv: ['/bin/true'],
              idempotency_key: `exec-${i}`,
            }),
          )
        )[0],
      );
      whoami.push((await timed(() => callTool(client, 'whoami', {})))[0]);
    }
    const b = median(bare);
    const d = median(viaDossier);
    lines.push(`| ssh2 connect + exec \`/bin/true\` (floor), p50 | ${ms(b)} |`);
    lines.push(
      `| fresh keyed \`device_exec /bin/true\` over SSH, p50 (p90) | ${ms(d)} (${ms(percentile(viaDossier, 90))}) |`,
    );
    lines.push(`| overhead over the floor | +${ms(d - b)} (${(d / b).toFixed(2)}×) |`);
    lines.push(
      `| retry of a finished key / \`whoami\`, p50 | ${ms(median(retries))} / ${ms(median(whoami))} (${(median(retries) / median(whoami)).toFixed(2)}×) |`,
    );

    // One writer: 8 callers at once on one device, each holding it for 200 ms.
    const folder = path.join(DEVICE_HOME, 'bench');
    rmSync(folder, { recursive: true, force: true });
    mkdirSync(folder);
    chownSync(folder, userIds().uid, userIds().gid);
    const marks = path.join(folder, 'marks');
    const script = `echo "B $(date +%s%N)" >> ${marks}; sleep 0.2; echo "E $(date +%s%N)" >> ${marks}`;
    const [total, replies] = await timed(() =>
      Promise.all(
        Array.from({ length: 8 }, (_, i) =>
          callTool(client, 'device_exec', {
            device: 'bench-ssh',
            argv: ['/bin/sh', '-c', script],
            env: { PATH: '/usr/bin:/bin' },
            wait_ms: 100_000,
            idempotency_key: `line-${i}`,
          }),
        ),
      ),
    );
    for (const r of replies) if (r.status !== 'succeeded') throw new Error(JSON.stringify(r.error ?? r));
    const stamps = readFileSync(marks, 'utf8')
      .trim()
      .split('\n')
      .map((l) => l.split(' '))
      .map(([k, v]) => ({ k: k!, ns: Number(v) }));
    const overlapping = stamps.some((s, i) => s.k !== (i % 2 ? 'E' : 'B'));
    const gaps: number[] = [];
    for (let i = 1; i + 1 < stamps.length; i += 2) gaps.push((stamps[i + 1]!.ns - stamps[i]!.ns) / 1e6);
    lines.push(
      `| 8 concurrent mutating ops (200 ms each) on one device: wall time / ideal serial | ${ms(total)} / 1600.0 ms${overlapping ? ' (OVERLAP!)' : ', no overlap'} |`,
    );
    lines.push(
      `| hand-off between holders (one's end to the next one's start on the device), p50 (max) | ${ms(median(gaps))} (${ms(Math.max(...gaps))}) |`,
    );

    // Emulation: busybox true under qemu-arm, through dossier and bare.
    const deb = path.join(os.homedir(), '.cache', 'dossier', 'fixtures', 'busybox-static-armhf.deb');
    if (existsSync(deb) && existsSync('/usr/bin/qemu-arm-static')) {
      const work = benchDir('dev');
      execFileSync('dpkg-deb', ['-x', deb, path.join(work, 'deb')]);
      const fs = path.join(work, 'fs', 'bin');
      mkdirSync(fs, { recursive: true });
      execFileSync('cp', [path.join(work, 'deb', 'bin', 'busybox'), fs]);
      const image = path.join(roots, 'firmware.sqfs');
      execFileSync('mksquashfs', [path.join(work, 'fs'), image, '-noappend', '-quiet']);
      const artifact = await callTool(client, 'register_artifact', { path: image });
      if (artifact.error) throw new Error(`register the firmware: ${JSON.stringify(artifact.error)}`);
      const fw = await callTool(client, 'extract_firmware', {
        artifact: artifact.artifact.digest,
        idempotency_key: 'fw',
      });
      await callTool(client, 'register_device', {
        device_id: 'bench-arm',
        emulated: { evidence_id: fw.evidence_id, prefix: 'squashfs-0x0/', arch: 'arm' },
      });
      const bareQemu: number[] = [];
      const viaQemu: number[] = [];
      for (let i = 0; i < RUNS; i++) {
        const t0 = performance.now();
        spawnSync('/usr/bin/qemu-arm-static', [
          '-L',
          path.join(work, 'fs'),
          path.join(fs, 'busybox'),
          'true',
        ]);
        bareQemu.push(performance.now() - t0);
        const [t, r] = await timed(() =>
          callTool(client, 'device_exec', {
            device: 'bench-arm',
            argv: ['bin/busybox', 'true'],
            idempotency_key: `arm-${i}`,
          }),
        );
        if (r.status !== 'succeeded') throw new Error(JSON.stringify(r.error ?? r));
        viaQemu.push(t);
      }
      lines.push(`| \`qemu-arm-static busybox true\` bare (floor), p50 | ${ms(median(bareQemu))} |`);
      lines.push(
        `| fresh keyed \`device_exec busybox true\` on an emulated ARM device, p50 | ${ms(median(viaQemu))} (+${ms(median(viaQemu) - median(bareQemu))}) |`,
      );
      rmSync(work, { recursive: true, force: true });
    } else {
      lines.push('| emulated device | not measured: run `.ci/run` once to fetch busybox-static:armhf |');
    }
    await client.close();
  } finally {
    await stack.stop();
    await sshd.stop();
    rmSync(roots, { recursive: true, force: true });
  }
  return lines;
}
