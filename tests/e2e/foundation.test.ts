// The vertical slice, end to end: MCP client → HTTP gateway → Temporal → worker
// → real process → SQLite Evidence, and back.
import Database from 'better-sqlite3';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { SEARCH_ATTRIBUTES } from '../../src/temporal/searchAttributes.ts';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { call, connectMcp, effectCounter } from '../helpers/mcp.ts';
import { asAuditor, startTestStack, type TestStack } from '../helpers/stack.ts';
import { eventually } from '../helpers/wait.ts';

let t: TestStack;
beforeAll(async () => {
  t = await startTestStack();
});
afterAll(async () => {
  await t?.stop(true);
});

describe('authentication', () => {
  it('answers 401 without a bearer token and with an unknown one', async () => {
    const init = { jsonrpc: '2.0', id: 1, method: 'initialize', params: {} };
    const variants: Record<string, string>[] = [{}, { Authorization: 'Bearer dsr_not-a-real-token' }];
    for (const headers of variants) {
      const res = await fetch(t.url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          ...headers,
        },
        body: JSON.stringify(init),
      });
      expect(res.status).toBe(401);
      expect(res.headers.get('www-authenticate')).toMatch(/^Bearer/);
    }
  });

  it('refuses foreign Host and Origin headers (DNS rebinding) before looking at the token', async () => {
    const { request } = await import('node:http');
    const status = (headers: Record<string, string>) =>
      new Promise<number>((resolve, reject) => {
        const url = new URL(t.url);
        const req = request(
          {
            host: url.hostname,
            port: url.port,
            path: url.pathname,
            method: 'POST',
            headers: { Authorization: `Bearer ${t.token}`, 'content-type': 'application/json', ...headers },
          },
          (res) => {
            res.resume();
            resolve(res.statusCode ?? 0);
          },
        );
        req.on('error', reject);
        req.end('{}');
      });
    expect(await status({ Host: 'evil.example:7400' })).toBe(403);
    expect(await status({ Origin: 'http://evil.example' })).toBe(403);
  });

  it('initializes and lists tools with the token from dev.json', async () => {
    const client = await t.connect();
    expect(client.getServerVersion()?.name).toBe('dossier');
    // By default the core and analysis toolsets; the URL lists every tool.
    expect((await client.listTools()).tools.map((tool) => tool.name)).toContain('inspect_binary');
    const every = await connectMcp(`${t.url}?toolsets=all`, t.token);
    const { tools } = await every.listTools();
    await every.close();
    const capture = tools.find((tool) => tool.name === 'capture_process_scenario');
    expect(capture?.inputSchema.required).toContain('idempotency_key');
    expect(capture?.annotations).toMatchObject({
      idempotentHint: true,
      readOnlyHint: false,
      openWorldHint: true,
    });
    expect(tools.map((tool) => tool.name)).toEqual(
      expect.arrayContaining([
        'get_launch',
        'await_launch',
        'cancel_launch',
        'list_launches',
        'get_evidence',
      ]),
    );
  });
});

describe('npx dossier token create', () => {
  it('prints a new token once; it authenticates as that principal and team', async () => {
    const out = execFileSync(
      process.execPath,
      ['bin/dossier.js', 'token', 'create', '--principal', 'alice', '--team', 're-team', '--role', 'viewer'],
      { env: { ...process.env, ...t.env }, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] },
    ).trim();
    expect(out).toMatch(/^dsr_[A-Za-z0-9_-]{43}$/);
    const client = await t.connect(out);
    expect(await call(client, 'whoami')).toMatchObject({
      principal: 'alice',
      team: 're-team',
      role: 'viewer',
    });
    const refused = await call(client, 'capture_process_scenario', {
      executable: '/usr/bin/true',
      idempotency_key: 'viewer-1',
    });
    expect(refused.error.code).toBe('forbidden');
  });
});

describe('token list and revoke', () => {
  it('lists tokens by id, never the token, and a revoked token no longer authenticates', async () => {
    const cli = (...args: string[]) =>
      execFileSync(process.execPath, ['bin/dossier.js', 'token', ...args], {
        env: { ...process.env, ...t.env },
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
      });
    const token = cli('create', '--principal', 'rita', '--team', 'revokers', '--label', 'laptop').trim();
    const listed = cli('list', '--team', 'revokers').trim().split('\n');
    expect(listed).toHaveLength(1);
    expect(listed[0]).not.toContain(token);
    const [id, principal, team, role] = listed[0]!.split('\t');
    expect([principal, team, role]).toEqual(['rita', 'revokers', 'operator']);
    expect(await call(await t.connect(token), 'whoami')).toMatchObject({ principal: 'rita' });
    cli('revoke', id!);
    await expect(t.connect(token)).rejects.toThrow();
    // A word that is no token id is a usage error that says what an id is, not a stack trace.
    let failed: { status: number; stderr: string } | undefined;
    try {
      cli('revoke', 'nonexist');
    } catch (err) {
      failed = err as { status: number; stderr: string };
    }
    expect(failed?.status).toBe(1);
    expect(failed?.stderr).toMatch(/"nonexist" is not a token id: an id is 8 to 64 hex digits/);
    expect(failed?.stderr).not.toMatch(/\bat \w+ \(/);
  });
});

describe('CLI client', () => {
  it('dossier call follows a running launch to its end; dossier launches shows it in a table', async () => {
    // Asynchronous on purpose: the gateway under test runs in this very process.
    const { spawn } = await import('node:child_process');
    const env = { ...process.env, ...t.env, DOSSIER_URL: t.url, DOSSIER_TOKEN: t.token };
    /** `dossier …` as a user types it: its exit status and output. */
    const dossier = (...args: string[]) =>
      new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
        const child = spawn(process.execPath, ['bin/dossier.js', ...args], { env });
        let stdout = '';
        let stderr = '';
        child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
        child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
        child.on('close', (status) => resolve({ status, stdout, stderr }));
      });
    /** The gateway's open MCP sessions (every principal's). */
    const sessions = () => {
      const db = new Database(path.join(t.home, 'dossier.db'), { readonly: true });
      try {
        return (db.prepare('SELECT COUNT(*) AS n FROM mcp_sessions').get() as { n: number }).n;
      } finally {
        db.close();
      }
    };
    const before = sessions();
    const called = await dossier(
      'call',
      'capture_process_scenario',
      '--key',
      'cli-1',
      '--wait-ms',
      '300',
      '--json',
      '{"executable":"/usr/bin/sleep","args":["2"]}',
    );
    expect(called.status, called.stderr).toBe(0);
    expect(called.stderr).toContain('running: http');
    // Its MCP session ended with it: a run leaves none behind to crowd out the token's other clients.
    expect(sessions()).toBe(before);
    // Not a terminal: no progress line to redraw, no escape codes in what a script reads.
    expect(called.stderr).not.toContain('\r');
    expect(called.stderr).not.toContain('\u001b');
    // It started the launch: the reply says so, though its last answer came from a wait.
    expect(JSON.parse(called.stdout)).toMatchObject({
      status: 'succeeded',
      launch: { idempotency_key: 'cli-1', attached: false },
    });
    // A followed launch that ends any other way than succeeded is a failure to a script.
    const following = dossier(
      'call',
      'capture_process_scenario',
      '--key',
      'cli-cancelled',
      '--wait-ms',
      '300',
      '--json',
      '{"executable":"/usr/bin/sleep","args":["30"]}',
    );
    const canceller = await t.connect();
    await vi.waitFor(
      async () =>
        expect(
          (await call(canceller, 'await_launch', { idempotency_key: 'cli-cancelled', wait_ms: 0 })).status,
        ).toBe('running'),
      { timeout: 15_000, interval: 200 },
    );
    await call(canceller, 'cancel_launch', { idempotency_key: 'cli-cancelled' });
    await canceller.close();
    const cancelled = await following;
    expect(cancelled.status, cancelled.stderr).toBe(1);
    expect(JSON.parse(cancelled.stdout)).toMatchObject({ status: 'cancelled', launch: { attached: false } });
    // Ctrl-C while it follows a launch: the launch runs on, and the run's session is ended.
    const sessionsBefore = sessions();
    const interrupted = await new Promise<{ status: number | null; signal: string | null }>((resolve) => {
      const child = spawn(
        process.execPath,
        [
          'bin/dossier.js',
          'call',
          'capture_process_scenario',
          '--key',
          'cli-interrupted',
          '--wait-ms',
          '300',
          '--json',
          '{"executable":"/usr/bin/sleep","args":["3"]}',
        ],
        { env },
      );
      let stderr = '';
      const onData = (c: Buffer) => {
        stderr += c.toString();
        if (!stderr.includes('running: http')) return;
        child.stderr.off('data', onData);
        child.kill('SIGINT');
      };
      child.stderr.on('data', onData);
      child.on('close', (status, signal) => resolve({ status, signal }));
    });
    expect(interrupted.status).toBe(130);
    expect(sessions()).toBe(sessionsBefore);
    const after = await dossier('call', 'await_launch', '{"idempotency_key":"cli-interrupted"}');
    expect(JSON.parse(after.stdout)).toMatchObject({ status: 'succeeded' });
    const table = await dossier('launches', '--limit', '5');
    expect(table.status, table.stderr).toBe(0);
    const lines = table.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^STATUS\s+TOOL\s+PRINCIPAL\s+KEY/);
    expect(lines.find((l) => l.includes('cli-1'))).toMatch(
      /^succeeded\s+capture_process_scenario\s+local\s+cli-1/,
    );
    const refused = await dossier('call', 'capture_process_scenario', '--json', '{}');
    expect(refused.status).toBe(1);
    expect(JSON.parse(refused.stdout).error.code).toBe('invalid_params');
    // The arguments may follow the tool's name; a word more is named, never ignored.
    const inline = await dossier(
      'call',
      'capture_process_scenario',
      '{"executable":"/usr/bin/true"}',
      '--key',
      'cli-2',
    );
    expect(inline.status, inline.stderr).toBe(0);
    expect(JSON.parse(inline.stdout)).toMatchObject({
      status: 'succeeded',
      launch: { idempotency_key: 'cli-2' },
    });
    const extra = await dossier('call', 'whoami', '{}', 'oops');
    expect(extra.status).toBe(1);
    expect(extra.stderr).toMatch(/unexpected "oops"/);
    // A mistyped option is a usage error (exit 2) that names it, not a stack trace; --help is the usage.
    const mistyped = await dossier('call', 'whoami', '--jsno', '{}');
    expect(mistyped.status).toBe(2);
    expect(mistyped.stderr).toMatch(/Unknown option '--jsno'[\s\S]*usage: dossier <command>/);
    expect(mistyped.stderr).not.toMatch(/\bat \w+ \(/);
    // A gateway that is gone (a stack stopped since it wrote its address): said so, with what to do.
    const stale = await new Promise<{ status: number | null; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, ['bin/dossier.js', 'launches'], {
        env: { ...env, DOSSIER_URL: 'http://127.0.0.1:9/mcp' },
      });
      let stderr = '';
      child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
      child.on('close', (status) => resolve({ status, stderr }));
    });
    expect(stale.status).toBe(1);
    expect(stale.stderr).toMatch(
      /Cannot reach the gateway[\s\S]*http:\/\/127\.0\.0\.1:9\/mcp \(from DOSSIER_URL\)/,
    );
    expect(stale.stderr).toMatch(/Is `npm start` running/);
    expect(stale.stderr).not.toMatch(/\bat \w+ \(/);
    // A token the gateway refuses is said so at once (no asking again).
    const refusedToken = await new Promise<{ status: number | null; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, ['bin/dossier.js', 'call', 'whoami'], {
        env: { ...env, DOSSIER_TOKEN: 'dsr_not-a-token' },
      });
      let stderr = '';
      child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
      child.on('close', (status) => resolve({ status, stderr }));
    });
    expect(refusedToken.status).toBe(1);
    expect(refusedToken.stderr).toMatch(/The gateway refused the token/);
    const help = await dossier('call', '--help');
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(/call TOOL \['\{…\}' \| --json '\{…\}'\] \[--key K\]/);
  });
});

describe('CLI client across a gateway restart', () => {
  it('dossier call keeps following its launch when the gateway restarts under it, and prints the outcome', async () => {
    const { spawn } = await import('node:child_process');
    const { freePort } = await import('../helpers/ports.ts');
    // A fixed port, so the restarted gateway answers where the CLI was talking.
    const s = await startTestStack({ env: { DOSSIER_PORT: String(await freePort()) } });
    try {
      const child = spawn(
        process.execPath,
        [
          'bin/dossier.js',
          'call',
          'capture_process_scenario',
          '{"executable":"/usr/bin/sleep","args":["3"]}',
          '--key',
          'follow-over-restart',
          '--wait-ms',
          '200',
        ],
        { env: { ...process.env, ...s.env, DOSSIER_URL: s.url, DOSSIER_TOKEN: s.token } },
      );
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
      child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
      const closed = new Promise<number | null>((resolve) => child.on('close', resolve));
      for (let i = 0; i < 300 && !stderr.includes('running: '); i++)
        await new Promise((r) => setTimeout(r, 100));
      expect(stderr).toContain('running: ');
      await s.restart();
      expect(await closed, stderr).toBe(0);
      expect(stderr).toMatch(/the gateway went away/);
      expect(JSON.parse(stdout)).toMatchObject({
        status: 'succeeded',
        launch: { idempotency_key: 'follow-over-restart' },
      });
    } finally {
      await s.stop(true);
    }
  }, 120_000);
});

describe('stdio transport', () => {
  it('serves the same tools over stdio as the principal of DOSSIER_TOKEN, on the same launches', async () => {
    const { StdioClientTransport } = await import('@modelcontextprotocol/sdk/client/stdio.js');
    const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
    const token = await t.tokenFor('stella', 'stdio-team');
    const client = new Client({ name: 'stdio-test', version: '1' });
    await client.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: ['bin/dossier.js', 'mcp', '--stdio'],
        env: { ...(process.env as Record<string, string>), ...t.env, DOSSIER_TOKEN: token },
        stderr: 'pipe',
      }),
    );
    try {
      // The server's toolsets; a stdio session enables more like any other.
      const names = async () => (await client.listTools()).tools.map((tool) => tool.name);
      expect(await names()).not.toContain('capture_process_scenario');
      expect(await call(client, 'enable_toolsets', { toolsets: ['capture'] })).toMatchObject({
        enabled: ['capture'],
      });
      expect(await names()).toContain('capture_process_scenario');
      expect(await call(client, 'whoami')).toMatchObject({ principal: 'stella', team: 'stdio-team' });
      const first = await call(client, 'capture_process_scenario', {
        executable: '/usr/bin/true',
        idempotency_key: 'stdio-1',
      });
      expect(first.status).toBe('succeeded');
      const overHttp = await call(await t.connect(token), 'capture_process_scenario', {
        executable: '/usr/bin/true',
        idempotency_key: 'stdio-1',
      });
      expect(overHttp).toMatchObject({ evidence_id: first.evidence_id, launch: { attached: true } });
    } finally {
      await client.close();
    }
  });
});

describe('capture_process_scenario as a keyed launch', () => {
  it('a second call with the same key and body launches nothing and returns the first evidence_id', async () => {
    const client = await t.connect();
    const effect = effectCounter(t.home);
    const args = { ...effect.launch(), idempotency_key: 'slice-once-1' };

    const first = await call(client, 'capture_process_scenario', args);
    expect(first.status).toBe('succeeded');
    expect(first.launch).toMatchObject({
      idempotency_key: 'slice-once-1',
      workflow_id: 'launch/local/local/slice-once-1',
      tool: 'capture_process_scenario',
      attached: false,
    });
    expect(first.evidence_id).toMatch(/^ev_[0-9a-f]{64}$/);
    expect(first.summary).toMatchObject({ exit_code: 0, stdout_head: 'effect\n' });
    expect(effect.count()).toBe(1);

    const second = await call(client, 'capture_process_scenario', args);
    expect(second.status).toBe('succeeded');
    expect(second.launch.attached).toBe(true);
    expect(second.evidence_id).toBe(first.evidence_id);
    expect(effect.count()).toBe(1);
  });

  it('refuses the same key with a different body, with both digests and the first launch time', async () => {
    const client = await t.connect();
    const effect = effectCounter(t.home);
    const first = await call(client, 'capture_process_scenario', {
      ...effect.launch(),
      idempotency_key: 'slice-body',
    });
    expect(first.status).toBe('succeeded');

    const other = await call(client, 'capture_process_scenario', {
      ...effect.launch({ stdin: 'something else\n' }),
      idempotency_key: 'slice-body',
    });
    expect(other._isError).toBe(true);
    expect(other.error).toMatchObject({ code: 'idempotency_key_reused', retryable: false });
    expect(other.error.details.first_body_digest).toMatch(/^[0-9a-f]{64}$/);
    expect(other.error.details.this_body_digest).not.toBe(other.error.details.first_body_digest);
    expect(other.error.details.first_launched_at).toBe(first.launch.started_at);
    expect(effect.count()).toBe(1);
  });

  it('names the top-level fields that differ from the first body (never their values), and whether the tool does', async () => {
    const client = await t.connect();
    const effect = effectCounter(t.home);
    const key = 'slice-fields';
    const first = await call(client, 'capture_process_scenario', {
      ...effect.launch(),
      idempotency_key: key,
    });
    expect(first.status).toBe('succeeded');
    const refusal = async (tool: string, args: Record<string, unknown>) => {
      const reply = await call(client, tool, { ...args, idempotency_key: key });
      expect(reply.error).toMatchObject({ code: 'idempotency_key_reused' });
      return reply.error;
    };

    // Changed args, and a detail and wait_ms that only shape the reply: args alone is named.
    const args = await refusal('capture_process_scenario', {
      ...effect.launch({ args: ['a-secret-value'] }),
      detail: 'summary',
      wait_ms: 5_000,
    });
    expect(args.details).toMatchObject({ differing_fields: ['args'], tool_differs: false });
    expect(args.message).toMatch(/different field args;/);
    expect(JSON.stringify(args)).not.toContain('a-secret-value');
    // An optional field the first call left out.
    const added = await refusal('capture_process_scenario', {
      ...effect.launch(),
      trace_filter: ['openat'],
    });
    expect(added.details).toMatchObject({ differing_fields: ['trace_filter'], tool_differs: false });
    // Another tool with the same arguments: the tool differs, and the defaults one has and the other lacks.
    const { executable, args: argv, stdin } = effect.launch();
    const tool = await refusal('observe_native_calls', { executable, args: argv, stdin });
    expect(tool.details).toMatchObject({
      tool_differs: true,
      first_tool: 'capture_process_scenario',
      this_tool: 'observe_native_calls',
      differing_fields: ['trace_syscalls'],
    });
    expect(tool.message).toMatch(/for tool capture_process_scenario and different field trace_syscalls/);

    // A launch whose kept arguments are not what its digest was taken of (as an older record may be): unknown.
    await t.stack.store.launches.claim({
      team: 'local',
      principal: 'local',
      key: 'slice-old-record',
      tool: 'capture_process_scenario',
      bodyDigest: 'a-digest-of-another-body',
      input: effect.launch(),
      workflowId: 'launch/local/local/slice-old-record',
      investigation: null,
    });
    const old = await call(client, 'capture_process_scenario', {
      ...effect.launch(),
      idempotency_key: 'slice-old-record',
    });
    expect(old.error.details.differing_fields).toBeNull();
    expect(old.error.details.differing_fields_unknown).toMatch(/unknown/);
    expect(old.error.message).toMatch(/arguments that cannot be compared field by field/);
    expect(effect.count()).toBe(1);
  });

  it('refuses a missing or malformed key as invalid input and runs nothing', async () => {
    const client = await t.connect();
    const effect = effectCounter(t.home);
    const missing = await call(client, 'capture_process_scenario', effect.launch());
    expect(missing.error.code).toBe('invalid_params');
    expect(missing.error.message).toMatch(/idempotency_key/);
    const malformed = await call(client, 'capture_process_scenario', {
      ...effect.launch(),
      idempotency_key: 'has spaces/and slashes',
    });
    expect(malformed.error.code).toBe('invalid_params');
    expect(effect.count()).toBe(0);
  });

  it('records a non-zero exit as an observation: succeeded, with the exit status', async () => {
    const client = await t.connect();
    const reply = await call(client, 'capture_process_scenario', {
      executable: '/usr/bin/false',
      idempotency_key: 'slice-false',
    });
    expect(reply.status).toBe('succeeded');
    expect(reply.summary.exit_code).toBe(1);
  });

  it('fails a launch whose executable lies outside the allowed roots, with policy_denied', async () => {
    const client = await t.connect();
    const reply = await call(client, 'capture_process_scenario', {
      executable: process.execPath.startsWith('/usr/bin') ? '/etc/passwd' : process.execPath,
      idempotency_key: 'slice-policy',
    });
    expect(reply.status).toBe('failed');
    expect(reply.error.code).toBe('policy_denied');
    expect(reply._isError).toBe(true);
  });

  it('retains the Evidence in the store and shows it to the team only', async () => {
    const client = await t.connect();
    const reply = await call(client, 'capture_process_scenario', {
      executable: '/usr/bin/echo',
      args: ['retained'],
      idempotency_key: 'slice-evidence',
    });
    const evidence = await call(client, 'get_evidence', { evidence_id: reply.evidence_id });
    expect(evidence.evidence).toMatchObject({
      evidence_id: reply.evidence_id,
      tool: 'capture_process_scenario',
      principal: 'local',
      team: 'local',
      launch: { workflow_id: 'launch/local/local/slice-evidence', run_id: reply.launch.run_id },
    });
    expect(await t.stack.store.evidence.allRows(reply.evidence_id, 'stdout')).toEqual([
      { line: 1, part: 0, text: 'retained' },
    ]);

    const outsider = await t.connect(await t.tokenFor('mallory', 'other-team'));
    const hidden = await call(outsider, 'get_evidence', { evidence_id: reply.evidence_id });
    expect(hidden.error.code).toBe('not_found');
  });

  it('makes the launch auditable in Temporal with its search attributes filled in', async () => {
    const client = await t.connect();
    const reply = await call(client, 'capture_process_scenario', {
      executable: '/usr/bin/true',
      idempotency_key: 'slice-audit',
      investigation: 'inv-audit',
    });
    // The auditor's client holds the cluster's payload key: memo and payloads are sealed.
    await asAuditor(t, async (temporal) => {
      const description = await temporal.workflow.getHandle(reply.launch.workflow_id).describe();
      const sa = description.typedSearchAttributes;
      const attrs = Object.fromEntries(
        Object.entries(SEARCH_ATTRIBUTES).map(([, key]) => [key.name, sa.get(key)]),
      );
      expect(attrs).toMatchObject({
        DossierTool: 'capture_process_scenario',
        DossierPrincipal: 'local',
        DossierTeam: 'local',
        DossierKey: 'slice-audit',
        DossierInvestigation: 'inv-audit',
      });
      expect(attrs.DossierBodyDigest).toMatch(/^[0-9a-f]{64}$/);
      expect(description.memo).toMatchObject({ key: 'slice-audit', tool: 'capture_process_scenario' });
    });
    expect(reply.launch.ui_url).toContain(encodeURIComponent(reply.launch.workflow_id));
  });

  it('runs a launch on its capability’s queue, where the worker that schedules the effect is handed it', async () => {
    const client = await t.connect();
    const reply = await call(client, 'capture_process_scenario', {
      executable: '/usr/bin/true',
      idempotency_key: 'slice-queue',
    });
    expect(reply.status).toBe('succeeded');
    await asAuditor(t, async (temporal) => {
      const handle = temporal.workflow.getHandle(reply.launch.workflow_id);
      expect((await handle.describe()).taskQueue).toBe('dossier-capture');
      // The reply follows the stored outcome; the workflow's last events may follow it by a moment.
      const events = (await eventually('the launch workflow to complete', async () => {
        const all = (await handle.fetchHistory()).events ?? [];
        return all.some((e) => e.workflowExecutionCompletedEventAttributes) ? all : undefined;
      }))!;
      const scheduled = events.find((e) => e.activityTaskScheduledEventAttributes);
      expect(scheduled!.activityTaskScheduledEventAttributes!.taskQueue!.name).toBe('dossier-capture');
      // One worker took the workflow task that scheduled the effect and the effect itself.
      const completedBy = events.find((e) => e.workflowTaskCompletedEventAttributes)!
        .workflowTaskCompletedEventAttributes!.identity;
      const startedBy = events.find((e) => e.activityTaskStartedEventAttributes)!
        .activityTaskStartedEventAttributes!.identity;
      expect(startedBy).toBe(completedBy);
    });
  });

  it('a launch whose capability no worker serves still runs its workflow, and cancels at once', async () => {
    const only = await startTestStack({ env: { DOSSIER_WORKER_CAPABILITIES: 'extract' } });
    try {
      const client = await only.connect();
      const reply = await call(client, 'capture_process_scenario', {
        executable: '/usr/bin/true',
        idempotency_key: 'no-capture-worker',
        wait_ms: 500,
      });
      expect(reply.status).toBe('running');
      await asAuditor(only, async (temporal) => {
        const handle = temporal.workflow.getHandle(reply.launch.workflow_id);
        // The extract-only worker ran the capture launch's workflow task: its effect waits for a
        // capture worker (provider_unavailable after the schedule-to-start timeout), never run here.
        // On a loaded machine the workflow task may still be on its way when the call returns.
        const events = await eventually('the effect to be scheduled', async () => {
          const history = (await handle.fetchHistory()).events ?? [];
          return history.some((e) => e.activityTaskScheduledEventAttributes) ? history : undefined;
        });
        expect(events!.some((e) => e.activityTaskStartedEventAttributes)).toBe(false);
      });
      const cancelled = await call(client, 'cancel_launch', { idempotency_key: 'no-capture-worker' });
      expect(cancelled.status).toBe('cancelled');
    } finally {
      await only.stop(true);
    }
  });

  it('finds every launch and Evidence record where it was after a restart', async () => {
    const client = await t.connect();
    const before = await call(client, 'capture_process_scenario', {
      executable: '/usr/bin/true',
      idempotency_key: 'slice-restart',
    });
    await t.restart();
    const after = await t.connect();
    const launch = await call(after, 'get_launch', { idempotency_key: 'slice-restart' });
    expect(launch).toMatchObject({ status: 'succeeded', evidence_id: before.evidence_id });
    const evidence = await call(after, 'get_evidence', { evidence_id: before.evidence_id });
    expect(evidence.evidence.evidence_id).toBe(before.evidence_id);
  });
});
