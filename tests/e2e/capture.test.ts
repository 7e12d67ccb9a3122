// capture_process_scenario in full: strace events, workspace files, explicit
// environment, resource limits, isolation, timeouts and output floods.
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import path from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, type Reply } from '../helpers/mcp.ts';
import { startTestStack, type TestStack } from '../helpers/stack.ts';
import { groupAlive } from '../helpers/wait.ts';

let t: TestStack;
let client: Client;
beforeAll(async () => {
  t = await startTestStack({ env: { DOSSIER_MAX_UPLOAD_BYTES: String(1024 * 1024) } });
  client = await t.connect();
});
afterAll(async () => {
  await t?.stop(true);
});

async function rows(evidenceId: string, collection: string, where?: Record<string, unknown[]>) {
  const out: Reply[] = [];
  for (let offset = 0; ;) {
    const page = await call(client, 'inspect_analysis_view', {
      evidence_id: evidenceId,
      view: { kind: 'page', collection, where, offset, limit: 256 },
    });
    if (page.error) throw new Error(JSON.stringify(page.error));
    out.push(...page.rows.map((r: Reply) => r.row));
    if (page.coverage.exhausted) return out;
    offset = page.coverage.next_offset;
  }
}

const sh = (script: string, extra: Record<string, unknown> = {}) => ({
  executable: '/usr/bin/sh',
  args: ['-c', script],
  env: { PATH: '/usr/bin:/bin' },
  detail: 'summary',
  ...extra,
});

describe('capture_process_scenario', () => {
  it('traces a real program with strace: ls on its workspace lists its execve and openat events', async () => {
    const reply = await call(client, 'capture_process_scenario', {
      executable: '/usr/bin/sh',
      args: ['-c', 'echo x > marker.txt && exec /usr/bin/ls "$PWD"'],
      env: { PATH: '/usr/bin' },
      trace_syscalls: true,
      detail: 'summary',
      idempotency_key: 'strace-ls',
    });
    expect(reply.status).toBe('succeeded');
    expect(reply.summary.stdout_head).toBe('marker.txt\n');
    expect(reply.summary.events).toBeGreaterThan(10);
    const execve = await rows(reply.evidence_id, 'events', { syscall: ['execve'] });
    expect(execve.map((e) => e.args).join('\n')).toContain('/usr/bin/ls');
    const document = await t.stack.store.evidence.document('local', reply.evidence_id);
    const opens = await rows(reply.evidence_id, 'events', { syscall: ['openat'] });
    expect(opens.some((e) => e.args.includes(document!.workspace as string))).toBe(true);
    expect(opens.every((e) => e.syscall === 'openat')).toBe(true);
  });

  it('lists the files the process left in its workspace, with SHA-256, and records links without following them', async () => {
    const reply = await call(client, 'capture_process_scenario', {
      ...sh('echo hi > a.txt; mkdir d; ln -s /etc/passwd d/link'),
      idempotency_key: 'workspace-files',
    });
    const files = await rows(reply.evidence_id, 'files');
    expect(files).toEqual([
      {
        path: 'a.txt',
        type: 'file',
        size: 3,
        sha256: createHash('sha256').update('hi\n').digest('hex'),
        link_target: null,
      },
      { path: 'd', type: 'dir', size: 0, sha256: null, link_target: null },
      { path: 'd/link', type: 'symlink', size: 0, sha256: null, link_target: '/etc/passwd' },
    ]);
  });

  it('passes exactly the given environment and applies the resource limits', async () => {
    const reply = await call(client, 'capture_process_scenario', {
      executable: '/usr/bin/sh',
      args: ['-c', 'env | sort; ulimit -n'],
      env: { ONLY: 'this', PATH: '/usr/bin' },
      limits: { open_files: 77 },
      detail: 'summary',
      idempotency_key: 'env-limits',
    });
    const lines = (await rows(reply.evidence_id, 'stdout')).map((r) => r.text);
    expect(lines).toContain('ONLY=this');
    expect(lines.filter((l) => l.includes('=') && !/^(ONLY|PATH|PWD)=/.test(l))).toEqual([]);
    expect(lines[lines.length - 1]).toBe('77');
  });

  it('ends the whole process group at the timeout and leaves no process behind', async () => {
    const reply = await call(client, 'capture_process_scenario', {
      ...sh('sleep 30 & sleep 30 & wait', { timeout_ms: 500 }),
      idempotency_key: 'timeout-group',
    });
    expect(reply.summary.ended_by).toBe('timeout');
    const evidence = await call(client, 'get_evidence', { evidence_id: reply.evidence_id });
    expect(evidence.evidence.limitations).toContain('the process was ended after timeout_ms=500');
    const launch = await t.stack.store.evidence.document('local', reply.evidence_id);
    expect(groupAlive(launch!.pid as number)).toBe(false);
    const unknowns = await call(client, 'list_unknowns', { status: 'open' });
    expect(unknowns.unknowns.map((u: Reply) => u.scope)).toContain(`${reply.launch.workflow_id} run`);
  });

  it('names the signal that killed a sandboxed program, and says it was read from the exit status', async () => {
    const reply = await call(client, 'capture_process_scenario', {
      executable: '/usr/bin/python3',
      args: ['-c', 'import os, signal; os.kill(os.getpid(), signal.SIGSEGV)'],
      idempotency_key: 'killed-by-segv',
    });
    expect(reply.summary).toMatchObject({ exit_code: 139, signal: 'SIGSEGV', ended_by: 'exit' });
    const evidence = await call(client, 'get_evidence', { evidence_id: reply.evidence_id });
    expect(evidence.evidence.limitations.join('\n')).toMatch(/exit status 139 is read as SIGSEGV/);
    const clean = await call(client, 'capture_process_scenario', {
      ...sh('exit 3'),
      idempotency_key: 'plain-exit-3',
    });
    expect(clean.summary).toMatchObject({ exit_code: 3, signal: null });
  });

  it('caps a process that floods stdout and flags it', async () => {
    const reply = await call(client, 'capture_process_scenario', {
      executable: '/usr/bin/yes',
      timeout_ms: 1_000,
      max_output_bytes: 65_536,
      detail: 'summary',
      idempotency_key: 'flood',
    });
    expect(reply.summary).toMatchObject({ stdout_truncated: true, ended_by: 'timeout' });
    expect(reply.summary.stdout_bytes).toBeGreaterThan(65_536);
    const evidence = await call(client, 'get_evidence', { evidence_id: reply.evidence_id });
    expect(evidence.evidence.truncated).toBe(true);
    expect(evidence.evidence.limitations).toContain('stdout was capped at 65536 bytes');
    expect(evidence.evidence.collections.stdout.rows).toBe(65_536 / 2);
  });

  it('runs in the sandbox by default: private /tmp, no network, its own uid, and says so in the Evidence', async () => {
    const outside = path.join('/tmp', `dossier-sandbox-${Date.now()}`);
    const reply = await call(client, 'capture_process_scenario', {
      ...sh(`touch ${outside}; echo inside > kept.txt; id -u; cat /proc/net/dev | tail -n +3 | cut -d: -f1`),
      idempotency_key: 'sandbox-default',
    });
    expect(reply.status).toBe('succeeded');
    expect(existsSync(outside)).toBe(false);
    const [uid, ...interfaces] = (await rows(reply.evidence_id, 'stdout')).map((r) => r.text.trim());
    expect(interfaces).toEqual(['lo']);
    expect((await rows(reply.evidence_id, 'files')).map((f) => f.path)).toEqual(['kept.txt']);
    const document = await t.stack.store.evidence.document('local', reply.evidence_id);
    expect(document).toMatchObject({
      isolation: 'sandbox',
      sandbox: { isolation: 'sandbox', network: false },
    });
    if (process.getuid?.() === 0) {
      expect(Number(uid)).toBeGreaterThanOrEqual(1_000_000);
      expect((document!.sandbox as { uid: number }).uid).toBe(Number(uid));
    }
  });

  it('takes "bubblewrap", the old name of the sandbox, and refuses isolation "none" unless the admin allows it', async () => {
    const old = await call(client, 'capture_process_scenario', {
      ...sh('true', { isolation: 'bubblewrap' }),
      idempotency_key: 'sandbox-old-name',
    });
    expect(old.status).toBe('succeeded');
    const none = await call(client, 'capture_process_scenario', {
      ...sh('true', { isolation: 'none' }),
      idempotency_key: 'sandbox-none',
    });
    expect(none.status).toBe('failed');
    expect(none.error).toMatchObject({ code: 'policy_denied' });
    expect(none.error.remediation).toContain('DOSSIER_ALLOW_UNSANDBOXED');
    const network = await call(client, 'capture_process_scenario', {
      ...sh('true', { network: true }),
      idempotency_key: 'sandbox-network',
    });
    expect(network.error).toMatchObject({ code: 'policy_denied' });
  });
});

describe('observe_native_calls', () => {
  it('records the library calls of a real program with ltrace, filterable by call', async () => {
    const reply = await call(client, 'observe_native_calls', {
      executable: '/usr/bin/ls',
      args: ['/'],
      call_filter: 'strlen+opendir',
      detail: 'summary',
      idempotency_key: 'ltrace-ls',
    });
    expect(reply.status).toBe('succeeded');
    const opendir = await rows(reply.evidence_id, 'events', { call: ['opendir'] });
    expect(opendir).toHaveLength(1);
    expect(opendir[0]).toMatchObject({ call: 'opendir', args: '"/"' });
    expect((await rows(reply.evidence_id, 'events', { call: ['strlen'] })).length).toBeGreaterThan(0);
    expect(reply.summary.exit_code).toBe(0);
  });

  it('reports the program’s own exit status, not ltrace’s (which exits 0 whatever its program did)', async () => {
    const reply = await call(client, 'observe_native_calls', {
      executable: '/usr/bin/ls',
      args: ['/nonexistent-dossier-path'],
      detail: 'summary',
      idempotency_key: 'ltrace-ls-fails',
    });
    expect(reply.status).toBe('succeeded');
    expect(reply.summary).toMatchObject({ exit_code: 2, signal: null, ended_by: 'exit' });
    const evidence = (await call(client, 'get_evidence', { evidence_id: reply.evidence_id })).evidence;
    expect(evidence.limitations.join(' ')).toMatch(/as ltrace reported it/);
  });
});

describe('artifacts', () => {
  it('accepts an authenticated, size-capped upload, stores it by digest and lists it for the team only', async () => {
    const body = Buffer.from('#!/bin/sh\necho uploaded\n');
    const upload = (token: string, data: Buffer) =>
      fetch(t.url.replace(/\/mcp$/, '/artifacts?name=script.sh'), {
        method: 'POST',
        headers: { Authorization: `Bearer ${token}` },
        body: new Uint8Array(data),
      });
    const res = await upload(t.token, body);
    expect(res.status).toBe(201);
    const { artifact } = (await res.json()) as { artifact: Reply };
    expect(artifact).toMatchObject({
      digest: `sha256:${createHash('sha256').update(body).digest('hex')}`,
      size: body.length,
      mime_type: 'text/x-shellscript',
      name: 'script.sh',
      origin: 'upload',
    });
    // The same content again: 200, not created, its first record (and name) kept.
    const again = await fetch(t.url.replace(/\/mcp$/, '/artifacts?name=other.sh'), {
      method: 'POST',
      headers: { Authorization: `Bearer ${t.token}` },
      body: new Uint8Array(body),
    });
    expect(again.status).toBe(200);
    expect(await again.json()).toMatchObject({
      created: false,
      artifact: { digest: artifact.digest, name: 'script.sh' },
    });
    expect((await upload(t.token, Buffer.alloc(2 * 1024 * 1024))).status).toBe(413);
    expect((await upload(await t.tokenFor('vera', 'local', 'viewer'), body)).status).toBe(403);
    expect((await upload('dsr_wrong', body)).status).toBe(401);

    const ran = await call(client, 'capture_process_scenario', {
      executable: artifact.digest,
      env: { PATH: '/usr/bin:/bin' },
      idempotency_key: 'run-artifact',
    });
    expect(ran.summary).toMatchObject({ exit_code: 0, stdout_head: 'uploaded\n' });
    const evidence = await call(client, 'get_evidence', { evidence_id: ran.evidence_id });
    expect(evidence.evidence.target.digest).toBe(artifact.digest);

    const listed = await call(client, 'list_artifacts', {});
    expect(listed.artifacts.map((a: Reply) => a.digest)).toContain(artifact.digest);
    const outsider = await t.connect(await t.tokenFor('olga', 'elsewhere'));
    expect((await call(outsider, 'list_artifacts', {})).artifacts).toEqual([]);
  });
});
