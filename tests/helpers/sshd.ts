// A real OpenSSH server for device tests: on 127.0.0.1 and a free port, with
// a throwaway host key, SFTP, and one unprivileged user whose authorized key
// the test holds. Needs root (sshd's privilege separation and the user).
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from './ports.ts';

export const DEVICE_USER = 'dossier-device';
export const DEVICE_HOME = '/var/lib/dossier-device';

export interface TestSshd {
  port: number;
  /** The host key as an OpenSSH public key line, to pin. */
  hostKey: string;
  /** Another key, for the mismatch test. */
  otherHostKey: string;
  privateKey: string;
  stop(): Promise<void>;
}

function keygen(file: string) {
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', file]);
}

export async function startSshd(): Promise<TestSshd> {
  try {
    execFileSync('id', [DEVICE_USER], { stdio: 'ignore' });
  } catch {
    execFileSync('useradd', [
      '--system',
      '--create-home',
      '--home-dir',
      DEVICE_HOME,
      '--shell',
      '/bin/sh',
      DEVICE_USER,
    ]);
  }
  execFileSync('usermod', ['-p', '*', DEVICE_USER]); // no password, yet not locked: key logins only
  const dir = mkdtempSync(path.join(os.tmpdir(), 'dossier-sshd-'));
  for (const key of ['host', 'other', 'user']) keygen(path.join(dir, key));
  const ssh = path.join(DEVICE_HOME, '.ssh');
  mkdirSync(ssh, { recursive: true });
  writeFileSync(path.join(ssh, 'authorized_keys'), readFileSync(path.join(dir, 'user.pub')));
  const { uid, gid } = userIds();
  chownSync(ssh, uid, gid);
  chownSync(path.join(ssh, 'authorized_keys'), uid, gid);
  if (!existsSync('/run/sshd')) mkdirSync('/run/sshd', { mode: 0o755 });
  const port = await freePort();
  writeFileSync(
    path.join(dir, 'sshd_config'),
    [
      `Port ${port}`,
      'ListenAddress 127.0.0.1',
      `HostKey ${path.join(dir, 'host')}`,
      `PidFile ${path.join(dir, 'sshd.pid')}`,
      'AuthorizedKeysFile .ssh/authorized_keys',
      'PasswordAuthentication no',
      'KbdInteractiveAuthentication no',
      'UsePAM no',
      `AllowUsers ${DEVICE_USER}`,
      'StrictModes no',
      'Subsystem sftp internal-sftp',
      '',
    ].join('\n'),
  );
  const child: ChildProcess = spawn('/usr/sbin/sshd', ['-D', '-e', '-f', path.join(dir, 'sshd_config')], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let log = '';
  child.stderr!.on('data', (c: Buffer) => (log = (log + c.toString()).slice(-4_000)));
  for (let i = 0; !log.includes('Server listening'); i++) {
    if (i > 100 || child.exitCode !== null) throw new Error(`sshd did not start: ${log}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    port,
    hostKey: readFileSync(path.join(dir, 'host.pub'), 'utf8').trim(),
    otherHostKey: readFileSync(path.join(dir, 'other.pub'), 'utf8').trim(),
    privateKey: readFileSync(path.join(dir, 'user'), 'utf8'),
    async stop() {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export function userIds(): { uid: number; gid: number } {
  const id = (flag: string) => Number(execFileSync('id', [flag, DEVICE_USER]).toString().trim());
  return { uid: id('-u'), gid: id('-g') };
}
