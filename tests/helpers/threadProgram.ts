// Run in a worker thread (through src/activities/extraction/thread.mjs with the role
// 'program-parent', as the extraction thread is run): starts `echo $PPID` as the sandbox starts a
// program, posts the pid of its parent, and stays until the test ends it.
import { parentPort, workerData } from 'node:worker_threads';
import { startProgram, type ProgramSpec } from '../../src/sandbox/launcher.ts';

/** A program with no input, descriptors or environment, run from `/`. */
export function plainProgram(file: string, args: string[] = []): ProgramSpec {
  return { file, args, cwd: '/', env: {}, stdin: 'ignore', fds: [], data: [], endGroupOnExit: false };
}

/** Starts `echo $PPID` as the sandbox starts a program; resolves with its parent's pid. */
export function parentOfAProgram(): Promise<number> {
  const child = startProgram(plainProgram('/usr/bin/sh', ['-c', 'echo $PPID']));
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c));
  child.stderr.resume();
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', () => resolve(Number(out.trim())));
  });
}

if ((workerData as { role?: string } | null)?.role === 'program-parent') {
  // Held open by the port until the test terminates the thread: it must not end on its own first.
  parentPort!.ref();
  void parentOfAProgram().then((pid) => parentPort!.postMessage(pid));
}
