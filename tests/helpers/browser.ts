// A real browser for the tests: headless Chromium (Debian's `chromium`), driven
// over the DevTools protocol on a pipe (--remote-debugging-pipe: JSON messages
// ended by NUL on descriptors 3 and 4), so no driver library or WebSocket is
// needed. One page; navigate, evaluate, wait for a condition.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Readable, Writable } from 'node:stream';

/** The Chromium on PATH, or why there is none. */
export function chromium(): { path: string } | { missing: string } {
  for (const name of ['chromium', 'chromium-browser', 'google-chrome']) {
    const found = spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' });
    if (found.status === 0 && found.stdout.trim()) return { path: found.stdout.trim() };
  }
  return { missing: 'no chromium on PATH (apt-get install chromium)' };
}

export interface Browser {
  /** Opens `url` in the page and waits for its load. */
  goto(url: string): Promise<void>;
  /** The value of `expression` in the page (awaited when it is a promise). */
  evaluate<T>(expression: string): Promise<T>;
  /** Evaluates `expression` until it is truthy (at most `ms`), and returns its value. */
  waitFor<T>(expression: string, ms?: number): Promise<T>;
  close(): Promise<void>;
}

export async function openBrowser(binary: string): Promise<Browser> {
  const profile = mkdtempSync(path.join(os.tmpdir(), 'dossier-chromium-'));
  const child: ChildProcess = spawn(
    binary,
    [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--no-first-run',
      '--remote-debugging-pipe',
      `--user-data-dir=${profile}`,
      'about:blank',
    ],
    { stdio: ['ignore', 'ignore', 'ignore', 'pipe', 'pipe'] },
  );
  const input = child.stdio[3] as Writable;
  const output = child.stdio[4] as Readable;
  let next = 1;
  const waiting = new Map<number, { resolve(v: unknown): void; reject(e: Error): void }>();
  const events: { method: string; sessionId?: string }[] = [];
  let buffered = '';
  output.on('data', (chunk: Buffer) => {
    buffered += chunk.toString('utf8');
    let end;
    while ((end = buffered.indexOf('\0')) >= 0) {
      const message = JSON.parse(buffered.slice(0, end));
      buffered = buffered.slice(end + 1);
      if (message.id && waiting.has(message.id)) {
        const w = waiting.get(message.id)!;
        waiting.delete(message.id);
        if (message.error) w.reject(new Error(`${message.error.message} (${message.error.code})`));
        else w.resolve(message.result);
      } else if (message.method) events.push(message);
    }
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const send = (method: string, params: object = {}, sessionId?: string) =>
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    new Promise<any>((resolve, reject) => {
      const id = next++;
      waiting.set(id, { resolve, reject });
      input.write(`${JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) })}\0`);
    });
  const { targetInfos } = await send('Target.getTargets');
  const page = (targetInfos as { type: string; targetId: string }[]).find((t) => t.type === 'page');
  const { targetId } = page ?? (await send('Target.createTarget', { url: 'about:blank' }));
  const { sessionId } = await send('Target.attachToTarget', { targetId, flatten: true });
  await send('Page.enable', {}, sessionId);

  const evaluate = async <T>(expression: string): Promise<T> => {
    const { result, exceptionDetails } = await send(
      'Runtime.evaluate',
      { expression, awaitPromise: true, returnByValue: true },
      sessionId,
    );
    if (exceptionDetails) throw new Error(`in the page: ${JSON.stringify(exceptionDetails.exception)}`);
    return result.value as T;
  };
  return {
    async goto(url) {
      const seen = events.length;
      await send('Page.navigate', { url }, sessionId);
      for (let i = 0; i < 300; i++) {
        if (events.slice(seen).some((e) => e.method === 'Page.loadEventFired')) return;
        await new Promise((r) => setTimeout(r, 100));
      }
      throw new Error(`${url} did not load in 30 s`);
    },
    evaluate,
    async waitFor<T>(expression: string, ms = 30_000) {
      const until = Date.now() + ms;
      for (;;) {
        let value: T | undefined;
        try {
          value = await evaluate<T>(expression);
        } catch {
          // a page between two documents: ask again
        }
        if (value) return value;
        if (Date.now() > until) throw new Error(`not true in ${ms} ms: ${expression}`);
        await new Promise((r) => setTimeout(r, 200));
      }
    },
    async close() {
      await send('Browser.close').catch(() => undefined);
      const killer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(killer);
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
