// The MCP Apps Views (src/views): the tools' `_meta` and the ui:// resources as
// clients of either protocol era see them, with and without the extension; and
// each View loaded in real headless Chromium inside a small host page that
// forwards its tool calls to this running dossier with a token: the extraction
// tree, the launch timeline and the call graph render from real Evidence, a
// click expands the graph through a real get_call_graph, and a token of another
// team gets nothing. DOSSIER_VIEW_SCREENSHOTS=1 writes docs/views/*.png.
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Browser } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UI_EXTENSION, UI_MIME } from '../../src/views/apps.ts';
import { allRows, call, connectMcp, type Reply } from '../helpers/mcp.ts';
import { modernRequest } from '../helpers/modern.ts';
import { scratchDir } from '../helpers/scratch.ts';
import { startTestStack, type TestStack } from '../helpers/stack.ts';
import { clickIn, connectUiHost, launchBrowser, openViewHost, type ViewHost } from '../helpers/viewHost.ts';

const work = scratchDir('views');
const roots = path.join(work, 'roots');
const SHOTS = process.env.DOSSIER_VIEW_SCREENSHOTS ? path.resolve('docs/views') : null;
const UI_CAPS = { extensions: { [UI_EXTENSION]: { mimeTypes: [UI_MIME] } } };

let t: TestStack;
let plain: Client; // a client without the extension
let alice: Client; // a host of Views, alice's token
let mallory: Client; // a host of Views, another team's token

/** Three nested archives (outer.zip ⊃ middle.tar.gz ⊃ inner.zip) with a climbing entry in the middle one. */
function nestedArchives(): string {
  const script = `
import io, sys, tarfile, zipfile, os
out = sys.argv[1]
inner = io.BytesIO()
with zipfile.ZipFile(inner, "w") as z:
    z.writestr("firmware/boot.cfg", "console=ttyS0\\n")
    z.writestr("firmware/kernel.bin", os.urandom(40000))
middle = io.BytesIO()
with tarfile.open(fileobj=middle, mode="w:gz") as tar:
    for name, data in [("inner.zip", inner.getvalue()), ("etc/app.conf", b"key=value\\n"), ("../escape.txt", b"evil")]:
        info = tarfile.TarInfo(name); info.size = len(data); tar.addfile(info, io.BytesIO(data))
with zipfile.ZipFile(os.path.join(out, "outer.zip"), "w") as z:
    z.writestr("middle.tar.gz", middle.getvalue())
    z.writestr("README.txt", "three archives deep\\n")
    z.writestr("/etc/passwd", "absolute")
`;
  execFileSync('python3', ['-c', script, roots]);
  return path.join(roots, 'outer.zip');
}

const FIXTURE = `
#include <stdio.h>
#include <string.h>
__attribute__((noipa)) int check_license(const char *s) { return strcmp(s, "KEY-1234") == 0; }
__attribute__((noipa)) void report(int ok) { printf("licensed=%d\\n", ok); }
__attribute__((noipa)) int validate(const char *s) { return check_license(s) && strlen(s) == 8; }
int main(int argc, char **argv) {
  int ok = validate(argc > 1 ? argv[1] : "");
  report(ok);
  return ok ? 0 : 1;
}
`;

function compile(): string {
  writeFileSync(path.join(work, 'license.c'), FIXTURE);
  const out = path.join(roots, 'license');
  execFileSync('gcc', ['-O0', '-o', out, path.join(work, 'license.c')]);
  return out;
}

let extraction: Reply;
const EXTRACT_KEY = 'views-extract-1';

beforeAll(async () => {
  mkdirSync(roots);
  t = await startTestStack({ env: { DOSSIER_ALLOWED_ROOTS: roots } });
  // Every toolset listed, so every tool a View is linked from is in the list.
  plain = await connectMcp(`${t.url}?toolsets=all`, t.token);
  alice = await connectUiHost(`${t.url}?toolsets=all`, t.token);
  mallory = await connectUiHost(t.url, await t.tokenFor('mallory', 'rival-team'));
  const registered = await call(alice, 'register_artifact', { path: nestedArchives() });
  extraction = await call(alice, 'extract_artifact', {
    artifact: registered.artifact.digest,
    recursive: true,
    max_depth: 3,
    detail: 'summary',
    idempotency_key: EXTRACT_KEY,
  });
  expect(extraction.status, JSON.stringify(extraction.error)).toBe('succeeded');
}, 180_000);
afterAll(async () => {
  await Promise.allSettled([plain?.close(), alice?.close(), mallory?.close()]);
  await t?.stop(true);
});

describe('tools and ui:// resources, with and without the extension', () => {
  it('the handshake era: links and View-only tools only for a client that declared the extension', async () => {
    const without = (await plain.listTools()).tools;
    expect(without.filter((tool) => tool._meta !== undefined)).toEqual([]);
    expect(without.map((tool) => tool.name)).not.toContain('get_launch_timeline');
    expect((await plain.listResources()).resources.filter((r) => r.uri.startsWith('ui://'))).toEqual([]);
    // A View-only tool is no tool for a client that cannot show Views.
    const refused = await call(plain, 'get_launch_timeline', { idempotency_key: EXTRACT_KEY });
    expect(refused.error.code).toBe('not_found');

    expect(alice.getServerCapabilities()?.extensions).toHaveProperty([UI_EXTENSION]);
    const tools = new Map((await alice.listTools()).tools.map((tool) => [tool.name, tool]));
    expect(tools.get('get_call_graph')!._meta).toMatchObject({
      ui: { resourceUri: 'ui://dossier/call-graph' },
    });
    expect(tools.get('extract_artifact')!._meta).toMatchObject({
      ui: { resourceUri: 'ui://dossier/extraction-tree' },
    });
    expect(tools.get('get_launch')!._meta).toMatchObject({
      ui: { resourceUri: 'ui://dossier/launch-timeline' },
    });
    expect(tools.get('get_launch_timeline')!._meta).toEqual({
      ui: { resourceUri: 'ui://dossier/launch-timeline', visibility: ['app'] },
    });
    // Every other tool is listed exactly as the client without the extension sees it.
    const same = [...tools.values()].filter((tool) => tool._meta === undefined);
    expect(same).toEqual(without.filter((tool) => same.some((s) => s.name === tool.name)));
    expect(tools.get('extract_firmware')!._meta).toMatchObject({
      ui: { resourceUri: 'ui://dossier/extraction-tree' },
    });
    expect(same.length).toBe(without.length - 5);

    const listed = (await alice.listResources()).resources.filter((r) => r.uri.startsWith('ui://'));
    expect(listed.map((r) => [r.uri, r.mimeType])).toEqual([
      ['ui://dossier/call-graph', UI_MIME],
      ['ui://dossier/extraction-tree', UI_MIME],
      ['ui://dossier/launch-timeline', UI_MIME],
    ]);
    for (const { uri } of listed) {
      const [content] = (await alice.readResource({ uri })).contents as Reply[];
      expect(content).toMatchObject({ uri, mimeType: UI_MIME });
      expect(content!._meta.ui.csp).toEqual({ connectDomains: [], resourceDomains: [] });
      // dossier's own files, inlined: nothing is loaded from anywhere.
      expect(content!.text).toContain("default-src 'none'");
      expect(content!.text).not.toMatch(/\bsrc=|https?:\/\/(?!www\.w3\.org\/2000\/svg)/);
    }
  });

  it('the stateless era: the same, per request, from the capabilities each request carries', async () => {
    const list = (caps?: Record<string, unknown>) =>
      modernRequest(`${t.url}?toolsets=all`, t.token, 'tools/list', {}, { capabilities: caps });
    const without = (await list()).body.result!.tools as Reply[];
    expect(without.filter((tool) => tool._meta !== undefined)).toEqual([]);
    const withUi = (await list(UI_CAPS)).body.result!.tools as Reply[];
    expect(withUi.find((tool) => tool.name === 'get_call_graph')!._meta.ui.resourceUri).toBe(
      'ui://dossier/call-graph',
    );
    expect(withUi.find((tool) => tool.name === 'get_launch_timeline')!._meta.ui.visibility).toEqual(['app']);

    const read = await modernRequest(
      t.url,
      t.token,
      'resources/read',
      { uri: 'ui://dossier/launch-timeline' },
      {
        capabilities: UI_CAPS,
      },
    );
    expect(read.body.result!.contents[0].mimeType).toBe(UI_MIME);
    const timeline = (caps?: Record<string, unknown>) =>
      modernRequest(
        t.url,
        t.token,
        'tools/call',
        { name: 'get_launch_timeline', arguments: { idempotency_key: EXTRACT_KEY } },
        { capabilities: caps },
      );
    expect((await timeline(UI_CAPS)).body.result!.structuredContent.status).toBe('succeeded');
    expect((await timeline()).body.error!.code).toBe(-32602);
  });
});

describe('the Views in headless Chromium', () => {
  let browser: Browser;
  let host: ViewHost; // alice's
  let rival: ViewHost; // mallory's
  const html = async (uri: string) =>
    ((await alice.readResource({ uri })).contents[0] as { text: string }).text;
  const result = (client: Client, name: string, args: Record<string, unknown>) =>
    client.callTool({ name, arguments: args }, undefined, { timeout: 300_000 });

  beforeAll(async () => {
    browser = await launchBrowser();
    host = await openViewHost(browser, alice);
    rival = await openViewHost(browser, mallory);
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
  });

  it('the extraction tree: nested archives, types, sizes, refused entries; a click reads the row', async () => {
    const args = { idempotency_key: EXTRACT_KEY };
    const frame = await host.show(
      await html('ui://dossier/extraction-tree'),
      args,
      await result(alice, 'get_launch', args),
    );
    const state = await host.settled(frame);
    expect(state.state, await frame.$eval('.status', (e) => e.textContent)).toBe('ready');
    const entries = await allRows(alice, extraction.evidence_id);
    expect(Number(state.entries)).toBe(entries.length);
    const refused = entries.filter((e) => e.status === 'refused');
    expect(refused.length).toBeGreaterThanOrEqual(2);
    expect(await frame.$$eval('tr.refused', (rows) => rows.length)).toBe(refused.length);
    // The innermost archive's files sit under it, three archives deep.
    const kernel = entries.find((e) => String(e.path).endsWith('firmware/kernel.bin'))!;
    expect(kernel.depth).toBe(2);
    const row = `tr[data-path="${kernel.path}"]`;
    expect(await frame.$eval(row, (tr) => tr.textContent)).toContain('39.1 KiB');
    const callsBefore = (await host.calls()).length;
    await clickIn(frame, row);
    await frame.waitForFunction(
      (p) => document.getElementById('app')!.dataset.selected === p,
      {},
      kernel.path,
    );
    expect(await frame.$eval('#row', (e) => e.textContent)).toContain(kernel.sha256);
    expect((await host.calls()).slice(callsBefore)).toEqual(['inspect_analysis_view']);
    if (SHOTS) await host.screenshot(path.join(SHOTS, 'extraction-tree.png'));

    // Another team's token, even handed alice's Evidence id, reads nothing of it.
    const foreign = await rival.show(await html('ui://dossier/extraction-tree'), args, {
      structuredContent: { status: 'succeeded', evidence_id: extraction.evidence_id },
      content: [],
    });
    expect(await rival.settled(foreign)).toMatchObject({ state: 'error' });
    expect(await foreign.$$eval('tr.entry', (rows) => rows.length)).toBe(0);
    expect(await foreign.$eval('.status', (e) => e.textContent)).toContain('not_found');
  }, 300_000);

  it('the launch timeline: claim, start, dispatch, effect, outcome and retention of a real launch', async () => {
    const args = { idempotency_key: EXTRACT_KEY };
    const frame = await host.show(
      await html('ui://dossier/launch-timeline'),
      args,
      await result(alice, 'get_launch', args),
    );
    const state = await host.settled(frame);
    expect(state.state).toBe('ready');
    const kinds = state.moments!.split(' ');
    for (const kind of [
      'claimed',
      'workflow_started',
      'dispatched',
      'picked_up',
      'effect_began',
      'finished',
      'retained',
    ])
      expect(kinds).toContain(kind);
    expect(kinds[0]).toBe('claimed');
    expect(kinds.indexOf('dispatched')).toBeLessThan(kinds.indexOf('effect_began'));
    expect(kinds.indexOf('effect_began')).toBeLessThan(kinds.indexOf('retained'));
    expect(await host.calls()).toContain('get_launch_timeline');
    if (SHOTS) await host.screenshot(path.join(SHOTS, 'launch-timeline.png'));

    const foreign = await rival.show(
      await html('ui://dossier/launch-timeline'),
      args,
      await result(mallory, 'get_launch', args),
    );
    expect(await rival.settled(foreign)).toMatchObject({ state: 'error' });
    expect(await foreign.$$eval('.moment', (m) => m.length)).toBe(0);
  }, 120_000);

  it('the call graph: renders from a real analysis, a click expands it through get_call_graph, "code" decompiles', async () => {
    const registered = await call(alice, 'register_artifact', { path: compile() });
    const args = { artifact: registered.artifact.digest, function: 'main', depth: 1, wait_ms: 60_000 };
    let first = await result(alice, 'get_call_graph', args);
    while ((first.structuredContent as Reply).status === 'running')
      first = await result(alice, 'get_call_graph', args);
    const frame = await host.show(await html('ui://dossier/call-graph'), args, first);
    const state = await host.settled(frame);
    expect(state.state, await frame.$eval('.status', (e) => e.textContent)).toBe('ready');
    const names = await frame.$$eval('g.node', (nodes) => nodes.map((n) => n.getAttribute('data-name')));
    expect(names).toEqual(expect.arrayContaining(['main', 'validate', 'report']));
    expect(names).not.toContain('check_license'); // two calls away: not yet shown

    const before = (await host.calls()).length;
    await clickIn(frame, 'g.node[data-name="validate"] rect');
    await frame.waitForFunction(() => document.querySelector('g.node[data-name="check_license"]') !== null, {
      timeout: 120_000,
    });
    expect((await host.calls()).slice(before)).toContain('get_call_graph');
    expect(Number(await frame.$eval('#app', (e) => (e as HTMLElement).dataset.nodes))).toBeGreaterThan(
      Number(state.nodes),
    );

    const address = await frame.$eval('g.node[data-name="check_license"]', (g) =>
      g.getAttribute('data-address'),
    );
    await clickIn(frame, 'g.node[data-name="check_license"] text.open');
    await frame.waitForFunction(
      (a) => document.getElementById('app')!.dataset.code === a,
      { timeout: 240_000 },
      address,
    );
    expect(await frame.$eval('#code', (e) => e.textContent)).toMatch(/check_license[\s\S]*strcmp/);
    if (SHOTS) await host.screenshot(path.join(SHOTS, 'call-graph.png'));

    // Another team's host, making the same call with its own token, gets no graph at all.
    const foreign = await rival.show(
      await html('ui://dossier/call-graph'),
      args,
      await result(mallory, 'get_call_graph', args),
    );
    expect(await rival.settled(foreign)).toMatchObject({ state: 'error' });
    expect(await foreign.$$eval('g.node', (n) => n.length)).toBe(0);
  }, 600_000);
});
