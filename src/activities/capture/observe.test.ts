import { execFileSync } from 'node:child_process';
import { mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { scratchDir } from '../../../tests/helpers/scratch.ts';
import { listTree, NOT_REGULAR, readStrace, tracedExit } from './observe.ts';

const root = scratchDir('observe');
const scratch = () => mkdtempSync(path.join(root, 'case-'));

describe('reading what a sandboxed program could write', () => {
  it('reads a tracer output file line by line, CRLF or not', async () => {
    const file = path.join(scratch(), 'trace.txt');
    writeFileSync(file, '12 openat(AT_FDCWD, "/x", O_RDONLY) = 3\r\n12 close(3) = 0\n');
    const { events, truncated, unread } = await readStrace(file, 10);
    expect(events.map((e) => e.syscall)).toEqual(['openat', 'close']);
    expect([truncated, unread]).toEqual([false, undefined]);
  });

  it('never follows a link the program put there: a host file stays unread', async () => {
    const dir = scratch();
    const secret = path.join(dir, 'secret');
    writeFileSync(secret, 'host secret\n');
    symlinkSync(secret, path.join(dir, 'trace.txt'));
    expect(await readStrace(path.join(dir, 'trace.txt'), 10)).toEqual({
      events: [],
      truncated: false,
      unread: NOT_REGULAR,
    });
    expect(await tracedExit(path.join(dir, 'trace.txt'))).toBeUndefined();
    symlinkSync('/dev/zero', path.join(dir, 'zero'));
    expect((await readStrace(path.join(dir, 'zero'), 10)).unread).toBe(NOT_REGULAR);
    // The workspace listing names a link and hashes no file through one.
    const { files } = await listTree(dir, 10, 1 << 20);
    expect(files.find((f) => f.path === 'trace.txt')).toMatchObject({ type: 'symlink', sha256: null });
  });

  it('does not wait on a FIFO, which would block the worker until someone writes it', async () => {
    const fifo = path.join(scratch(), 'trace.txt');
    execFileSync('mkfifo', [fifo]);
    expect((await readStrace(fifo, 10)).unread).toBe(NOT_REGULAR);
    expect(await tracedExit(fifo)).toBeUndefined();
  });

  it('cuts a line with no end instead of holding all of it', async () => {
    const file = path.join(scratch(), 'trace.txt');
    writeFileSync(file, `${'x'.repeat(3 << 20)}\n12 close(3) = 0\n`);
    const { events } = await readStrace(file, 10);
    expect(events).toHaveLength(2);
    expect(events[0]!.args.length).toBeLessThanOrEqual(300);
    expect(events[1]!.syscall).toBe('close');
  });
});
