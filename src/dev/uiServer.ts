// The audit UI of the embedded stack: Temporal's own UI server (built once
// with Go, like the CLI), on a private loopback port behind a guard that
// passes reads only (uiGuard.ts), with every write action disabled in its
// settings too (Terminate, Reset, Signal, Start, batch, activity commands)
// and its codec endpoint on the guard (/codec), which forwards each decode to
// the gateway's codec endpoint with the signed-in viewer's token: the gateway
// opens a payload only for its own team. The CLI dev server's built-in UI
// cannot disable writes, so the dev server runs headless.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { buildWithGo, cachedTool, isExecutable, type GoTool } from './goTools.ts';
import { startOwned, waitForPort } from './owned.ts';
import { CODEC_ROOT } from './uiCodec.ts';
import { freeLoopbackPort, startUiGuard, type UiGuard, type UiViewer } from './uiGuard.ts';
import { SIGN_IN_PATH } from './uiSignIn.ts';

export const UI_SERVER: GoTool = {
  name: 'temporal-ui',
  module: 'github.com/temporalio/ui-server/v2/cmd/server',
  binary: 'server',
};
export const UI_VERSIONS = ['v2.42.1'] as const;

/** The UI server binary: DOSSIER_TEMPORAL_UI_SERVER, a cached build, or a fresh build (minutes, once). */
export async function resolveUiServer(
  configured: string | undefined,
  log: (line: string) => void = (line) => console.error(line),
): Promise<string> {
  if (configured) {
    if (!isExecutable(configured))
      throw new Error(`DOSSIER_TEMPORAL_UI_SERVER=${configured} is not an executable file.`);
    return configured;
  }
  return cachedTool(UI_SERVER, UI_VERSIONS) ?? buildWithGo(UI_SERVER, UI_VERSIONS[0], { log });
}

export interface UiServerOptions {
  binary: string;
  /** Folder for its configuration and log. */
  dir: string;
  temporalAddress: string;
  host: string;
  port: number;
  namespace: string;
  /** The gateway's codec endpoint (…/codec) as the guard reaches it, or none (payloads stay sealed). */
  codecEndpoint?: string;
  /** Who a token belongs to: the guard shows that team's workflows only. */
  viewer: UiViewer;
}

export interface UiServer {
  url: string;
  stop(): Promise<void>;
}

/**
 * The UI server's settings: read-only audit; the codec endpoint a path on the pages' own origin
 * (the guard's), so the browser sends it nothing but its session cookie, on whatever host it used.
 */
export function uiConfig(opts: Omit<UiServerOptions, 'binary' | 'dir' | 'viewer'>): string {
  const lines = [
    `temporalGrpcAddress: ${JSON.stringify(opts.temporalAddress)}`,
    `host: ${JSON.stringify(opts.host)}`,
    `port: ${opts.port}`,
    'enableUi: true',
    `defaultNamespace: ${JSON.stringify(opts.namespace)}`,
    'notifyOnNewVersion: false',
    'hideLogs: true',
    'disableWriteActions: true',
    ...[
      'workflowTerminateDisabled',
      'workflowCancelDisabled',
      'workflowSignalDisabled',
      'workflowUpdateDisabled',
      'workflowResetDisabled',
      'batchActionsDisabled',
      'startWorkflowDisabled',
      'activityCommandsDisabled',
    ].map((setting) => `${setting}: true`),
    'cors:',
    '  cookieInsecure: true',
    'codec:',
    `  endpoint: ${JSON.stringify(opts.codecEndpoint ? CODEC_ROOT : '')}`,
    '  includeCredentials: false',
    '  defaultErrorMessage: "Payloads are sealed per team; signed in, the audit UI opens your team\'s."',
    `  defaultErrorLink: ${JSON.stringify(SIGN_IN_PATH)}`,
  ];
  return `${lines.join('\n')}\n`;
}

/**
 * The UI server on a private loopback port, behind the guard (uiGuard.ts) on
 * `host:port`: what users open passes signed-in reads of their own team only.
 */
export async function startUiServer(opts: UiServerOptions): Promise<UiServer> {
  const configDir = path.join(opts.dir, 'config');
  mkdirSync(configDir, { recursive: true });
  const inner = await freeLoopbackPort();
  writeFileSync(path.join(configDir, 'dossier.yaml'), uiConfig({ ...opts, host: '127.0.0.1', port: inner }));
  const proc = await startOwned({
    name: 'The Temporal UI server',
    command: opts.binary,
    args: ['--root', opts.dir, '--config', 'config', '--env', 'dossier', 'start'],
    logFile: path.join(opts.dir, 'ui.log'),
    hint: `is loopback port ${inner} taken meanwhile? start again`,
    ready: () => waitForPort('127.0.0.1', inner, 30_000),
  });
  let guard: UiGuard;
  try {
    guard = await startUiGuard({
      host: opts.host,
      port: opts.port,
      upstream: { host: '127.0.0.1', port: inner },
      namespace: opts.namespace,
      viewer: opts.viewer,
      codec: opts.codecEndpoint,
    });
  } catch (err) {
    await proc.stop();
    throw new Error(
      `The audit UI cannot listen on ${opts.host}:${opts.port} (${(err as Error).message}); is the port in use? set DOSSIER_UI_PORT`,
    );
  }
  return {
    url: guard.url,
    stop: async () => {
      await guard.stop();
      await proc.stop();
    },
  };
}
