// What a team sees names nothing of the worker's host: no DOSSIER_HOME folder,
// no source file, in replies, Evidence, or the failures its audit UI shows. A
// program sees its workspace as /workspace, a registered artifact's copy under
// /artifact; an extraction's output is named relative to DOSSIER_HOME.
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { Client as TemporalClient, Connection, WorkflowFailedError } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { payloadKeys } from '../../src/temporal/codec.ts';
import { dataConverter } from '../../src/temporal/dataConverter.ts';
import { call, type Reply } from '../helpers/mcp.ts';
import { startTestStack, type TestStack } from '../helpers/stack.ts';
import { scratchDir } from '../helpers/scratch.ts';

const work = scratchDir('host-paths');
let t: TestStack;
let client: Client;
beforeAll(async () => {
  t = await startTestStack({ env: { DOSSIER_ALLOWED_ROOTS: `/usr/bin:${work}` } });
  client = await t.connect();
});
afterAll(async () => {
  await t?.stop(true);
});

/** Everything a caller can read of a reply's Evidence: the reply, the record, and every row. */
async function everything(reply: Reply): Promise<string> {
  const seen: unknown[] = [reply];
  if (reply.evidence_id) {
    const { evidence } = await call(client, 'get_evidence', { evidence_id: reply.evidence_id });
    seen.push(evidence);
    for (const collection of Object.keys(evidence.collections ?? {})) {
      const page = await call(client, 'inspect_analysis_view', {
        evidence_id: reply.evidence_id,
        view: { kind: 'page', collection, offset: 0, limit: 256 },
      });
      seen.push(page.rows);
    }
  }
  return JSON.stringify(seen);
}

/** The host's folders a team has no business knowing: dossier's state, its sources, its caches. */
function expectNoHostPaths(text: string) {
  expect(text).not.toContain(t.home);
  expect(text).not.toContain(process.cwd());
  expect(text).not.toContain(path.join(os.homedir(), '.cache'));
  expect(text).not.toMatch(/\/src\/[\w/]+\.(ts|js|py)\b/);
}

const register = async (file: string) =>
  (await call(client, 'register_artifact', { path: file })).artifact.digest as string;

describe('what a team sees of the worker’s host', () => {
  it('a registered artifact that fails to run, traced: the reply and its Evidence name /artifact and /workspace, never the worker’s folders', async () => {
    const file = path.join(work, 'not-a-program');
    writeFileSync(file, 'garbage that no loader takes\n');
    chmodSync(file, 0o755);
    const reply = await call(client, 'capture_process_scenario', {
      executable: await register(file),
      trace_syscalls: true,
      idempotency_key: 'host-paths-artifact',
    });
    expect(reply.status).toBe('succeeded');
    expect(reply.summary.exit_code).not.toBe(0);
    expect(reply.summary.stderr_head).toMatch(/Exec format error/);
    const text = await everything(reply);
    // The traced execve names the program as the sandbox shows it.
    expect(text).toMatch(/execve[^\n]*\/artifact\/not-a-program/);
    expectNoHostPaths(text);
    const document = await t.stack.store.evidence.document('local', reply.evidence_id);
    expect(document).toMatchObject({
      workspace: '/workspace',
      executable: { resolved_path: '/artifact/not-a-program' },
      sandbox: { writable: ['/workspace', '/trace'] },
    });
    expectNoHostPaths(JSON.stringify(document));
  });

  it('a program asked where it is says /workspace, and its files are listed relative to it', async () => {
    const reply = await call(client, 'capture_process_scenario', {
      executable: '/usr/bin/sh',
      args: ['-c', 'pwd; echo x > left.txt'],
      env: { PATH: '/usr/bin' },
      idempotency_key: 'host-paths-pwd',
    });
    expect(reply.summary.stdout_head).toBe('/workspace\n');
    const text = await everything(reply);
    expect(text).toContain('"path":"left.txt"');
    expectNoHostPaths(text);
  });

  it('an extraction that fails says why without a host path, and so does the failure the audit UI shows', async () => {
    const broken = path.join(work, 'broken.tar.xz');
    writeFileSync(
      broken,
      Buffer.concat([Buffer.from([0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00]), Buffer.alloc(300, 7)]),
    );
    const reply = await call(client, 'extract_artifact', {
      artifact: await register(broken),
      idempotency_key: 'host-paths-broken',
    });
    expect(reply.status).toBe('failed');
    expect(reply.error.code).toBe('unsupported_target');
    expectNoHostPaths(await everything(reply));
    // The workflow failed as the launch did; the team reads that failure, decoded, in the audit UI.
    const connection = await Connection.connect({ address: t.env.DOSSIER_TEMPORAL_ADDRESS! });
    try {
      const temporal = new TemporalClient({
        connection,
        namespace: t.namespace,
        dataConverter: dataConverter(payloadKeys([], t.home)),
      });
      const failure = await temporal.workflow
        .getHandle(reply.launch.workflow_id)
        .result()
        .then(
          () => undefined,
          (err: unknown) => err,
        );
      expect(failure).toBeInstanceOf(WorkflowFailedError);
      const cause = (failure as WorkflowFailedError).cause!;
      expect(cause.message).toMatch(/^failed: unsupported_target: /);
      expect(cause.stack ?? '').toBe('');
      expectNoHostPaths(JSON.stringify({ message: cause.message, stack: cause.stack }));
    } finally {
      await connection.close();
    }
  });

  it('an extraction names its output relative to DOSSIER_HOME, and its entries still register from it', async () => {
    const tree = path.join(work, 'tree');
    mkdirSync(tree);
    writeFileSync(path.join(tree, 'inside.txt'), 'extracted\n');
    const archive = path.join(work, 'good.tar');
    execFileSync('tar', ['-cf', archive, '-C', tree, 'inside.txt']);
    const reply = await call(client, 'extract_artifact', {
      artifact: await register(archive),
      idempotency_key: 'host-paths-good',
    });
    expect(reply.status).toBe('succeeded');
    expect(reply.summary.output).toMatch(/^extractions\/local\/[0-9a-f]+\/[\w-]+$/);
    expect(reply.summary.cleanup.output).toBe(reply.summary.output);
    expectNoHostPaths(await everything(reply));
    const registered = await call(client, 'register_artifact', {
      evidence_id: reply.evidence_id,
      entry: 'inside.txt',
    });
    expect(registered.artifact).toMatchObject({ size: 10, provenance: { path: 'inside.txt' } });
  });
});
