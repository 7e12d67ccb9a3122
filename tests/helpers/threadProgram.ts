// Run in a worker thread (through src/activities/extraction/thread.mjs, as the extraction thread
// is): starts `echo $PPID` as the sandbox starts a program, and posts the pid of its parent.
import { isMainThread, parentPort } from 'node:worker_threads';
import { startProgram } from '../../src/sandbox/launcher.ts';

/** Starts `echo $PPID` as the sandbox starts a program; resolves with its parent's pid. */
export function parentOfAProgram(): Promise<number> {
  const child = startProgram({
    file: '/usr/bin/sh',
    args: ['-c', 'echo $PPID'],
    cwd: '/',
    env: {},
    stdin: 'ignore',
    fds: [],
    data: [],
    endGroupOnExit: false,
  });
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c));
  child.stderr.resume();
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', () => resolve(Number(out.trim())));
  });
}

if (!isMainThread) void parentOfAProgram().then((pid) => parentPort!.postMessage(pid));
