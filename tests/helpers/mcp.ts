import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { randomUUID } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'vitest';

export type Reply = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** An MCP client connected to `url` as the holder of `token`, as agents connect. */
export async function connectMcp(url: string, token: string): Promise<Client> {
  const client = new Client({ name: 'dossier-test', version: '1.0.0' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(url), {
      requestInit: { headers: { Authorization: `Bearer ${token}` } },
    }),
  );
  return client;
}

/** Calls a tool and returns its structured content, with isError folded in as `_isError`. */
export async function call(client: Client, name: string, args: Record<string, unknown> = {}): Promise<Reply> {
  const result = await client.callTool({ name, arguments: args }, undefined, { timeout: 130_000 });
  return { ...(result.structuredContent as Reply), _isError: result.isError === true };
}

/** Registers a file by path, then extracts it as a launch of key `key` (detail summary); the reply. */
export async function registerAndExtract(
  client: Client,
  file: string,
  key: string,
  extra: Record<string, unknown> = {},
): Promise<Reply> {
  const registered = await call(client, 'register_artifact', { path: file });
  expect(registered.error).toBeUndefined();
  return call(client, 'extract_artifact', {
    artifact: registered.artifact.digest,
    detail: 'summary',
    idempotency_key: key,
    ...extra,
  });
}

/** Every row of one collection of an Evidence record, paged 256 at a time through inspect_analysis_view. */
export async function allRows(client: Client, evidenceId: string, collection = 'entries'): Promise<Reply[]> {
  const out: Reply[] = [];
  for (let offset = 0; ;) {
    const page = await call(client, 'inspect_analysis_view', {
      evidence_id: evidenceId,
      view: { kind: 'page', collection, offset, limit: 256 },
    });
    out.push(...page.rows.map((r: Reply) => r.row));
    if (page.coverage.exhausted) return out;
    offset = page.coverage.next_offset;
  }
}

/**
 * An effect counter that dossier cannot fake: each launch of `launch()` makes
 * its program write a marker file into its own workspace (every dispatch gets
 * a fresh one), so the number of workspaces holding the marker is the number
 * of times the program really ran. Works inside the sandbox, which shows the
 * program nothing but its workspace.
 */
export function effectCounter(home: string | string[]) {
  const marker = `effect-${randomUUID().slice(0, 8)}`;
  return {
    marker,
    launch: (extra: Record<string, unknown> = {}) => ({
      executable: '/usr/bin/tee',
      args: [marker],
      stdin: 'effect\n',
      ...extra,
    }),
    /** Over every home given: the workers of a cluster whose hosts do not share one. */
    count(): number {
      let n = 0;
      for (const h of [home].flat()) {
        const root = path.join(h, 'workspaces');
        if (!existsSync(root)) continue;
        for (const launch of readdirSync(root)) {
          for (const attempt of readdirSync(path.join(root, launch))) {
            if (existsSync(path.join(root, launch, attempt, marker))) n++;
          }
        }
      }
      return n;
    },
  };
}

/**
 * A launch that counts itself when it starts, then runs for `seconds`: the
 * marker is written before the sleep, so a second effect would show at once.
 */
export function slowEffect(counter: ReturnType<typeof effectCounter>, seconds: number) {
  return {
    executable: '/usr/bin/sh',
    args: ['-c', `echo started > ${counter.marker}; sleep ${seconds}; echo done`],
    env: { PATH: '/usr/bin:/bin' },
  };
}
