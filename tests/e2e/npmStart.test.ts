// `npm start` as a user runs it: a process that brings the whole embedded stack
// up, writes dev.json, and on SIGINT/SIGTERM leaves nothing behind.
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import {
  closeSync,
  existsSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { call } from '../helpers/mcp.ts';
import { freePort } from '../helpers/ports.ts';
import { spawnDossier } from '../helpers/processes.ts';

const home = mkdtempSync(path.join(os.tmpdir(), 'dossier-npm-start-'));
afterAll(() => rmSync(home, { recursive: true, force: true }));

/** Every product a test started: one a failed assertion left running is ended after the test. */
const started: ChildProcess[] = [];
afterEach(() => {
  for (const child of started.splice(0))
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});

const startProduct = async (env: Record<string, string>, inherited: number[] = []) => {
  const product = await spawnDossier('start', env, 'dossier is ready', inherited);
  started.push(product.child);
  return product;
};

function processesUnder(dir: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(dir)) pids.push(Number(entry));
    } catch {
      // the process ended while we looked
    }
  }
  return pids;
}

async function stopProduct(child: ChildProcess, signal: NodeJS.Signals) {
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  child.kill(signal);
  return exited;
}

async function mcp(url: string, token: string) {
  const client = new Client({ name: 'npm-start-test', version: '1' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(url), {
      requestInit: { headers: { Authorization: `Bearer ${token}` } },
    }),
  );
  return client;
}

/** `npm start`'s environment on `dir`: free ports, the cached Temporal CLI and UI server. */
async function productEnv(dir: string): Promise<Record<string, string>> {
  return {
    DOSSIER_HOME: dir,
    DOSSIER_PORT: String(await freePort()),
    DOSSIER_TEMPORAL_PORT: String(await freePort()),
    DOSSIER_UI_PORT: String(await freePort()),
    DOSSIER_TEMPORAL_CLI: inject('temporalCli'),
    DOSSIER_TEMPORAL_UI_SERVER: inject('uiServer'),
  };
}

/** Launches `sleep seconds` under `key` and returns once its program runs (at most 10 s). */
async function sleepUntilRunning(client: Client, key: string, seconds: number) {
  await call(client, 'capture_process_scenario', {
    executable: '/usr/bin/sleep',
    args: [String(seconds)],
    timeout_ms: (seconds + 30) * 1000,
    wait_ms: 0,
    idempotency_key: key,
  });
  const began = async () =>
    (await call(client, 'get_launch', { idempotency_key: key })).progress?.phase === 'running';
  for (let i = 0; i < 100 && !(await began()); i++) await new Promise((r) => setTimeout(r, 100));
}

describe('npm start (the embedded default)', () => {
  it('brings the stack up, writes dev.json, serves MCP and the UI, and stops cleanly; a restart finds everything', async () => {
    const env = await productEnv(home);
    const first = await startProduct(env);
    const dev = JSON.parse(readFileSync(path.join(home, 'dev.json'), 'utf8'));
    expect(dev).toEqual({
      mcp_url: `http://127.0.0.1:${env.DOSSIER_PORT}/mcp`,
      token: expect.stringMatching(/^dsr_[A-Za-z0-9_-]{43}$/),
      temporal_address: `127.0.0.1:${env.DOSSIER_TEMPORAL_PORT}`,
      ui_url: `http://127.0.0.1:${env.DOSSIER_UI_PORT}`,
      namespace: 'dossier',
    });
    expect(first.output()).toContain(dev.token);
    expect(first.output()).toContain('claude mcp add');
    // The audit UI asks a browser to sign in first, is read-only, and reads payloads through its
    // own codec path, which the guard forwards to the gateway's team-scoped codec endpoint.
    const page = await fetch(dev.ui_url);
    expect(page.url).toBe(`${dev.ui_url}/dossier/sign-in?next=%2F`);
    expect(await page.text()).toContain('dev.json');
    const form = await fetch(`${dev.ui_url}/dossier/sign-in`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: dev.ui_url },
      body: new URLSearchParams({ token: dev.token }).toString(),
    });
    expect(form.status).toBe(303);
    // No cookie the sign-in sets carries the token: a server on another port of this host gets none.
    for (const cookie of form.headers.getSetCookie()) expect(cookie).not.toContain(dev.token.slice(4));
    const signedIn = {
      cookie: form.headers
        .getSetCookie()
        .map((c) => c.split(';')[0])
        .join('; '),
    };
    expect((await fetch(dev.ui_url, { headers: signedIn })).status).toBe(200);
    const settings = (await (
      await fetch(`${dev.ui_url}/api/v1/settings`, { headers: signedIn })
    ).json()) as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
    expect(settings.DisableWriteActions).toBe(true);
    expect(settings.Codec).toMatchObject({ Endpoint: '/codec', IncludeCredentials: false });
    expect((await fetch(dev.mcp_url, { method: 'POST', body: '{}' })).status).toBe(401);

    const client = await mcp(dev.mcp_url, dev.token);
    const launched = await call(client, 'capture_process_scenario', {
      executable: '/usr/bin/echo',
      args: ['npm-start-input'],
      idempotency_key: 'npm-start-1',
    });
    expect(launched.status).toBe('succeeded');
    await client.close();
    // The launch's input, sealed in Temporal, opens in the UI for the signed-in team.
    const history = (await (
      await fetch(
        `${dev.ui_url}/api/v1/namespaces/dossier/workflows/${encodeURIComponent(launched.launch.workflow_id)}/history`,
        { headers: signedIn },
      )
    ).json()) as { history: { events: Record<string, any>[] } }; // eslint-disable-line @typescript-eslint/no-explicit-any
    const payloads = history.history.events.find((e) => e.workflowExecutionStartedEventAttributes)!
      .workflowExecutionStartedEventAttributes.input.payloads;
    const decoded = await fetch(`${dev.ui_url}/codec/decode`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: dev.ui_url, ...signedIn },
      body: JSON.stringify({ payloads }),
    });
    expect(decoded.status).toBe(200);
    const opened = ((await decoded.json()) as { payloads: { data: string }[] }).payloads;
    expect(Buffer.from(opened[0]!.data, 'base64').toString()).toContain('npm-start-input');

    expect(await stopProduct(first.child, 'SIGINT')).toBe(0);
    expect(processesUnder(home)).toEqual([]);

    // Started by a shell that left a file open (not close-on-exec): dossier's programs never get it.
    const stray = openSync(path.join(home, 'shell-secret.txt'), 'w+');
    const second = await startProduct(env, [stray]);
    closeSync(stray);
    // A second stack on the same home is refused (its dev server would share temporal.db), and
    // dev.json stays the running one's.
    const refused = spawnSync(process.execPath, ['bin/dossier.js', 'start'], {
      env: {
        ...process.env,
        ...env,
        DOSSIER_PORT: String(await freePort()),
        DOSSIER_TEMPORAL_PORT: String(await freePort()),
        DOSSIER_UI_PORT: String(await freePort()),
      },
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(refused.status).toBe(1);
    expect(refused.stderr).toContain(
      `another dossier stack (pid ${second.child.pid}) is running on DOSSIER_HOME`,
    );
    const again = JSON.parse(readFileSync(path.join(home, 'dev.json'), 'utf8'));
    expect(again.mcp_url).toBe(dev.mcp_url);
    expect(again.token).toBe(dev.token);
    const client2 = await mcp(again.mcp_url, again.token);
    const retried = await call(client2, 'capture_process_scenario', {
      executable: '/usr/bin/echo',
      args: ['npm-start-input'],
      idempotency_key: 'npm-start-1',
    });
    expect(retried).toMatchObject({
      status: 'succeeded',
      evidence_id: launched.evidence_id,
      launch: { attached: true },
    });
    const listing = await call(client2, 'capture_process_scenario', {
      executable: '/usr/bin/ls',
      args: ['-l', '/proc/self/fd/'],
      idempotency_key: 'npm-start-fds',
    });
    expect(listing.status).toBe('succeeded');
    expect(listing.summary.stdout_head).not.toContain('shell-secret');
    // Its stdio and the listing's own descriptor, nothing else.
    expect([...listing.summary.stdout_head.matchAll(/ (\d+) -> /g)].map((m) => m[1])).toEqual([
      '0',
      '1',
      '2',
      '3',
    ]);
    await client2.close();
    expect(await stopProduct(second.child, 'SIGTERM')).toBe(0);
    expect(processesUnder(home)).toEqual([]);
  }, 180_000);

  it('a Ctrl-C to its terminal lets a running launch finish while Temporal still runs, and stops soon after', async () => {
    const ctrlHome = mkdtempSync(path.join(os.tmpdir(), 'dossier-ctrl-c-'));
    const env = await productEnv(ctrlHome);
    // Its own process group, as a shell runs a foreground job: a Ctrl-C signals the whole group.
    const product = spawn(process.execPath, ['bin/dossier.js', 'start'], {
      env: { ...process.env, ...env },
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    started.push(product);
    let output = '';
    product.stdout.on('data', (c: Buffer) => (output += c.toString()));
    product.stderr.on('data', (c: Buffer) => (output += c.toString()));
    const exited = new Promise<number | null>((resolve) => product.once('exit', (code) => resolve(code)));
    try {
      for (let i = 0; i < 600 && !output.includes('dossier is ready'); i++)
        await new Promise((r) => setTimeout(r, 100));
      const dev = JSON.parse(readFileSync(path.join(ctrlHome, 'dev.json'), 'utf8'));
      const client = await mcp(dev.mcp_url, dev.token);
      await sleepUntilRunning(client, 'ctrl-c-mid-launch', 3);
      // A client still waiting on the launch when the stop comes: its wait ends, and nothing it was
      // doing reads a store already closed.
      const waiting = call(client, 'await_launch', { idempotency_key: 'ctrl-c-mid-launch', wait_ms: 60_000 });
      waiting.catch(() => undefined);
      await new Promise((r) => setTimeout(r, 300));
      const t0 = Date.now();
      process.kill(-product.pid!, 'SIGINT');
      expect(await exited, output).toBe(0);
      expect(output).not.toMatch(/internal error/);
      await client.close().catch(() => undefined);
      // The worker's 30 s grace is not spent retrying a Temporal server that left first.
      expect(Date.now() - t0).toBeLessThan(20_000);
      expect(output).not.toMatch(/Network error while completing activity|tcp connect error/);
      const settled = await startProduct(env);
      const client2 = await mcp(dev.mcp_url, dev.token);
      // It ran to its end before the worker stopped: succeeded, not interrupted (and not run again).
      expect(
        await call(client2, 'await_launch', { idempotency_key: 'ctrl-c-mid-launch', wait_ms: 20_000 }),
        output,
      ).toMatchObject({ status: 'succeeded', summary: { exit_code: 0 } });
      await client2.close();
      expect(await stopProduct(settled.child, 'SIGTERM')).toBe(0);
    } finally {
      if (product.exitCode === null) process.kill(-product.pid!, 'SIGKILL');
      rmSync(ctrlHome, { recursive: true, force: true });
    }
  }, 180_000);

  it('a stack killed outright (SIGKILL, as the OOM killer does) leaves no server behind; the restart settles its running launch', async () => {
    const crashHome = mkdtempSync(path.join(os.tmpdir(), 'dossier-crash-'));
    const env = await productEnv(crashHome);
    try {
      const first = await startProduct(env);
      const dev = JSON.parse(readFileSync(path.join(crashHome, 'dev.json'), 'utf8'));
      const client = await mcp(dev.mcp_url, dev.token);
      await sleepUntilRunning(client, 'crashed-mid-launch', 120);
      await client.close().catch(() => undefined);
      expect(await stopProduct(first.child, 'SIGKILL')).toBe(null);
      // Its Temporal server and UI server went with it: nothing holds the ports or the files.
      for (let i = 0; i < 50 && processesUnder(crashHome).length > 0; i++)
        await new Promise((r) => setTimeout(r, 100));
      expect(processesUnder(crashHome)).toEqual([]);

      const t0 = Date.now();
      // Started by a shell that left a file open (not close-on-exec): dossier's programs never get it.
      const stray = openSync(path.join(home, 'shell-secret.txt'), 'w+');
      const second = await startProduct(env, [stray]);
      closeSync(stray);
      const client2 = await mcp(dev.mcp_url, dev.token);
      const outcome = await call(client2, 'await_launch', {
        idempotency_key: 'crashed-mid-launch',
        wait_ms: 60_000,
      });
      expect(outcome.status).toBe('interrupted');
      expect(Date.now() - t0).toBeLessThan(45_000);
      await client2.close();
      expect(await stopProduct(second.child, 'SIGTERM')).toBe(0);
    } finally {
      rmSync(crashHome, { recursive: true, force: true });
    }
  }, 180_000);

  it('runs the compiled build while it is newer than every source, the sources otherwise', () => {
    const version = (env: Record<string, string> = {}) =>
      execFileSync(process.execPath, ['bin/dossier.js', 'version'], {
        env: { ...process.env, ...env },
        encoding: 'utf8',
      });
    // The rule bin/dossier.js applies, checked from outside.
    const newest = (dir: string): number =>
      Math.max(
        ...readdirSync(dir, { withFileTypes: true }).map((e) =>
          e.isDirectory() ? newest(path.join(dir, e.name)) : statSync(path.join(dir, e.name)).mtimeMs,
        ),
      );
    const built = existsSync('dist/.built') ? statSync('dist/.built').mtimeMs : 0;
    expect(version()).toMatch(built >= newest('src') ? /compiled build \(dist\/\)/ : /sources \(src\/\)/);
    expect(version({ DOSSIER_FROM_SOURCE: '1' })).toMatch(/dossier \d+\.\d+\.\d+, running from the sources/);
  });
});
