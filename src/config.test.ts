import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from './config.ts';

describe('loadConfig', () => {
  it('applies the documented defaults', () => {
    const c = loadConfig({});
    expect(c).toMatchObject({
      port: 7400,
      temporalPort: 7233,
      uiPort: 8233,
      namespace: 'dossier',
      replyBudgetBytes: 40_000,
      firstReplyBytes: 8_000,
      toolsets: ['core', 'analysis'],
      retentionDays: 7,
      capabilities: ['capture', 'extract', 'device', 'analysis'],
    });
    expect(c.home.endsWith('.dossier')).toBe(true);
    expect(c.store).toBe(`${c.home}/dossier.db`);
    expect(loadConfig({ DOSSIER_STORE: 'postgres://u@db/dossier' }).store).toBe('postgres://u@db/dossier');
  });

  it('reads the toolsets a connection lists by default, and refuses a name it does not know', () => {
    expect(loadConfig({ DOSSIER_TOOLSETS: 'devices,capture' }).toolsets).toEqual([
      'core',
      'capture',
      'devices',
    ]);
    expect(loadConfig({ DOSSIER_TOOLSETS: 'all' }).toolsets).toHaveLength(7);
    expect(() => loadConfig({ DOSSIER_TOOLSETS: 'capture,gpu' })).toThrow(
      /DOSSIER_TOOLSETS="capture,gpu": unknown toolset "gpu": expected core, analysis, capture, extraction, devices, bundles, knowledge, or all/,
    );
    expect(() => loadConfig({ DOSSIER_FIRST_REPLY_BYTES: '1000' })).toThrow(
      /DOSSIER_FIRST_REPLY_BYTES="1000": expected a whole number from 2048 to 1000000/,
    );
  });

  it("keeps the teams' inboxes out of dossier's own state", () => {
    expect(loadConfig({ DOSSIER_HOME: '/srv/d' }).inbox).toBe('/srv/d/inbox');
    expect(loadConfig({ DOSSIER_HOME: '/srv/d', DOSSIER_INBOX: '/srv/drop' }).inbox).toBe('/srv/drop');
    for (const inbox of ['/srv/d', '/srv', '/srv/d/artifacts'])
      expect(() => loadConfig({ DOSSIER_HOME: '/srv/d', DOSSIER_INBOX: inbox })).toThrow(/DOSSIER_INBOX/);
  });

  it('takes mutual TLS to Temporal as three readable files together, or not at all', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'dossier-tls-config-'));
    const [cert, key, ca] = ['cert.pem', 'key.pem', 'ca.pem'].map((f) => path.join(dir, f)) as [
      string,
      string,
      string,
    ];
    for (const f of [cert, key, ca]) writeFileSync(f, 'pem');
    const all = {
      DOSSIER_TEMPORAL_TLS_CERT: cert,
      DOSSIER_TEMPORAL_TLS_KEY: key,
      DOSSIER_TEMPORAL_TLS_CA: ca,
    };
    expect(loadConfig({}).temporalTls).toBeUndefined();
    expect(loadConfig({ ...all, DOSSIER_TEMPORAL_TLS_SERVER_NAME: 'temporal' }).temporalTls).toEqual({
      cert,
      key,
      ca,
      serverName: 'temporal',
    });
    expect(() => loadConfig({ DOSSIER_TEMPORAL_TLS_CERT: cert, DOSSIER_TEMPORAL_TLS_KEY: key })).toThrow(
      /set all three/,
    );
    expect(() => loadConfig({ DOSSIER_TEMPORAL_TLS_SERVER_NAME: 'temporal' })).toThrow(/set all three/);
    expect(() => loadConfig({ ...all, DOSSIER_TEMPORAL_TLS_KEY: path.join(dir, 'absent.pem') })).toThrow(
      /DOSSIER_TEMPORAL_TLS_KEY=".*absent.pem": expected the absolute path of a readable file/,
    );
    expect(() => loadConfig({ ...all, DOSSIER_TEMPORAL_TLS_CA: 'ca.pem' })).toThrow(
      /DOSSIER_TEMPORAL_TLS_CA/,
    );
    rmSync(dir, { recursive: true });
  });

  it('refuses an HTTP port that browsers and fetch() will not connect to', () => {
    for (const v of ['DOSSIER_PORT', 'DOSSIER_UI_PORT'])
      expect(() => loadConfig({ [v]: '6000' })).toThrow(new RegExp(`${v}="6000": browsers and fetch\\(\\)`));
    expect(loadConfig({ DOSSIER_PORT: '6001' }).port).toBe(6001);
    // gRPC is not fetch: the Temporal port may be any.
    expect(loadConfig({ DOSSIER_TEMPORAL_PORT: '6000' }).temporalPort).toBe(6000);
  });

  it("bounds what a team's finished launches keep on a worker, never below one launch's workspace", () => {
    const GiB = 1024 ** 3;
    expect(loadConfig({}).teamWorkspaceBytes).toBe(10 * GiB);
    // A larger workspace raises the default with it, so raising one bound alone never stops a worker.
    expect(loadConfig({ DOSSIER_WORKSPACE_BYTES: String(20 * GiB) }).teamWorkspaceBytes).toBe(20 * GiB);
    expect(loadConfig({ DOSSIER_TEAM_WORKSPACE_BYTES: String(2 * GiB) }).teamWorkspaceBytes).toBe(2 * GiB);
    expect(() => loadConfig({ DOSSIER_TEAM_WORKSPACE_BYTES: String(512 * 1024 ** 2) })).toThrow(
      /DOSSIER_TEAM_WORKSPACE_BYTES=536870912: expected at least DOSSIER_WORKSPACE_BYTES \(1073741824\)/,
    );
    expect(() => loadConfig({ DOSSIER_TEAM_WORKSPACE_BYTES: String(2 * 1024 ** 5) })).toThrow(
      /DOSSIER_TEAM_WORKSPACE_BYTES="2251799813685248": expected a whole number from 1048576 to 1125899906842624/,
    );
  });

  it('names every bad variable, what was given and what is accepted', () => {
    try {
      loadConfig({
        DOSSIER_PORT: 'seventy',
        DOSSIER_REPLY_BUDGET_BYTES: '10',
        DOSSIER_WORKER_CAPABILITIES: 'capture,gpu',
      });
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      const message = (err as Error).message;
      expect(message).toContain('DOSSIER_PORT="seventy": expected a whole number from 0 to 65535');
      expect(message).toContain(
        'DOSSIER_REPLY_BUDGET_BYTES="10": expected a whole number from 4096 to 1000000',
      );
      expect(message).toContain(
        'DOSSIER_WORKER_CAPABILITIES="capture,gpu": expected a comma-separated list of capture, extract, device, analysis',
      );
    }
  });
});
