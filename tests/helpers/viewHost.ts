// A small MCP Apps host in real headless Chromium: a page that holds a View
// (the ui:// resource's HTML, in a sandboxed iframe with an opaque origin, as
// hosts render it), plays the host's side of the extension's postMessage
// protocol (ui/initialize, the tool's input and result, tools/call), and
// forwards every tool call the View makes to a running dossier through an MCP
// client holding a token. Chromium is Debian's (scripts/system-packages.sh test).
import { existsSync } from 'node:fs';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import puppeteer, { type Browser, type ElementHandle, type Frame, type Page } from 'puppeteer-core';
import { UI_EXTENSION, UI_MIME } from '../../src/views/apps.ts';

export const CHROMIUM = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => existsSync(p));

/** An MCP client that declared the MCP Apps extension, as a host that renders Views connects. */
export async function connectUiHost(url: string, token: string): Promise<Client> {
  const client = new McpClient(
    { name: 'dossier-view-host', version: '1.0.0' },
    { capabilities: { extensions: { [UI_EXTENSION]: { mimeTypes: [UI_MIME] } } } },
  );
  await client.connect(
    new StreamableHTTPClientTransport(new URL(url), {
      requestInit: { headers: { Authorization: `Bearer ${token}` } },
    }),
  );
  return client;
}

const HOST_PAGE = `<!doctype html><html><body style="margin:0;background:#fff">
<iframe id="view" sandbox="allow-scripts" style="width:1000px;height:640px;border:0;display:block"></iframe>
<script>
const frame = document.getElementById('view');
let pendingInput = null, pendingResult = null;
window.viewCalls = [];
const send = (m) => frame.contentWindow.postMessage(Object.assign({ jsonrpc: '2.0' }, m), '*');
window.addEventListener('message', async (ev) => {
  if (ev.source !== frame.contentWindow) return;
  const m = ev.data;
  if (!m || m.jsonrpc !== '2.0' || !m.method) return;
  if (m.method === 'ui/initialize') {
    send({ id: m.id, result: {
      protocolVersion: '2026-01-26',
      hostInfo: { name: 'dossier-test-host', version: '1' },
      hostCapabilities: { serverTools: {}, serverResources: {} },
      hostContext: { theme: 'light', displayMode: 'inline', platform: 'web' },
    } });
  } else if (m.method === 'ui/notifications/initialized') {
    send({ method: 'ui/notifications/tool-input', params: { arguments: pendingInput } });
    send({ method: 'ui/notifications/tool-result', params: pendingResult });
  } else if (m.method === 'tools/call') {
    window.viewCalls.push(m.params.name);
    const answer = await window.hostCallTool(m.params.name, m.params.arguments || {});
    send(answer.error ? { id: m.id, error: answer.error } : { id: m.id, result: answer.result });
  } else if (m.id !== undefined) {
    send({ id: m.id, error: { code: -32601, message: 'not offered by this host' } });
  }
});
window.startView = (html, input, result) => {
  pendingInput = input; pendingResult = result;
  frame.srcdoc = html;
};
</script></body></html>`;

export interface ViewHost {
  page: Page;
  /** Loads a View for a tool call's input and result; resolves to the View's frame. */
  show(html: string, input: Record<string, unknown>, result: unknown): Promise<Frame>;
  /** The tool names the View has called through the host so far. */
  calls(): Promise<string[]>;
  /** Waits until the View's main element says it has settled (ready or error); its data-* attributes. */
  settled(frame: Frame, timeoutMs?: number): Promise<Record<string, string>>;
  screenshot(file: string): Promise<void>;
  close(): Promise<void>;
}

export async function launchBrowser(): Promise<Browser> {
  if (!CHROMIUM)
    throw new Error(
      "the View tests need Debian's chromium: run `bash scripts/system-packages.sh test` as root",
    );
  return puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--font-render-hinting=none'],
  });
}

/** A host page whose View's tool calls go to dossier through `client`. */
export async function openViewHost(browser: Browser, client: Client): Promise<ViewHost> {
  const page = await browser.newPage();
  await page.setViewport({ width: 1000, height: 640 });
  // What the View logs or throws shows in the test's output.
  page.on('console', (m) => console.error(`[view] ${m.text()}`));
  page.on('pageerror', (e) => console.error(`[view error] ${(e as Error).message}`));
  await page.exposeFunction('hostCallTool', async (name: string, args: Record<string, unknown>) => {
    try {
      return { result: await client.callTool({ name, arguments: args }, undefined, { timeout: 300_000 }) };
    } catch (err) {
      return { error: { code: -32603, message: (err as Error).message } };
    }
  });
  await page.setContent(HOST_PAGE);
  const host: ViewHost = {
    page,
    async show(html, input, result) {
      // A tab in the background is not painted: the View in front, as a person would look at it.
      await page.bringToFront();
      const frameHandle = (await page.$('#view')) as ElementHandle<HTMLIFrameElement>;
      await page.evaluate(
        (h, i, r) => (window as never as { startView: (...a: unknown[]) => void }).startView(h, i, r),
        html,
        input,
        result as never,
      );
      // The new document of the iframe: wait for the View's main element to be there.
      const frame = (await frameHandle.contentFrame())!;
      await frame.waitForSelector('main#app', { timeout: 10_000 });
      return frame;
    },
    calls: () => page.evaluate(() => (window as never as { viewCalls: string[] }).viewCalls.slice()),
    async settled(frame, timeoutMs = 240_000) {
      await frame.waitForFunction(
        () => ['ready', 'error'].includes(document.getElementById('app')?.dataset.state ?? ''),
        { timeout: timeoutMs, polling: 200 },
      );
      return frame.evaluate(() => ({ ...document.getElementById('app')!.dataset }) as Record<string, string>);
    },
    async screenshot(file) {
      await page.bringToFront();
      const frame = await page.$('#view');
      await frame!.screenshot({ path: file as `${string}.png` });
    },
    close: () => page.close(),
  };
  return host;
}

/** A click on an element of the View, as a person's click reaches its listeners. */
export async function clickIn(frame: Frame, selector: string): Promise<void> {
  await frame.$eval(selector, (el) => el.dispatchEvent(new MouseEvent('click', { bubbles: true })));
}
