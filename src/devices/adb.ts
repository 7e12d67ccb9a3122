// Android devices through Debian's adb client, run in the sandbox like every
// program dossier starts, with no network: the one way out of its sandbox is a
// unix socket the worker relays to the host's adb server on loopback (adb's
// ADB_SERVER_SOCKET), so adb reaches that server and nothing else of the host's
// network. The server does the talking to the phone (USB, or `adb connect`).
import { randomBytes } from 'node:crypto';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { DossierError } from '../domain/errors.ts';
import { streamHelper, type HelperRun } from '../sandbox/helpers.ts';
import type { Sandbox } from '../sandbox/sandbox.ts';
import { CappedOutput, type DeviceSession, type ExecResult, unavailable } from './device.ts';
import { commandLine, quote } from './quote.ts';
import { whenAborted } from '../domain/abort.ts';

const HOME = '/tmp';
/** Where a sandboxed adb finds the relay to the adb server. */
const RELAY_INSIDE = '/run/adb-server.sock';

/** The adb server's port on the host's loopback: adb's own default, or ANDROID_ADB_SERVER_PORT as adb reads it. */
export function adbServerPort(): number {
  const port = Number(process.env.ANDROID_ADB_SERVER_PORT);
  return Number.isInteger(port) && port > 0 && port < 65_536 ? port : 5037;
}

export interface AdbRelay {
  /** The socket, in a folder only the worker's uid can enter. */
  socket: string;
  close(): Promise<void>;
}

/** A unix socket that relays each connection to 127.0.0.1:`port` (the adb server), and to nothing else. */
export async function adbServerRelay(port = adbServerPort()): Promise<AdbRelay> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'dossier-adb-')); // 0700
  const socket = path.join(dir, 'adb-server.sock');
  const open = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(port, '127.0.0.1');
    const end = () => {
      client.destroy();
      upstream.destroy();
      open.delete(client);
      open.delete(upstream);
    };
    open.add(client).add(upstream);
    for (const side of [client, upstream]) side.on('error', end).on('close', end);
    client.pipe(upstream).pipe(client);
  });
  try {
    await new Promise<void>((resolve, reject) => server.once('error', reject).listen(socket, resolve));
    // The program's leased uid connects to it inside its sandbox; the folder keeps everyone else out.
    await chmod(socket, 0o666);
  } catch (err) {
    server.close();
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
  return {
    socket,
    async close() {
      for (const s of open) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** How a program of an adb session starts: sandboxed, no network, the relay to the adb server mounted in. */
export function adbRun(relay: AdbRelay, run: Omit<HelperRun, 'env'>): HelperRun {
  return {
    ...run,
    env: { HOME, ANDROID_SDK_HOME: HOME, ADB_SERVER_SOCKET: `localfilesystem:${RELAY_INSIDE}` },
    mounts: [{ host: relay.socket, inside: RELAY_INSIDE }, ...(run.mounts ?? [])],
  };
}

/** The phone an adb session talks to, and how its adb reaches the server. */
interface AdbTarget {
  /** The device's name in dossier's registry. */
  device: string;
  serial: string;
  sandbox: Sandbox;
  relay: AdbRelay;
}

interface AdbOptions {
  timeoutMs: number;
  maxOutputBytes: number;
  signal: AbortSignal;
  stdin?: string;
  mounts?: { host: string; inside: string }[];
}

/** One adb command, its output capped; the adb server is reached through the relay only. */
async function runAdb(to: AdbTarget, args: string[], opts: AdbOptions): Promise<ExecResult> {
  const { sandbox, relay, serial } = to;
  const t0 = performance.now();
  const helper = streamHelper(
    sandbox,
    adbRun(relay, {
      program: 'adb',
      pkg: 'adb',
      args: ['-s', serial, ...args],
      mounts: opts.mounts,
      timeoutMs: opts.timeoutMs,
    }),
  );
  const stdout = new CappedOutput(opts.maxOutputBytes);
  const stderr = new CappedOutput(opts.maxOutputBytes);
  helper.stdout.on('data', (c: Buffer) => stdout.push(c));
  helper.stderr?.on('data', (c: Buffer) => stderr.push(c));
  const onAbort = () => helper.stop();
  const stopAbort = whenAborted(opts.signal, onAbort);
  let code: number | null = 0;
  let endedBy: ExecResult['endedBy'] = 'exit';
  try {
    await helper.done;
  } catch (err) {
    if (err instanceof DossierError && err.code === 'provider_timeout') endedBy = 'timeout';
    code = Number(/exit (\d+)/.exec((err as Error).message)?.[1] ?? 1);
  } finally {
    stopAbort();
  }
  if (opts.signal.aborted) endedBy = 'cancel';
  return { code, signal: null, endedBy, stdout, stderr, durationMs: Math.round(performance.now() - t0) };
}

/** A file's bytes, or a folder as a tar stream, from the device. */
async function pullPath(to: AdbTarget, path: string): Promise<{ kind: 'file' | 'dir'; stream: Readable }> {
  const stat = await runAdb(
    to,
    ['shell', `[ -d ${quote(path)} ] && echo dir || ([ -e ${quote(path)} ] && echo file)`],
    { timeoutMs: 30_000, maxOutputBytes: 64, signal: new AbortController().signal },
  );
  const kind = stat.stdout.text().trim();
  if (kind !== 'dir' && kind !== 'file')
    throw new DossierError(
      'not_found',
      `No ${path} on device ${to.device}.`,
      'Check the path on the device.',
      { path },
    );
  const command = kind === 'dir' ? `tar -cf - -C ${quote(path)} .` : `cat ${quote(path)}`;
  const helper = streamHelper(
    to.sandbox,
    adbRun(to.relay, {
      program: 'adb',
      pkg: 'adb',
      args: ['-s', to.serial, 'exec-out', command],
      timeoutMs: 30 * 60_000,
    }),
  );
  return { kind, stream: helper.stdout as Readable };
}

/** Writes `file` to `path` on the device beside it first, then moves it into place. */
async function pushFile(to: AdbTarget, file: string, path: string, mode: number, overwrite: boolean) {
  const quiet = { maxOutputBytes: 64 * 1024, signal: new AbortController().signal };
  const refuse = () =>
    new DossierError(
      'invalid_params',
      `${path} already exists on device ${to.device}; nothing was written.`,
      'Pass overwrite: true to replace it, with a new idempotency_key.',
      { path },
    );
  const exists = await runAdb(to, ['shell', `[ -e ${quote(path)} ] && echo exists || echo absent`], {
    ...quiet,
    timeoutMs: 30_000,
  });
  if (exists.stdout.text().trim() === 'exists' && !overwrite) throw refuse();
  // Bytes go to a name of their own beside the target, then move into place
  // (mv -n when nothing may be replaced): the target is never half written.
  const staged = `${path}.dossier-${randomBytes(6).toString('hex')}`;
  const sent = await runAdb(to, ['push', '/input/file', staged], {
    ...quiet,
    timeoutMs: 30 * 60_000,
    mounts: [{ host: file, inside: '/input/file' }],
  });
  const cleanup = `rm -f ${quote(staged)}`;
  if (sent.code !== 0) {
    await runAdb(to, ['shell', cleanup], { ...quiet, timeoutMs: 30_000 });
    throw new DossierError(
      'invalid_params',
      `Cannot write ${path} on device ${to.device}: ${sent.stderr.text().trim() || sent.stdout.text().trim()}`,
      'Check the folder exists and is writable by the shell user.',
      { path },
    );
  }
  const placed = await runAdb(
    to,
    [
      'shell',
      `if ! chmod ${mode.toString(8)} ${quote(staged)}; then ${cleanup}; echo chmod failed; ` +
        `else mv ${overwrite ? '-f' : '-n'} ${quote(staged)} ${quote(path)}; ` +
        `if [ -e ${quote(staged)} ]; then ${cleanup}; echo exists; else echo placed; fi; fi`,
    ],
    { ...quiet, timeoutMs: 60_000 },
  );
  const outcome = placed.stdout.text().trim();
  if (outcome !== 'placed') {
    if (outcome === 'exists' && !overwrite) throw refuse();
    throw new DossierError(
      'invalid_params',
      `Cannot place the pushed file at ${path} on device ${to.device}: ${outcome} ${placed.stderr.text().trim()}`,
      'Check the folder is writable by the shell user.',
      { path },
    );
  }
}

export async function openAdb(device: string, serial: string, sandbox: Sandbox): Promise<DeviceSession> {
  const relay = await adbServerRelay();
  const to: AdbTarget = { device, serial, sandbox, relay };
  const adb = (args: string[], opts: AdbOptions) => runAdb(to, args, opts);
  let state: ExecResult;
  try {
    state = await adb(['get-state'], {
      timeoutMs: 15_000,
      maxOutputBytes: 4_096,
      signal: new AbortController().signal,
    });
  } catch (err) {
    await relay.close();
    throw err;
  }
  if (state.code !== 0 || state.stdout.text().trim() !== 'device') {
    await relay.close();
    throw unavailable(
      device,
      (state.stderr.text().trim() || state.stdout.text().trim() || 'adb get-state failed').split('\n').pop()!,
      `Check with \`adb devices\` on the device worker that ${serial} is attached and authorized (for adb over TCP: \`adb connect ${serial}\`).`,
    );
  }

  return {
    exec: (req) => adb(['shell', commandLine(req.argv, req.env)], req),
    pull: (path) => pullPath(to, path),
    push: (file, path, mode, overwrite) => pushFile(to, file, path, mode, overwrite),
    async logs(req) {
      if (req.source !== 'logcat')
        throw new DossierError(
          'unsupported_target',
          `An adb device shows logcat, not ${req.source}.`,
          'Use source "logcat".',
          { device },
        );
      const result = await adb(['logcat', '-T', '1', '-v', 'threadtime'], {
        timeoutMs: req.durationMs,
        maxOutputBytes: req.maxBytes,
        signal: req.signal,
      });
      return result.stdout;
    },
    install: (file, signal) =>
      adb(['install', '-r', '/input/package.apk'], {
        timeoutMs: 10 * 60_000,
        maxOutputBytes: 256 * 1024,
        signal,
        mounts: [{ host: file, inside: '/input/package.apk' }],
      }),
    reboot: (signal) => adb(['reboot'], { timeoutMs: 60_000, maxOutputBytes: 64 * 1024, signal }),
    close: () => relay.close(),
  };
}
