// What a newcomer does right after `npm start` with a DOSSIER_HOME of their
// own: call the gateway from another shell of the same checkout (which does
// not have that variable) and open the audit UI in a browser to see who ran
// what, on which target, and how it ended.
import { execFile } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { chromium, openBrowser } from '../helpers/browser.ts';
import { call, type Reply } from '../helpers/mcp.ts';
import { freePort } from '../helpers/ports.ts';
import { spawnDossier, type Proc } from '../helpers/processes.ts';
import { scratchDir } from '../helpers/scratch.ts';

const work = scratchDir('started-stack');
const home = path.join(work, 'my-home');
/** The per-user record of running stacks, kept apart from the machine's other stacks. */
const state = path.join(work, 'state');
const checkout = process.cwd();
let product: Proc;
let dev: { mcp_url: string; token: string; ui_url: string; namespace: string };

beforeAll(async () => {
  product = await spawnDossier(
    'start',
    {
      DOSSIER_HOME: home,
      DOSSIER_PORT: String(await freePort()),
      DOSSIER_TEMPORAL_PORT: String(await freePort()),
      DOSSIER_UI_PORT: String(await freePort()),
      DOSSIER_TEMPORAL_CLI: inject('temporalCli'),
      DOSSIER_TEMPORAL_UI_SERVER: inject('uiServer'),
      XDG_STATE_HOME: state,
    },
    'dossier is ready',
  );
  dev = JSON.parse(readFileSync(path.join(home, 'dev.json'), 'utf8'));
}, 120_000);
afterAll(async () => {
  await product?.kill('SIGTERM');
});

/** `dossier ARGS` as a shell of this user runs it in `cwd`, with no DOSSIER_* variable set. */
async function cli(cwd: string, ...args: string[]) {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('DOSSIER_')));
  try {
    const { stdout, stderr } = await promisify(execFile)(
      process.execPath,
      [path.join(checkout, 'bin/dossier.js'), ...args],
      { cwd, env: { ...env, XDG_STATE_HOME: state }, timeout: 60_000 },
    );
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

describe('the CLI finds the stack started from its checkout', () => {
  it('from the checkout or a folder in it, without DOSSIER_HOME, and says how it found it', async () => {
    for (const cwd of [checkout, path.join(checkout, 'src/cli')]) {
      const whoami = await cli(cwd, 'call', 'whoami');
      expect(whoami.code, whoami.stderr).toBe(0);
      expect(JSON.parse(whoami.stdout)).toMatchObject({ team: 'local' });
      expect(whoami.stderr).toContain(`using the stack started in ${checkout}`);
      expect(whoami.stderr).toContain(`DOSSIER_HOME=${home}`);
    }
  });

  it('from elsewhere, says which stack runs and the one line that reaches it', async () => {
    const elsewhere = path.join(work, 'elsewhere');
    mkdirSync(elsewhere, { recursive: true });
    const refused = await cli(elsewhere, 'call', 'whoami');
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('No gateway to talk to');
    expect(refused.stderr).toContain(`started in ${checkout}`);
    expect(refused.stderr).toContain(`export DOSSIER_HOME=${home}`);
  });
});

describe('the audit view in a real browser', () => {
  const browser = chromium();
  it.runIf('path' in browser)(
    'signing in lands on the list with tool, principal, target and outcome; launches and analyses read at a glance',
    async () => {
      const client = new Client({ name: 'audit-view-test', version: '1' });
      await client.connect(
        new StreamableHTTPClientTransport(new URL(dev.mcp_url), {
          requestInit: { headers: { Authorization: `Bearer ${dev.token}` } },
        }),
      );
      const me = await call(client, 'whoami', {});
      const launched = await call(client, 'capture_process_scenario', {
        executable: '/usr/bin/echo',
        args: ['audited'],
        idempotency_key: 'audit-echo',
        investigation: 'audit-view',
      });
      expect(launched.status).toBe('succeeded');
      const target = await call(client, 'register_artifact', { path: '/usr/bin/true' });
      const digest = target.artifact.digest as string;
      let analysis: Reply = { status: 'running' };
      for (let i = 0; i < 6 && analysis.status === 'running'; i++)
        analysis = await call(client, 'find_strings', { artifact: digest, wait_ms: 100_000 });
      expect(analysis.status, JSON.stringify(analysis.error)).toBe('succeeded');
      await client.close();

      const page = await openBrowser((browser as { path: string }).path);
      try {
        // The link the README gives: asks for the token first, then opens the audit view.
        await page.goto(`${dev.ui_url}/dossier/audit`);
        expect(await page.evaluate('location.pathname')).toBe('/dossier/sign-in');
        await page.evaluate(
          `document.querySelector('input[name=token]').value = ${JSON.stringify(dev.token)}; document.forms[0].submit(); true`,
        );
        await page.waitFor(`location.pathname === '/namespaces/${dev.namespace}/workflows'`);
        const rows = await page.waitFor<string[]>(
          `(() => { const r = [...document.querySelectorAll('tbody tr')].map((tr) => tr.innerText.replace(/\\s+/g, ' '));
             return r.some((t) => t.includes('find_strings')) && r.some((t) => t.includes('capture_process_scenario')) && r; })()`,
          60_000,
        );
        const headers = await page.evaluate<string[]>(
          `[...document.querySelectorAll('thead th')].map((th) => th.innerText.trim()).filter(Boolean)`,
        );
        expect(headers.slice(0, 8)).toEqual([
          'Status',
          'DossierTool',
          'DossierPrincipal',
          'DossierTarget',
          'DossierOutcome',
          'DossierInvestigation',
          'Start',
          'End',
        ]);
        const echo = rows.find((r) => r.includes('capture_process_scenario'))!;
        expect(echo).toContain(me.principal);
        expect(echo).toContain('/usr/bin/echo');
        expect(echo).toContain('succeeded');
        expect(echo).toContain('audit-view');
        const strings = rows.find((r) => r.includes('find_strings'))!;
        expect(strings).toContain(digest);
        expect(strings).toContain('true');
        expect(strings).toContain('succeeded');

        // A browser that chose its own columns keeps them when it signs in again; the link resets them.
        await page.evaluate(
          `localStorage.setItem('namespace-workflow-table-columns', JSON.stringify({ ${JSON.stringify(dev.namespace)}: [{ label: 'Status' }, { label: 'Workflow ID' }] })); true`,
        );
        await page.goto(dev.ui_url);
        await page.waitFor(`location.pathname === '/namespaces/${dev.namespace}/workflows'`);
        await page.waitFor(`document.querySelectorAll('tbody tr').length > 0`);
        expect(
          await page.evaluate<string[]>(
            `[...document.querySelectorAll('thead th')].map((th) => th.innerText.trim()).filter(Boolean)`,
          ),
        ).not.toContain('DossierTool');
        await page.goto(
          `${dev.ui_url}/dossier/audit?${new URLSearchParams({ query: `DossierOutcome = "succeeded" AND DossierTool = "find_strings"` })}`,
        );
        await page.waitFor(`location.pathname === '/namespaces/${dev.namespace}/workflows'`);
        // Only the rows the query picks: the analysis, not the launch (nor the database build).
        const filtered = await page
          .waitFor<string[]>(
            `(() => { const r = [...document.querySelectorAll('tbody tr')].map((tr) => tr.innerText.replace(/\\s+/g, ' '));
               return r.length > 0 && r.every((t) => t.includes('find_strings')) && r; })()`,
            30_000,
          )
          .catch(async (err) => {
            const seen = await page.evaluate(`location.href + ' ' + document.body.innerText.slice(0, 3000)`);
            throw new Error(`${(err as Error).message}\n${seen}`);
          });
        expect(filtered).toHaveLength(1);
        expect(
          await page.evaluate<string[]>(
            `[...document.querySelectorAll('thead th')].map((th) => th.innerText.trim()).filter(Boolean)`,
          ),
        ).toContain('DossierTool');
      } finally {
        await page.close();
      }
    },
    300_000,
  );
});
