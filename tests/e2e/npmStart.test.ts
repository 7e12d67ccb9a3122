// `npm start` as a user runs it: a process that brings the whole embedded stack
// up, writes dev.json, and on SIGINT/SIGTERM leaves nothing behind.
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { call } from '../helpers/mcp.ts';
import { freePort } from '../helpers/ports.ts';
import { spawnDossier } from '../helpers/processes.ts';

const home = mkdtempSync(path.join(os.tmpdir(), 'dossier-npm-start-'));
afterAll(() => rmSync(home, { recursive: true, force: true }));

const startProduct = (env: Record<string, string>) => spawnDossier('start', env, 'dossier is ready');

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

describe('npm start (the embedded default)', () => {
  it('brings the stack up, writes dev.json, serves MCP and the UI, and stops cleanly; a restart finds everything', async () => {
    const env = {
      DOSSIER_HOME: home,
      DOSSIER_PORT: String(await freePort()),
      DOSSIER_TEMPORAL_PORT: String(await freePort()),
      DOSSIER_UI_PORT: String(await freePort()),
      DOSSIER_TEMPORAL_CLI: inject('temporalCli'),
      DOSSIER_TEMPORAL_UI_SERVER: inject('uiServer'),
    };
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
    expect((await fetch(dev.ui_url)).status).toBe(200);
    // The audit UI is read-only and reads payloads through the gateway's team-scoped codec endpoint.
    const settings = (await (await fetch(`${dev.ui_url}/api/v1/settings`)).json()) as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
    expect(settings.DisableWriteActions).toBe(true);
    expect(settings.Codec.Endpoint).toBe(dev.mcp_url.replace(/\/mcp$/, '/codec'));
    expect((await fetch(dev.mcp_url, { method: 'POST', body: '{}' })).status).toBe(401);

    const client = await mcp(dev.mcp_url, dev.token);
    const launched = await call(client, 'capture_process_scenario', {
      executable: '/usr/bin/true',
      idempotency_key: 'npm-start-1',
    });
    expect(launched.status).toBe('succeeded');
    await client.close();

    expect(await stopProduct(first.child, 'SIGINT')).toBe(0);
    expect(processesUnder(home)).toEqual([]);

    const second = await startProduct(env);
    const again = JSON.parse(readFileSync(path.join(home, 'dev.json'), 'utf8'));
    expect(again.token).toBe(dev.token);
    const client2 = await mcp(again.mcp_url, again.token);
    const retried = await call(client2, 'capture_process_scenario', {
      executable: '/usr/bin/true',
      idempotency_key: 'npm-start-1',
    });
    expect(retried).toMatchObject({
      status: 'succeeded',
      evidence_id: launched.evidence_id,
      launch: { attached: true },
    });
    await client2.close();
    expect(await stopProduct(second.child, 'SIGTERM')).toBe(0);
    expect(processesUnder(home)).toEqual([]);
  });
});
