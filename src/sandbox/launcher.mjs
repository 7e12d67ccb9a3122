// The launcher: a small process that starts sandboxed programs for the
// worker process that forked it (src/sandbox/launcher.ts). A spawn() copies
// the page tables of the process that makes it, and a worker holds hundreds
// of MiB (its workflow isolates, the Temporal core); from this process of a
// few dozen MiB the same spawn is a fraction of a millisecond, and the
// worker's event loop never waits for it.
//
// Plain JavaScript with no imports of dossier's own, so it starts the same
// from dist/ and from the sources. It takes requests over its IPC channel,
// hands each program's stdio back as the sockets themselves (the worker reads
// and writes them directly), and reports the exit. It ignores the terminal's
// signals: the worker decides when programs end (a graceful shutdown lets
// running launches finish), and it exits when the worker's channel closes;
// every sandbox then goes with it (bwrap --die-with-parent).
import { Buffer } from 'node:buffer';
import { spawn } from 'node:child_process';
import { closeSync, fstat, open } from 'node:fs';
import process from 'node:process';
import { promisify } from 'node:util';

for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, () => undefined);
process.on('disconnect', () => process.exit(0));

const describe = (err) => ({ message: String(err?.message ?? err), code: err?.code });

// Plain descriptors (not FileHandles, which would close their number again when collected),
// opened off the event loop: a slow file system delays only its own program.
const openFd = promisify(open);
const statFd = promisify(fstat);

/** The programs started and not yet reaped, by request id. */
const running = new Map();

process.on('message', (req) => {
  // Node signals only a child it has not reaped: a pid that was this program's and is now
  // another process's is never signalled.
  if (req.kill) running.get(req.id)?.kill(req.kill);
  else void start(req);
});

async function start(req) {
  const { id } = req;
  const opened = [];
  const input = typeof req.stdin === 'object' ? req.stdin.content : undefined;
  let child;
  try {
    // The worker's open descriptors (a program pinned by the inode that was checked), by their
    // /proc links: the same file, whatever has happened to its name since; and if the worker
    // closed one too early and its number now names another file, nothing runs.
    for (const { link, file } of req.fds) {
      const fd = await openFd(link, 'r');
      opened.push(fd);
      const { dev, ino } = await statFd(fd, { bigint: true });
      if (`${dev}:${ino}` !== file) throw new Error(`${link} is no longer the file the worker checked`);
    }
    child = spawn(req.file, req.args, {
      cwd: req.cwd,
      env: req.env,
      // The program leads its own group and session: only the worker ends it.
      detached: true,
      stdio: [
        input === undefined ? req.stdin : 'pipe',
        'pipe',
        'pipe',
        ...opened,
        ...req.data.map(() => 'pipe'),
      ],
    });
  } catch (err) {
    process.send({ id, error: describe(err) });
    return;
  } finally {
    for (const fd of opened) closeSync(fd);
  }
  if (child.pid === undefined) {
    child.once('error', (err) => process.send({ id, error: describe(err) }));
    return;
  }
  running.set(id, child);
  // Nothing of the program's output may be read here: stop reading before the sockets are
  // handed over (a handle waits in Node's queue until the previous one is acknowledged). This
  // leans on net.Socket's internals (its handle and `reading` flag), as of Node 20 and 22;
  // src/sandbox/launcher.test.ts proves that output arrives whole.
  for (const stream of [child.stdout, child.stderr]) {
    stream._handle.reading = false;
    stream._handle.readStop();
  }
  const fill = (pipe, content) => {
    pipe.on('error', () => undefined); // the program may exit without reading it all
    pipe.end(typeof content === 'string' ? content : Buffer.from(content.base64, 'base64'));
  };
  if (input !== undefined) fill(child.stdin, input);
  req.data.forEach((content, i) => fill(child.stdio[3 + opened.length + i], content));
  process.send({ id, pid: child.pid });
  if (input === undefined && child.stdin) process.send({ id, stream: 'stdin' }, child.stdin);
  process.send({ id, stream: 'stdout' }, child.stdout);
  process.send({ id, stream: 'stderr' }, child.stderr);
  child.once('exit', (code, signal) => {
    running.delete(id);
    // What the program left in its group (`none` has no namespace that ends it): ended here,
    // before the exit is reported.
    if (req.endGroupOnExit) {
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        // nothing left in the group
      }
    }
    process.send({ id, exit: { code, signal } });
  });
}
