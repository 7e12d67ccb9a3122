// The launcher starts sandboxed programs for the thread that forked it: real
// programs, real bwrap, the launcher as its own process (no stand-ins).
import { fork } from 'node:child_process';
import { closeSync, openSync, readdirSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { childrenOf } from './processes.ts';
import type { SandboxedProcess } from './sandbox.ts';
import { testSandbox } from '../../tests/helpers/sandbox.ts';
import { startProgram } from './launcher.ts';
import { parentOfAProgram, plainProgram } from '../../tests/helpers/threadProgram.ts';

const sandbox = testSandbox(1_900_000);

function collect(proc: SandboxedProcess) {
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  proc.child.stdout.on('data', (c: Buffer) => out.push(c));
  proc.child.stderr.on('data', (c: Buffer) => err.push(c));
  return async () => {
    const exit = await proc.exited;
    if (!(proc.child.stdout.readableEnded && proc.child.stderr.readableEnded)) {
      await new Promise((resolve) => proc.child.once('close', resolve));
    }
    return { exit, stdout: Buffer.concat(out), stderr: Buffer.concat(err) };
  };
}

/** The launcher process this one forked (it is the parent of every program). */
function launcherPid(): number | undefined {
  return childrenOf(process.pid).find((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('launcher.mjs');
    } catch {
      return false;
    }
  });
}

describe('the sandbox launcher', () => {
  it('runs a program with its input, output, errors and exit status', async () => {
    const proc = sandbox.spawn({
      argv: ['/usr/bin/sh', '-c', 'cat; echo to-stderr >&2; exit 7'],
      env: { PATH: '/usr/bin' },
    });
    const done = collect(proc);
    proc.child.stdin?.end('the input\n');
    const { exit, stdout, stderr } = await done();
    expect(exit).toEqual({ code: 7, signal: null });
    expect(stdout.toString()).toBe('the input\n');
    expect(stderr.toString()).toBe('to-stderr\n');
    expect(launcherPid()).toBeDefined();
    expect(proc.child.pid).toBeGreaterThan(0);
  });

  it('gives an input known in advance whole, and leaves no stdin to write to', async () => {
    const input = 'x'.repeat(1024 * 1024) + '\nend\n';
    const proc = sandbox.spawn({ argv: ['/usr/bin/wc', '-c'], env: {}, stdin: { content: input } });
    expect(proc.child.stdin).toBeNull();
    const { exit, stdout } = await collect(proc)();
    expect(exit.code).toBe(0);
    expect(stdout.toString().trim()).toBe(String(input.length));
  });

  it('closes the pipe of a reader that stops early: the program gets EPIPE, nothing is left open', async () => {
    const fds = () => readdirSync('/proc/self/fd').length;
    const before = fds();
    for (let i = 0; i < 5; i++) {
      const proc = sandbox.spawn({ argv: ['/usr/bin/yes'], env: {}, stdin: 'ignore' });
      for await (const chunk of proc.child.stdout) {
        expect((chunk as Buffer).length).toBeGreaterThan(0);
        break; // destroys the stream
      }
      proc.child.stderr.resume();
      const exit = await proc.exited; // `yes` ends on its broken pipe, not at any timeout
      expect(exit.code ?? exit.signal).toBeTruthy();
    }
    await sleep(100);
    expect(fds()).toBeLessThanOrEqual(before + 1);
  });

  it('passes 32 MiB of output whole to a reader that starts late and reads slowly', async () => {
    const proc = sandbox.spawn({
      argv: ['/usr/bin/head', '-c', String(32 * 1024 * 1024), '/dev/zero'],
      env: {},
      stdin: 'ignore',
    });
    await sleep(300); // the program fills every buffer meanwhile and waits
    let bytes = 0;
    for await (const chunk of proc.child.stdout) {
      bytes += (chunk as Buffer).length;
      if (bytes % (4 * 1024 * 1024) < (chunk as Buffer).length) await sleep(10);
    }
    expect(bytes).toBe(32 * 1024 * 1024);
    expect((await proc.exited).code).toBe(0);
  });

  it('ends an empty output only once a late reader has it', async () => {
    const proc = sandbox.spawn({ argv: ['/usr/bin/true'], env: {}, stdin: 'ignore' });
    await proc.exited;
    await sleep(200);
    const ended = new Promise((resolve) => proc.child.stdout.once('end', resolve));
    const closed = new Promise((resolve) => proc.child.once('close', resolve));
    proc.child.stdout.resume();
    proc.child.stderr.resume();
    await ended;
    await closed;
  });

  it('applies a kill asked for before the program had started', async () => {
    const started = Date.now();
    const proc = sandbox.spawn({ argv: ['/usr/bin/sleep', '30'], env: {}, stdin: 'ignore' });
    proc.kill(); // at once: the launcher has not answered yet
    expect(proc.child.pid).toBeUndefined();
    const exit = await proc.exited;
    // Killed: bwrap itself by SIGKILL, or (when the sandbox's first process was reached first)
    // bwrap reporting it as 128 + 9, which captures read as SIGKILL too (capture.ts, signal_inferred).
    expect(exit.signal === 'SIGKILL' || exit.code === 128 + 9, JSON.stringify(exit)).toBe(true);
    expect(Date.now() - started).toBeLessThan(20_000);
  });

  it('runs nothing when a mounted descriptor names another file by the time the launcher opens it', async () => {
    // The launcher itself, spoken to as the worker speaks to it: the descriptor's /proc link now
    // names a file whose device and inode are not the ones the worker checked.
    const launcher = fork(new URL('./launcher.mjs', import.meta.url), [], {
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    });
    const fd = openSync('/usr/bin/true', 'r');
    try {
      const answer = new Promise<Record<string, unknown>>((resolve) => launcher.once('message', resolve));
      launcher.send({
        id: 1,
        file: '/usr/bin/true',
        args: [],
        cwd: '/',
        env: {},
        stdin: 'ignore',
        fds: [{ link: `/proc/${process.pid}/fd/${fd}`, file: '1:1' }],
        data: [],
        endGroupOnExit: false,
      });
      expect(await answer).toMatchObject({
        id: 1,
        error: { message: expect.stringMatching(/no longer the file the worker checked/) },
      });
    } finally {
      closeSync(fd);
      launcher.disconnect();
    }
  });

  it('keeps programs running through a Ctrl-C to its group, and reports them killed when it dies', async () => {
    const proc = sandbox.spawn({ argv: ['/usr/bin/sleep', '30'], env: {}, stdin: 'ignore' });
    await proc.started;
    const launcher = launcherPid()!;
    process.kill(-launcher, 'SIGINT'); // the launcher leads its own group
    await sleep(300);
    expect(childrenOf(launcher)).toContain(proc.child.pid);
    process.kill(launcher, 'SIGKILL');
    const exit = await proc.exited;
    expect(exit.signal).toBe('SIGKILL');
    expect(exit.error?.message).toMatch(/launcher process ended while it ran/);
    // The worker's fault, not the input's: an extraction does not call the artifact corrupt.
    expect(exit.error).toMatchObject({ code: 'provider_unavailable', retryable: true });
    // Its output ends (a reader is never left waiting), and it is never signalled again.
    for await (const _ of proc.child.stdout) void _;
    expect(proc.child.kill('SIGKILL')).toBe(false);
    // The sandbox went with it (bwrap --die-with-parent), and the next program gets a new launcher.
    await expect.poll(() => existsPid(proc.child.pid!), { timeout: 5_000 }).toBe(false);
    const next = sandbox.spawn({ argv: ['/usr/bin/echo', 'again'], env: {}, stdin: 'ignore' });
    const { stdout } = await collect(next)();
    expect(stdout.toString()).toBe('again\n');
    expect(launcherPid()).not.toBe(launcher);
  });

  it('refuses a descriptor that is not open before anything starts', () => {
    expect(() =>
      sandbox.spawn({ argv: ['/usr/bin/true'], env: {}, mounts: [{ host: 999_999, inside: '/x' }] }),
    ).toThrow(/EBADF/);
  });

  it('answers a program that cannot start with an error, as a ChildProcess does', async () => {
    const child = startProgram(plainProgram('/nonexistent/program'));
    const err = await new Promise<Error & { code?: string }>((resolve) => child.once('error', resolve));
    expect(err.code).toBe('ENOENT');
    expect(child.pid).toBeUndefined();
  });

  it("starts a worker thread's programs from a launcher of the thread's own, which ends with the thread", async () => {
    const mainLauncher = await parentOfAProgram();
    expect(readFileSync(`/proc/${mainLauncher}/cmdline`, 'utf8')).toContain('launcher.mjs');
    // As the extraction thread runs: through thread.mjs, from the sources.
    const thread = new Worker(new URL('../activities/extraction/thread.mjs', import.meta.url), {
      workerData: {
        module: new URL('../../tests/helpers/threadProgram.ts', import.meta.url).href,
        role: 'program-parent',
      },
    });
    try {
      const threadLauncher = await new Promise<number>((resolve, reject) => {
        thread.once('message', resolve);
        thread.once('error', reject);
      });
      // Not forked from the worker (a copy of its page tables per program), nor the main thread's.
      expect(threadLauncher).not.toBe(process.pid);
      expect(threadLauncher).not.toBe(mainLauncher);
      expect(readFileSync(`/proc/${threadLauncher}/cmdline`, 'utf8')).toContain('launcher.mjs');
      const parent = /^PPid:\s+(\d+)$/m.exec(readFileSync(`/proc/${threadLauncher}/status`, 'utf8'))?.[1];
      expect(Number(parent)).toBe(process.pid);
      await thread.terminate();
      // Its channel closed with the thread: it leaves no process behind.
      await expect.poll(() => existsPid(threadLauncher), { timeout: 5_000 }).toBe(false);
      expect(existsPid(mainLauncher)).toBe(true);
    } finally {
      await thread.terminate();
    }
  });
});

function existsPid(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}
