// SSH devices through ssh2: the host key is pinned (an unknown or changed key
// refuses the connection, naming both fingerprints), the private key is used
// from memory only, and every command is argv quoted for the device's shell.
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { PassThrough, type Readable } from 'node:stream';
import { Client, type ClientChannel, type SFTPWrapper } from 'ssh2';
import { DossierError } from '../domain/errors.ts';
import {
  CappedOutput,
  type DeviceSession,
  type ExecRequest,
  type ExecResult,
  type LogRequest,
  unavailable,
  unsupported,
} from './device.ts';
import { commandLine } from './quote.ts';
import { whenAborted } from '../domain/abort.ts';

export interface SshConfig {
  host: string;
  port: number;
  user: string;
  /** SHA256:… of the pinned host key. */
  host_key_fingerprint: string;
  reboot_command: string[];
}

export interface SshCredential {
  private_key: string;
  passphrase?: string;
}

/** The SHA256 fingerprint of a host key, as OpenSSH prints it. */
export function fingerprintOf(key: Buffer): string {
  return `SHA256:${createHash('sha256').update(key).digest('base64').replace(/=+$/, '')}`;
}

/** A pinned key given as an OpenSSH public key line or as a fingerprint, as a fingerprint. */
export function pinnedFingerprint(hostKey: string): string {
  const t = hostKey.trim();
  if (/^SHA256:[A-Za-z0-9+/]{43}$/.test(t)) return t;
  const blob = t.split(/\s+/)[1];
  if (!blob || !/^[A-Za-z0-9+/]+=*$/.test(blob)) {
    throw new DossierError(
      'invalid_params',
      'host_key is neither an OpenSSH public key line nor a SHA256 fingerprint.',
      'Pass the line of the host’s /etc/ssh/ssh_host_*_key.pub, or ssh-keygen -lf’s SHA256:… value.',
    );
  }
  return fingerprintOf(Buffer.from(blob, 'base64'));
}

const CONNECT_TIMEOUT_MS = 15_000;
/**
 * A device drops handshakes when many arrive at once (OpenSSH's MaxStartups, 10 unauthenticated
 * connections by default, then drops at random): such a drop is tried again after a short random
 * pause, this many times in all. Nothing has been sent to the device before a handshake completes.
 */
const HANDSHAKE_ATTEMPTS = 6;
const HANDSHAKE_PAUSE_MS = 250;

/** The server closed the connection before the handshake ended: busy, not down. */
function droppedHandshake(err: Error & { code?: string }): boolean {
  return /lost before handshake/i.test(err.message) || err.code === 'ECONNRESET';
}

/** A connected device: its command channels and its SFTP session (opened once, on first use). */
class SshConnection {
  private sftpSession: Promise<SFTPWrapper> | undefined;

  constructor(
    readonly device: string,
    readonly client: Client,
  ) {}

  channel(command: string): Promise<ClientChannel> {
    return new Promise<ClientChannel>((resolve, reject) =>
      this.client.exec(command, (err, stream) =>
        err
          ? reject(unavailable(this.device, err.message, 'Retry with a new key once the device answers.'))
          : resolve(stream),
      ),
    );
  }

  sftp(): Promise<SFTPWrapper> {
    this.sftpSession ??= new Promise<SFTPWrapper>((resolve, reject) =>
      this.client.sftp((err, s) =>
        err
          ? reject(
              unavailable(
                this.device,
                `no SFTP: ${err.message}`,
                'Enable the sftp subsystem in the device’s sshd.',
              ),
            )
          : resolve(s),
      ),
    );
    return this.sftpSession;
  }

  /** One command, its output capped, ended on timeout or cancel. */
  async run(command: string, req: Omit<ExecRequest, 'argv' | 'env'>): Promise<ExecResult> {
    const t0 = performance.now();
    const stream = await this.channel(command);
    const stdout = new CappedOutput(req.maxOutputBytes);
    const stderr = new CappedOutput(req.maxOutputBytes);
    stream.on('data', (c: Buffer) => stdout.push(c));
    stream.stderr.on('data', (c: Buffer) => stderr.push(c));
    stream.end(req.stdin ?? '');
    let endedBy: ExecResult['endedBy'] = 'exit';
    const end = (why: ExecResult['endedBy']) => {
      endedBy = why;
      // Ask the remote side to end the program, then drop the channel.
      stream.signal('KILL');
      stream.close();
    };
    const timer = setTimeout(() => end('timeout'), req.timeoutMs);
    const onAbort = () => end('cancel');
    const stopAbort = whenAborted(req.signal, onAbort);
    const [code, signal] = await new Promise<[number | null, string | null]>((resolve) =>
      stream.once('close', (c: number | null, s: string | null) => resolve([c ?? null, s ?? null])),
    );
    clearTimeout(timer);
    stopAbort();
    return { code, signal, endedBy, stdout, stderr, durationMs: Math.round(performance.now() - t0) };
  }

  /** A file's size on the device, or 0 when it does not exist yet (tail -F waits for it). */
  async sizeOf(path: string): Promise<number> {
    const s = await this.sftp();
    return new Promise((resolve) => s.stat(path, (err, st) => resolve(err ? 0 : Number(st.size))));
  }
}

/** Connects, trying again (after a short random pause) while the device drops the handshake. */
async function connect(device: string, config: SshConfig, credential: SshCredential): Promise<Client> {
  let client = new Client();
  for (let attempt = 1; ; attempt++) {
    const failure = await handshake(client, device, config, credential);
    if (!failure) return client;
    client.end();
    if (!failure.dropped || attempt >= HANDSHAKE_ATTEMPTS) throw failure.error;
    await new Promise((r) => setTimeout(r, HANDSHAKE_PAUSE_MS * attempt * (0.5 + Math.random())));
    client = new Client();
  }
}

/** A file over SFTP, or a folder as a tar stream. */
async function pull(
  c: SshConnection,
  path: string,
  signal: AbortSignal,
): Promise<{ kind: 'file' | 'dir'; stream: Readable }> {
  const { device } = c;
  const s = await c.sftp();
  const stat = await new Promise<{ isDirectory(): boolean }>((resolve, reject) =>
    s.stat(path, (err, st) =>
      err
        ? reject(
            new DossierError(
              'not_found',
              `No ${path} on device ${device}.`,
              'Check the path on the device.',
              { path },
            ),
          )
        : resolve(st),
    ),
  );
  if (!stat.isDirectory()) {
    const stream = s.createReadStream(path);
    whenAborted(signal, () => stream.destroy(new Error('cancelled')));
    return { kind: 'file', stream };
  }
  const tar = await c.channel(
    commandLine(['tar', '-cf', '-', '-C', path, '.'], { PATH: '/usr/bin:/bin:/usr/sbin:/sbin' }),
  );
  tar.end();
  const out = new PassThrough();
  tar.pipe(out);
  whenAborted(signal, () => (tar.close(), out.destroy(new Error('cancelled'))));
  return { kind: 'dir', stream: out };
}

/** Writes `file` to `path` over SFTP; without `overwrite`, an existing file is refused and left alone. */
async function push(c: SshConnection, file: string, path: string, mode: number, overwrite: boolean) {
  const { device } = c;
  const s = await c.sftp();
  const handle = await new Promise<Buffer>((resolve, reject) =>
    // wx: create, failing if it exists; nothing is written then.
    s.open(path, overwrite ? 'w' : 'wx', { mode }, (err, h) => {
      if (!err) return resolve(h);
      // SFTP reports "exists" as a generic failure: ask, to say which it was.
      s.stat(path, (missing) =>
        reject(
          !missing && !overwrite
            ? new DossierError(
                'invalid_params',
                `${path} already exists on device ${device}; nothing was written.`,
                'Pass overwrite: true to replace it, with a new idempotency_key.',
                { path },
              )
            : new DossierError(
                'invalid_params',
                `Cannot write ${path} on device ${device}: ${err.message}`,
                'Check the folder exists and is writable by the device user.',
                { path },
              ),
        ),
      );
    }),
  );
  let position = 0;
  try {
    for await (const chunk of createReadStream(file) as AsyncIterable<Buffer>) {
      await new Promise<void>((resolve, reject) =>
        s.write(handle, chunk, 0, chunk.length, position, (err) => (err ? reject(err) : resolve())),
      );
      position += chunk.length;
    }
    await new Promise<void>((resolve, reject) =>
      s.fchmod(handle, mode, (err) => (err ? reject(err) : resolve())),
    );
  } finally {
    await new Promise<void>((resolve) => s.close(handle, () => resolve()));
  }
}

/** Follows the journal or a file, or reads dmesg, for the request's duration. */
async function logs(c: SshConnection, req: LogRequest): Promise<CappedOutput> {
  const { device } = c;
  const seconds = Math.max(1, Math.ceil(req.durationMs / 1000));
  // A file is followed from its size when the capture begins (read over SFTP), not from whenever
  // tail gets to open it: every line written after the capture said it follows is in it.
  const fromByte = req.source === 'file' ? await c.sizeOf(req.path!) : null;
  const argv =
    req.source === 'journal'
      ? ['timeout', String(seconds), 'journalctl', '--follow', '--no-pager', '--lines=0']
      : req.source === 'dmesg'
        ? ['dmesg']
        : req.source === 'file'
          ? ['timeout', String(seconds), 'tail', '-c', `+${fromByte! + 1}`, '-F', req.path!]
          : null;
  if (!argv) throw unsupported(device, 'ssh', 'show logcat (it is an Android log: use an adb device)');
  req.onFollowing?.({ phase: 'following', ...(fromByte === null ? {} : { from_byte: fromByte }) });
  const result = await c.run(commandLine(argv, { PATH: '/usr/bin:/bin:/usr/sbin:/sbin' }), {
    timeoutMs: req.durationMs + 10_000,
    maxOutputBytes: req.maxBytes,
    signal: req.signal,
  });
  return result.stdout;
}

export async function openSsh(
  device: string,
  config: SshConfig,
  credential: SshCredential,
): Promise<DeviceSession> {
  const client = await connect(device, config, credential);
  const c = new SshConnection(device, client);
  return {
    exec: (req) => c.run(commandLine(req.argv, req.env), req),
    pull: (path, signal) => pull(c, path, signal),
    push: (file, path, mode, overwrite) => push(c, file, path, mode, overwrite),
    logs: (req) => logs(c, req),
    install: async () => {
      throw unsupported(
        device,
        'ssh',
        'install packages through dossier (push the package with device_push, then run the device’s package manager with device_exec)',
      );
    },

    reboot: (signal) =>
      c.run(commandLine(config.reboot_command, { PATH: '/usr/bin:/bin:/usr/sbin:/sbin' }), {
        timeoutMs: 30_000,
        maxOutputBytes: 64 * 1024,
        signal,
      }),

    async close() {
      client.end();
    },
  };
}

/** One handshake on `client`: nothing when it is ready, else why not and whether the device dropped it. */
function handshake(
  client: Client,
  device: string,
  config: SshConfig,
  credential: SshCredential,
): Promise<{ error: DossierError; dropped: boolean } | undefined> {
  let offered: string | undefined;
  return new Promise((resolve) => {
    client.once('ready', () => resolve(undefined));
    // Always listened to: ssh2 may report a connection's end twice (a reset, then the close), and an
    // 'error' nobody listens to would end the worker.
    client.on('error', (err: Error & { level?: string; code?: string }) => {
      if (offered && offered !== config.host_key_fingerprint) {
        resolve({
          dropped: false,
          error: new DossierError(
            'policy_denied',
            `Device ${device} offered host key ${offered}, not the pinned ${config.host_key_fingerprint}; nothing was sent.`,
            'If the device was re-imaged on purpose, retire it and register it again with its new host key; otherwise treat it as compromised or spoofed.',
            { device, offered, pinned: config.host_key_fingerprint },
          ),
        });
      } else if (err.level === 'client-authentication') {
        resolve({
          dropped: false,
          error: unavailable(
            device,
            `${config.user} could not log in with the stored key`,
            'Check the device’s authorized_keys for the registered key, or register the device again with the right key.',
          ),
        });
      } else {
        resolve({
          dropped: droppedHandshake(err),
          error: unavailable(
            device,
            err.message,
            `Check that ${config.host}:${config.port} is up and reachable from the device workers (e.g. ssh -p ${config.port} ${config.user}@${config.host}).`,
          ),
        });
      }
    });
    client.connect({
      host: config.host,
      port: config.port,
      username: config.user,
      privateKey: credential.private_key,
      passphrase: credential.passphrase,
      readyTimeout: CONNECT_TIMEOUT_MS,
      hostVerifier: (key: Buffer) => {
        offered = fingerprintOf(key);
        return offered === config.host_key_fingerprint;
      },
    });
  });
}
