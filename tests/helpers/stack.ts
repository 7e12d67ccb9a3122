// A real dossier stack for one test file: its own DOSSIER_HOME (SQLite store,
// workspaces), its own Temporal namespace on the shared dev server, a worker and
// the HTTP gateway on a free port. MCP clients connect as agents do.
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { Client as TemporalClient, Connection } from '@temporalio/client';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { inject } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { startStack, type Stack, type StackParts } from '../../src/dev/stack.ts';
import { payloadKeys } from '../../src/temporal/codec.ts';
import { dataConverter } from '../../src/temporal/dataConverter.ts';
import type { Role } from '../../src/domain/types.ts';
import { connectMcp } from './mcp.ts';

export interface TestStack {
  stack: Stack;
  home: string;
  namespace: string;
  env: Record<string, string>;
  token: string;
  url: string;
  connect(token?: string): Promise<Client>;
  tokenFor(principal: string, team: string, role?: Role): Promise<string>;
  /** Stops the stack; keeps DOSSIER_HOME unless `remove` is set. */
  stop(remove?: boolean): Promise<void>;
  /** Stops and starts again on the same home and namespace. */
  restart(): Promise<void>;
}

export async function startTestStack(
  opts: { env?: Record<string, string>; parts?: StackParts; home?: string; namespace?: string } = {},
): Promise<TestStack> {
  const home = opts.home ?? mkdtempSync(path.join(os.tmpdir(), 'dossier-stack-'));
  const namespace = opts.namespace ?? `t-${randomUUID().slice(0, 8)}`;
  const env: Record<string, string> = {
    DOSSIER_HOME: home,
    DOSSIER_TEMPORAL_ADDRESS: inject('temporalAddress'),
    DOSSIER_UI_URL: inject('uiUrl'),
    DOSSIER_NAMESPACE: namespace,
    DOSSIER_PORT: '0',
    // The launch suite runs under either dispatch: DOSSIER_LAUNCH_DISPATCH=local npm test -- ...
    ...(process.env.DOSSIER_LAUNCH_DISPATCH
      ? { DOSSIER_LAUNCH_DISPATCH: process.env.DOSSIER_LAUNCH_DISPATCH }
      : {}),
    ...opts.env,
  };
  // Test stacks use the shared Temporal (DOSSIER_TEMPORAL_ADDRESS) but, like npm start, get a local token.
  const parts: StackParts = {
    bundleCacheDir: inject('bundleCacheDir'),
    localToken: true,
    log: () => undefined,
    ...opts.parts,
  };
  let stack: Stack;
  try {
    stack = await startStack(loadConfig(env), parts);
  } catch (err) {
    // A home this helper made for a stack that never started is left empty: remove it.
    if (!opts.home) rmSync(home, { recursive: true, force: true });
    throw err;
  }
  const clients: Client[] = [];
  const t: TestStack = {
    get stack() {
      return stack;
    },
    home,
    namespace,
    env,
    get token() {
      return stack.devJson.token;
    },
    get url() {
      return stack.devJson.mcp_url;
    },
    async connect(token = stack.devJson.token) {
      const client = await connectMcp(stack.devJson.mcp_url, token);
      clients.push(client);
      return client;
    },
    tokenFor: (principal, team, role = 'operator') => stack.store.tokens.create({ principal, team, role }),
    async stop(remove = false) {
      await Promise.allSettled(clients.splice(0).map((c) => c.close()));
      await stack.stop();
      if (remove) rmSync(home, { recursive: true, force: true });
    },
    async restart() {
      await t.stop();
      stack = await startStack(loadConfig(env), parts);
    },
  };
  return t;
}

/** Runs `use` with an auditor's Temporal client on a stack's namespace, holding its payload key. */
export async function asAuditor<T>(
  stack: TestStack,
  use: (temporal: TemporalClient) => Promise<T>,
): Promise<T> {
  const connection = await Connection.connect({ address: stack.env.DOSSIER_TEMPORAL_ADDRESS! });
  try {
    return await use(
      new TemporalClient({
        connection,
        namespace: stack.namespace,
        dataConverter: dataConverter(payloadKeys([], stack.home)),
      }),
    );
  } finally {
    await connection.close();
  }
}
