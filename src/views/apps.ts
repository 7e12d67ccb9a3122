// The MCP Apps extension (io.modelcontextprotocol/ui, 2026-01-26): Views that a
// host renders in a sandboxed iframe beside a tool's result. Each View is HTML
// that dossier serves itself as a ui:// resource (text/html;profile=mcp-app),
// built from its own files beside this one, with a CSP that loads nothing from
// anywhere; it reads Evidence by calling dossier's tools back through the host,
// with the host's token, through the same paged views and team scoping as any
// call. A client that did not declare the extension sees nothing of this: the
// tool list, the resource list and every result stay as they are.
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { DossierError } from '../domain/errors.ts';
import { PRODUCT } from '../domain/product.ts';
import type { Principal } from '../domain/types.ts';
import type { CallResult } from '../gateway/callResult.ts';
import type { Gateway } from '../gateway/gateway.ts';
import { idempotencyKeySchema } from '../tools/contract.ts';

export const UI_EXTENSION = 'io.modelcontextprotocol/ui';
export const UI_MIME = 'text/html;profile=mcp-app';

interface View {
  uri: string;
  name: string;
  title: string;
  description: string;
  /** The View's own script (beside this file), run after bridge.js. */
  script: string;
  /** The tools whose results it shows. */
  tools: readonly string[];
}

export const VIEWS: readonly View[] = [
  {
    uri: 'ui://dossier/call-graph',
    name: 'call-graph',
    title: 'Call graph',
    description:
      'The call graph around a function: click a function to expand it (get_call_graph), open its decompiled text (decompile_function).',
    script: 'callGraph.js',
    tools: ['get_call_graph'],
  },
  {
    uri: 'ui://dossier/extraction-tree',
    name: 'extraction-tree',
    title: 'Extraction tree',
    description:
      'An extraction as a tree: nested archives, types, sizes, refused entries; click an entry for its row (inspect_analysis_view).',
    script: 'extractionTree.js',
    tools: ['extract_artifact', 'extract_firmware'],
  },
  {
    uri: 'ui://dossier/launch-timeline',
    name: 'launch-timeline',
    title: 'Launch timeline',
    description:
      'A launch from claim to retention: its workflow start, each dispatch of its effect, re-dispatches and interruptions, the outcome and its Evidence.',
    script: 'launchTimeline.js',
    tools: ['get_launch', 'await_launch', 'get_launch_timeline'],
  },
];

/** Tools that exist only for a View: listed with visibility ["app"] to clients of the extension, to nobody else. */
const timelineInput = z.strictObject({
  idempotency_key: idempotencyKeySchema.describe('The key you launched with.'),
});
export const APP_TOOLS = [
  {
    name: 'get_launch_timeline',
    title: 'Launch timeline',
    description:
      'For the launch timeline View: the moments of one of your launches (claim, workflow start, dispatches, re-dispatches, interruptions, effect, outcome, retention).',
    inputSchema: z.toJSONSchema(timelineInput, { io: 'input' }) as Record<string, unknown>,
    annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  },
];

/** Whether a client declared the extension (its capabilities' `extensions`), for the MIME type dossier serves. */
export function clientHasUi(capabilities: unknown): boolean {
  const extensions = (capabilities as { extensions?: Record<string, unknown> } | undefined)?.extensions;
  const ui = extensions?.[UI_EXTENSION] as { mimeTypes?: unknown } | undefined;
  if (!ui || typeof ui !== 'object') return false;
  return !Array.isArray(ui.mimeTypes) || ui.mimeTypes.includes(UI_MIME);
}

const viewOf = (tool: string) => VIEWS.find((v) => v.tools.includes(tool));

/** The tool list as a client of the extension sees it: View links, and the View-only tools; else unchanged. */
export function withViews<T extends { name: string }>(tools: T[], ui: boolean): T[] {
  if (!ui) return tools;
  const linked = tools.map((tool) => {
    const view = viewOf(tool.name);
    // `ui/resourceUri` is the extension's earlier flat key, still read by some hosts.
    return view ? { ...tool, _meta: { ui: { resourceUri: view.uri }, 'ui/resourceUri': view.uri } } : tool;
  });
  const appOnly = APP_TOOLS.map((t) => ({
    ...t,
    _meta: { ui: { resourceUri: viewOf(t.name)!.uri, visibility: ['app'] } },
  }));
  return [...linked, ...(appOnly as unknown as T[])];
}

export const isAppTool = (name: string) => APP_TOOLS.some((t) => t.name === name);

/** A View-only tool's answer, in the caller's name (its own launches only). */
export async function callAppTool(gateway: Gateway, caller: Principal, args: unknown): Promise<CallResult> {
  const parsed = timelineInput.safeParse(args ?? {});
  if (!parsed.success) {
    const why = parsed.error.issues.map((i) => i.message).join('; ');
    const error = new DossierError(
      'invalid_params',
      `Invalid arguments for get_launch_timeline: ${why}`,
      'Pass the idempotency_key of one of your launches.',
    );
    return { ok: false, error: error.toToolError() };
  }
  return gateway.launchTimeline(caller, parsed.data.idempotency_key);
}

/** What the resource says of itself: no origin at all may be reached (the View speaks only to its host). */
const RESOURCE_META = { ui: { csp: { connectDomains: [], resourceDomains: [] }, prefersBorder: true } };

/** The Views as resources/list entries, for a client of the extension. */
export function viewResources() {
  return VIEWS.map((v) => ({
    uri: v.uri,
    name: v.name,
    title: v.title,
    description: v.description,
    mimeType: UI_MIME,
    _meta: RESOURCE_META,
  }));
}

const CSP =
  "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; connect-src 'none'; form-action 'none'";

const asset = (file: string) => readFileSync(new URL(file, import.meta.url), 'utf8');
const pages = new Map<string, string>();

function page(view: View): string {
  let html = pages.get(view.uri);
  if (html === undefined) {
    // A script's text never closes the element it is inlined into.
    const script = `${asset('./bridge.js')}\n${asset(`./${view.script}`)}`
      .replace('__DOSSIER_VERSION__', PRODUCT.version)
      .replace(/<\/script/gi, '<\\/script');
    html = [
      '<!doctype html>',
      '<html lang="en"><head><meta charset="utf-8">',
      `<meta http-equiv="Content-Security-Policy" content="${CSP}">`,
      `<title>dossier: ${view.title}</title>`,
      `<style>${asset('./view.css')}</style>`,
      `</head><body><main id="app" data-view="${view.name}"><p class="status">Waiting for the host…</p></main>`,
      `<script>${script}</script></body></html>`,
    ].join('\n');
    pages.set(view.uri, html);
  }
  return html;
}

/** resources/read of a View; null when the URI names none. */
export function readView(uri: string) {
  const view = VIEWS.find((v) => v.uri === uri);
  if (!view) return null;
  return { contents: [{ uri, mimeType: UI_MIME, text: page(view), _meta: RESOURCE_META }] };
}
