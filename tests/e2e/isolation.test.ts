// Isolation below the API, tried as a hostile operator of another team would:
// what a launched program can reach, what a tampered artifact store runs, what
// a swapped symlink copies, what a bomb writes to disk, and what Temporal and
// its UI show of a team's secrets.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { Client as TemporalClient, Connection } from '@temporalio/client';
import { startUiServer } from '../../src/dev/uiServer.ts';
import { providerKey } from '../../src/analysis/venv.ts';
import { bodyDigest, databaseWorkflowId } from '../../src/launches/keys.ts';
import { payloadKeys } from '../../src/temporal/codec.ts';
import { dataConverter } from '../../src/temporal/dataConverter.ts';
import { capabilityQueue, WORKFLOW_TASK_QUEUE } from '../../src/temporal/queues.ts';
import { artifactPath } from '../../src/evidence/artifacts.ts';
import { call, effectCounter, type Reply } from '../helpers/mcp.ts';
import { freePort } from '../helpers/ports.ts';
import { startTestStack, type TestStack } from '../helpers/stack.ts';
import { scratchDir } from '../helpers/scratch.ts';
import { eventually } from '../helpers/wait.ts';

const work = scratchDir('isolation');
const roots = path.join(work, 'roots');
let t: TestStack;
let alice: Client; // team local
let mallory: Client; // another team
const sha = (data: Buffer | string) => createHash('sha256').update(data).digest('hex');

beforeAll(async () => {
  mkdirSync(roots);
  t = await startTestStack({ env: { DOSSIER_ALLOWED_ROOTS: `/usr/bin:${roots}` } });
  alice = await t.connect();
  mallory = await t.connect(await t.tokenFor('mallory', 'rival-team'));
});
afterAll(async () => {
  await t?.stop(true);
});

async function rows(client: Client, evidenceId: string, collection: string): Promise<Reply[]> {
  const page = await call(client, 'inspect_analysis_view', {
    evidence_id: evidenceId,
    view: { kind: 'page', collection, offset: 0, limit: 256 },
  });
  return page.rows.map((r: Reply) => r.row);
}

describe('what a launched program can reach', () => {
  it('another team’s capture cannot read the store, dev.json, other workspaces, artifacts, extractions, /etc/shadow or /root, write the artifact store, reach the gateway or signal a worker', async () => {
    // Team local leaves traces: an artifact, an extraction and a workspace.
    const secret = path.join(roots, 'secret.tar');
    const tree = path.join(work, 'tree');
    mkdirSync(tree);
    writeFileSync(path.join(tree, 'plans.txt'), 'team local only\n');
    execFileSync('tar', ['-cf', secret, '-C', tree, 'plans.txt']);
    const artifact = (await call(alice, 'register_artifact', { path: secret })).artifact;
    const extracted = await call(alice, 'extract_artifact', {
      artifact: artifact.digest,
      idempotency_key: 'local-extract',
    });
    expect(extracted.status).toBe('succeeded');
    const local = await call(alice, 'capture_process_scenario', {
      executable: '/usr/bin/sh',
      args: ['-c', 'echo private > notes.txt'],
      idempotency_key: 'local-notes',
    });
    // Its Evidence names it /workspace, as its sandbox did: on the worker it is under DOSSIER_HOME.
    const launchDir = path.join(t.home, 'workspaces', sha(local.launch.workflow_id).slice(0, 24));
    const localWorkspace = path.join(
      launchDir,
      readdirSync(launchDir).find((n) => !n.includes('.'))!,
    );
    const storeFile = artifactPath(t.home, artifact.digest);
    const before = readFileSync(storeFile);

    const port = new URL(t.url).port;
    const probes: [string, string][] = [
      ['read the store', `cat ${t.home}/dossier.db`],
      ['read dev.json', `cat ${t.home}/dev.json`],
      ['read the payload key', `cat ${t.home}/payload.key`],
      ['read another workspace', `cat ${localWorkspace}/notes.txt`],
      ['list the artifacts', `ls ${t.home}/artifacts/sha256`],
      ['read an artifact', `cat ${storeFile}`],
      ['read an extraction', `cat ${path.join(t.home, extracted.summary.output)}/plans.txt`],
      ['read /etc/shadow', 'cat /etc/shadow'],
      ['list /root', 'ls /root'],
      ['write the artifact store', `echo tampered > ${storeFile}`],
      [
        'connect to the gateway',
        `python3 -c "import socket; socket.create_connection(('127.0.0.1', ${port}), 2)"`,
      ],
      ['signal a worker', `kill -0 ${process.pid}`],
    ];
    const script = probes
      .map(
        ([what, cmd]) =>
          `if ${cmd} >/dev/null 2>&1; then echo "${what}: ALLOWED"; else echo "${what}: denied"; fi`,
      )
      .join('\n');
    const attack = await call(mallory, 'capture_process_scenario', {
      executable: '/usr/bin/sh',
      args: ['-c', script],
      env: { PATH: '/usr/bin:/bin' },
      idempotency_key: 'reach-everything',
    });
    expect(attack.status).toBe('succeeded');
    const lines = (await rows(mallory, attack.evidence_id, 'stdout')).map((r) => r.text);
    expect(lines).toEqual(probes.map(([what]) => `${what}: denied`));
    expect(readFileSync(storeFile)).toEqual(before);

    const evidence = await call(mallory, 'get_evidence', { evidence_id: attack.evidence_id });
    expect(evidence.evidence.parameters.isolation).toBe('sandbox');
    const facts = (await t.stack.store.evidence.document('rival-team', attack.evidence_id))!.sandbox as Reply;
    expect(facts).toMatchObject({ isolation: 'sandbox', network: false });
    expect(
      [...facts.visible, ...facts.writable].some(
        (p: string) => p.startsWith(t.home) && !p.includes('/workspaces/'),
      ),
    ).toBe(false);
  });

  it('a program cannot keep processes alive past its launch, and runs as a uid of its own', async () => {
    const reply = await call(alice, 'capture_process_scenario', {
      executable: '/usr/bin/sh',
      args: ['-c', 'id -u; (sleep 300 &) ; echo started'],
      env: { PATH: '/usr/bin:/bin' },
      idempotency_key: 'orphan-attempt',
    });
    const [uid] = (await rows(alice, reply.evidence_id, 'stdout')).map((r) => r.text);
    if (process.getuid?.() === 0) expect(Number(uid)).toBeGreaterThanOrEqual(1_000_000);
    const sleepers = execFileSync('ps', ['-eo', 'uid=,args=']).toString().split('\n');
    expect(sleepers.filter((l) => l.trim().startsWith(`${uid} `) && l.includes('sleep 300'))).toEqual([]);
  });
});

describe('what a traced program leaves for its tracer', () => {
  it('a link it puts in place of its trace never reads a host file into its Evidence, and a FIFO never holds the worker', async () => {
    // A host file the program cannot see, but the worker, reading the trace as root, could.
    const hostSecret = path.join(work, 'host-secret.txt');
    const token = `dsr_${sha('not for mallory').slice(0, 32)}`;
    writeFileSync(hostSecret, `${token}\n`, { mode: 0o600 });
    const linked = await call(mallory, 'capture_process_scenario', {
      executable: '/usr/bin/sh',
      args: [
        '-c',
        `chmod 777 /workspace /trace; rm -f /trace/trace.txt; ln -s ${hostSecret} /trace/trace.txt`,
      ],
      trace_syscalls: true,
      idempotency_key: 'trace-link',
    });
    expect(linked.status, JSON.stringify(linked.error)).toBe('succeeded');
    const evidence = (await call(mallory, 'get_evidence', { evidence_id: linked.evidence_id })).evidence;
    expect(evidence.limitations.join(' ')).toMatch(/trace\.txt.*not read/);
    expect(evidence.collections.events?.rows ?? 0).toBe(0);
    expect(JSON.stringify(await rows(mallory, linked.evidence_id, 'files'))).not.toContain(token);
    // The folders it opened to everyone are the worker's alone again once it has ended.
    const root = path.join(t.home, 'workspaces');
    const folders = readdirSync(root).flatMap((l) =>
      readdirSync(path.join(root, l)).map((w) => path.join(root, l, w)),
    );
    // The traced captures' workspaces and their tracer's folders (other tools' workspaces differ).
    const traced = folders.filter((f) => f.endsWith('.trace') || folders.includes(`${f}.trace`));
    expect(traced.length).toBeGreaterThanOrEqual(2);
    for (const folder of traced) {
      const info = statSync(folder);
      expect([folder, info.mode & 0o777, info.uid]).toEqual([folder, 0o700, process.getuid?.() ?? 0]);
    }

    const started = Date.now();
    const fifo = await call(mallory, 'capture_process_scenario', {
      executable: '/usr/bin/sh',
      args: ['-c', 'rm -f /trace/trace.txt; mkfifo -m 666 /trace/trace.txt'],
      trace_syscalls: true,
      timeout_ms: 5_000,
      idempotency_key: 'trace-fifo',
    });
    expect(fifo.status, JSON.stringify(fifo.error)).toBe('succeeded');
    expect(Date.now() - started).toBeLessThan(30_000);
    // The worker still runs another team's launch at once.
    const next = await call(alice, 'capture_process_scenario', {
      executable: '/usr/bin/true',
      idempotency_key: 'after-fifo',
    });
    expect(next.status).toBe('succeeded');
  });
});

describe('artifacts are immutable and verified', () => {
  it('a changed artifact store file is refused with integrity_error and nothing runs; registering the content again heals it', async () => {
    const script = path.join(roots, 'hello.sh');
    writeFileSync(script, '#!/bin/sh\necho hello\n');
    chmodSync(script, 0o755);
    const { artifact } = await call(alice, 'register_artifact', { path: script });
    const stored = artifactPath(t.home, artifact.digest);
    chmodSync(stored, 0o644);
    writeFileSync(stored, '#!/bin/sh\necho tampered\n'); // an out-of-band change to the store
    const counter = effectCounter(t.home);
    const refused = await call(alice, 'capture_process_scenario', {
      executable: artifact.digest,
      idempotency_key: 'run-tampered',
    });
    expect(refused.status).toBe('failed');
    expect(refused.error).toMatchObject({ code: 'integrity_error', category: 'integrity' });
    expect(refused.error.details.effect_began).toBe(false);
    expect(counter.count()).toBe(0);
    const extract = await call(alice, 'extract_artifact', {
      artifact: artifact.digest,
      idempotency_key: 'x-tampered',
    });
    expect(extract.error.code).toBe('integrity_error');

    await call(alice, 'register_artifact', { path: script });
    const healed = await call(alice, 'capture_process_scenario', {
      executable: artifact.digest,
      env: { PATH: '/usr/bin:/bin' },
      idempotency_key: 'run-healed',
    });
    expect(healed.summary.stdout_head).toBe('hello\n');
    expect(
      (await call(alice, 'get_evidence', { evidence_id: healed.evidence_id })).evidence.target.digest,
    ).toBe(artifact.digest);
  });
});

describe('paths a caller names', () => {
  it('a symlink swapped between check and copy 300 times never copies /etc/shadow', async () => {
    const dir = path.join(roots, 'race');
    mkdirSync(path.join(dir, 'real'), { recursive: true });
    writeFileSync(path.join(dir, 'good'), 'harmless\n');
    writeFileSync(path.join(dir, 'real', 'shadow'), 'also harmless\n');
    // One swapper flips the last component, the other a directory on the way.
    const swapper: ChildProcess = spawn('python3', [
      '-c',
      `import os
d = ${JSON.stringify(dir)}
while True:
    for target, name in (('/etc/shadow', 'link'), ('good', 'link'), ('/etc', 'dir'), ('real', 'dir')):
        tmp = os.path.join(d, name + '.tmp')
        try: os.remove(tmp)
        except FileNotFoundError: pass
        os.symlink(target, tmp)
        os.replace(tmp, os.path.join(d, name))`,
    ]);
    const shadow = `sha256:${sha(readFileSync('/etc/shadow'))}`;
    const allowed = new Set([`sha256:${sha('harmless\n')}`, `sha256:${sha('also harmless\n')}`]);
    const outcomes: Record<string, number> = {};
    try {
      for (let i = 0; i < 300; i++) {
        const reply = await call(alice, 'register_artifact', {
          path: path.join(dir, i % 2 ? 'link' : 'dir/shadow'),
        });
        const digest = reply.artifact?.digest as string | undefined;
        expect(digest).not.toBe(shadow);
        if (digest) expect(allowed.has(digest)).toBe(true);
        const key = digest ? 'copied a harmless file' : reply.error.code;
        outcomes[key] = (outcomes[key] ?? 0) + 1;
      }
    } finally {
      swapper.kill('SIGKILL');
    }
    expect(
      Object.keys(outcomes).every((k) =>
        ['copied a harmless file', 'policy_denied', 'not_found'].includes(k),
      ),
    ).toBe(true);
    expect(outcomes.policy_denied).toBeGreaterThan(0);
    const storedDigests = readdirSync(path.join(t.home, 'artifacts', 'sha256')).flatMap((p) =>
      readdirSync(path.join(t.home, 'artifacts', 'sha256', p)),
    );
    expect(storedDigests).not.toContain(shadow.slice('sha256:'.length));
  }, 240_000);
});

describe('bounds hold while writing', () => {
  /** Samples the bytes under DOSSIER_HOME's workspaces and extractions while `run` runs; returns the peak growth. */
  async function peakGrowth(run: () => Promise<Reply>) {
    const size = () => {
      let total = 0;
      const walk = (dir: string) => {
        let entries: string[] = [];
        try {
          entries = readdirSync(dir);
        } catch {
          return;
        }
        for (const name of entries) {
          const full = path.join(dir, name);
          try {
            const info = statSync(full);
            if (info.isDirectory()) walk(full);
            else total += info.blocks * 512;
          } catch {
            // removed while we looked
          }
        }
      };
      walk(path.join(t.home, 'workspaces'));
      walk(path.join(t.home, 'extractions'));
      return total;
    };
    const base = size();
    let peak = 0;
    let done = false;
    const sampler = (async () => {
      while (!done) {
        peak = Math.max(peak, size() - base);
        await new Promise((r) => setTimeout(r, 10));
      }
    })();
    const reply = await run();
    done = true;
    await sampler;
    return { reply, peak };
  }

  it.each([
    [
      '7z',
      (file: string, zeros: string) => execFileSync('7zz', ['a', '-bd', file, zeros], { stdio: 'ignore' }),
    ],
    [
      'tar.xz',
      (file: string, zeros: string) =>
        execFileSync('tar', ['-cJf', file, '-C', path.dirname(zeros), path.basename(zeros)]),
    ],
  ])('a %s bomb is refused with peak disk within the ratio bound', async (kind, make) => {
    const zeros = path.join(work, `zeros-${kind}`);
    execFileSync('truncate', ['-s', String(256 * 1024 * 1024), zeros]);
    const bomb = path.join(roots, `bomb.${kind}`);
    make(bomb, zeros);
    const bytes = statSync(bomb).size;
    const { artifact } = await call(alice, 'register_artifact', { path: bomb });
    const { reply, peak } = await peakGrowth(() =>
      call(alice, 'extract_artifact', {
        artifact: artifact.digest,
        limits: { max_ratio: 100 },
        idempotency_key: `bomb-${kind}`,
      }),
    );
    expect(reply.status).toBe('failed');
    expect(reply.error.code).toBe('resource_constraint');
    const bound = 100 * bytes;
    expect(peak).toBeLessThanOrEqual(bound + 1024 * 1024);
    expect(reply.summary?.output ?? null).toBeNull();
  });
});

describe('Temporal holds no secret in clear', () => {
  let launch: Reply;
  const secretEnv = `env-secret-${Date.now()}`;
  const secretStdin = `stdin-secret-${Date.now()}`;
  let history: string;

  beforeAll(async () => {
    launch = await call(alice, 'capture_process_scenario', {
      executable: '/usr/bin/cat',
      env: { API_TOKEN: secretEnv },
      stdin: secretStdin,
      idempotency_key: 'secrets-in-temporal',
    });
    expect(launch.status).toBe('succeeded');
    history = execFileSync(inject('temporalCli'), [
      'workflow',
      'show',
      '--workflow-id',
      launch.launch.workflow_id,
      '--namespace',
      t.namespace,
      '--address',
      t.env.DOSSIER_TEMPORAL_ADDRESS!,
      '-o',
      'json',
    ]).toString();
  });

  it('temporal workflow show -o json of a capture with env values and stdin contains neither in clear', () => {
    expect(history.length).toBeGreaterThan(1_000);
    expect(history).not.toContain(secretEnv);
    expect(history).not.toContain(secretStdin);
    expect(history).not.toContain(Buffer.from(secretEnv).toString('base64').slice(0, 16));
    expect(history).toContain(Buffer.from('binary/encrypted').toString('base64'));
  });

  it('the codec endpoint opens a payload for its own team’s token only', async () => {
    const started = JSON.parse(history).events.find((e: Reply) => e.workflowExecutionStartedEventAttributes)
      .workflowExecutionStartedEventAttributes.input.payloads as Reply[];
    const decode = (token?: string) =>
      fetch(t.url.replace(/\/mcp$/, '/codec/decode'), {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          ...(token ? { Authorization: `Bearer ${token}` } : {}),
        },
        body: JSON.stringify({ payloads: started }),
      });
    const own = await decode(t.token);
    expect(own.status).toBe(200);
    const opened = ((await own.json()) as { payloads: Reply[] }).payloads;
    expect(Buffer.from(opened[0]!.data, 'base64').toString()).toContain(secretEnv);

    const rival = await decode(await t.tokenFor('eve', 'rival-team'));
    expect(rival.status).toBe(200);
    expect(rival.headers.get('x-dossier-withheld')).toBe('1');
    const withheld = ((await rival.json()) as { payloads: Reply[] }).payloads;
    expect(withheld).toEqual(started);
    expect(JSON.stringify(withheld)).not.toContain(Buffer.from(secretEnv).toString('base64').slice(0, 16));

    expect((await decode()).status).toBe(401);
    expect((await decode('dsr_not-a-token')).status).toBe(401);
  });
});

describe('what a workflow started on Temporal makes a worker do', () => {
  it('a launch workflow that is not the claimed launch of its ID runs nothing, in no team’s name', async () => {
    const connection = await Connection.connect({ address: t.env.DOSSIER_TEMPORAL_ADDRESS! });
    // No codec: the input reaches the worker unsealed, as a starter without the keys sends it.
    const temporal = new TemporalClient({ connection, namespace: t.namespace });
    const evidenceOf = async (client: Client) => (await call(client, 'list_evidence', {})).evidence.length;
    const forged = (workflowId: string, team: string, principal: string, key: string) => {
      const input = { executable: '/usr/bin/true', args: [], env: {}, timeout_ms: 5_000 };
      return temporal.workflow.start('launchWorkflow', {
        taskQueue: capabilityQueue('capture'),
        workflowId,
        args: [
          {
            workflowId,
            tool: 'capture_process_scenario',
            capability: 'capture',
            input,
            principal,
            team,
            key,
            bodyDigest: bodyDigest('capture_process_scenario', input),
            investigation: null,
            maxRunMs: 30_000,
          },
        ],
      });
    };
    try {
      const ownBefore = await evidenceOf(alice);
      const rivalBefore = await evidenceOf(mallory);
      // Under an ID of alice's team that nobody claimed, carrying the rival team's name: refused.
      const unclaimed = await forged('launch/local/local/forged-unclaimed', 'rival-team', 'mallory', 'x');
      await expect(unclaimed.result()).rejects.toThrow();
      // Alice's claimed launch, not begun yet, run under its ID with the rival team's name and another
      // body (the journal alone would let it begin): refused, and her claim is untouched.
      const claimedInput = { executable: '/usr/bin/true', args: [] };
      const workflowId = 'launch/local/local/forged-over';
      await t.stack.store.launches.claim({
        team: 'local',
        principal: 'local',
        key: 'forged-over',
        tool: 'capture_process_scenario',
        bodyDigest: bodyDigest('capture_process_scenario', claimedInput),
        input: claimedInput,
        workflowId,
        investigation: null,
      });
      const over = await forged(workflowId, 'rival-team', 'mallory', 'forged-over');
      await expect(over.result()).rejects.toThrow();
      expect(JSON.stringify((await over.fetchHistory()).events)).toContain('DossierUnvouchedRequest');
      expect(await t.stack.store.launches.byWorkflowId(workflowId)).toMatchObject({
        effect: 'not_started',
        status: 'pending',
        error: null,
      });
      expect(await evidenceOf(mallory)).toBe(rivalBefore);
      expect(await evidenceOf(alice)).toBe(ownBefore);

      // An analysis of alice's team whose "database" is the rival's launch: the worker would have
      // fetched that workflow's result (the rival's output) and handed it to alice's team.
      const secret = await call(mallory, 'capture_process_scenario', {
        executable: '/usr/bin/sh',
        args: ['-c', 'echo RIVAL-ONLY-SECRET'],
        idempotency_key: 'rival-secret',
      });
      expect(secret.status).toBe('succeeded');
      const deputy = await temporal.workflow.start('analysisWorkflow', {
        taskQueue: WORKFLOW_TASK_QUEUE,
        workflowId: 'analysis/local/forged-deputy',
        args: [
          {
            workflowId: 'analysis/local/forged-deputy',
            team: 'local',
            key: 'forged-deputy',
            tool: 'inspect_binary',
            input: { artifact: 'sha256:' + '0'.repeat(64) },
            requestedBy: 'local',
            database: {
              workflowId: secret.launch.workflow_id,
              team: 'local',
              key: 'x',
              artifact: 'sha256:' + '0'.repeat(64),
              profile: 'default',
              requestedBy: 'local',
              maxRunMs: 30_000,
            },
            maxRunMs: 30_000,
          },
        ],
      });
      await expect(deputy.result()).rejects.toThrow();
      const deputyEvents = (await deputy.fetchHistory()).events ?? [];
      expect(JSON.stringify(deputyEvents)).toContain('DossierUnvouchedRequest');
      // No activity of it completed: no result of the rival's workflow came back in alice's name.
      expect(deputyEvents.filter((e) => e.activityTaskCompletedEventAttributes)).toEqual([]);
      expect(await t.stack.store.analyses.byWorkflowId(secret.launch.workflow_id)).toBeUndefined();
    } finally {
      await connection.close();
    }
  });
});

describe('the audit UI audits, it does not act, and shows each team its own', () => {
  /** The UI server behind its guard, on the test stack's Temporal, store and codec endpoint. */
  const auditUi = async (dir: string) =>
    startUiServer({
      binary: inject('uiServer'),
      dir: path.join(work, dir),
      temporalAddress: t.env.DOSSIER_TEMPORAL_ADDRESS!,
      host: '127.0.0.1',
      port: await freePort(),
      namespace: t.namespace,
      codecEndpoint: t.url.replace(/\/mcp$/, '/codec'),
      viewer: (token) => t.stack.store.tokens.resolve(token),
    });

  it('runs with write actions disabled and the codec endpoint configured; only reads reach its API, however a write is dressed', async () => {
    const ui = await auditUi('ui');
    const connection = await Connection.connect({ address: t.env.DOSSIER_TEMPORAL_ADDRESS! });
    try {
      const signedIn = { authorization: `Bearer ${t.token}` };
      const settingsReply = await fetch(`${ui.url}/api/v1/settings`, { headers: signedIn });
      const settings = (await settingsReply.json()) as Reply;
      // The UI's own CSRF cookie and header, as a browser would send them: the refusal is the write block's.
      const csrf = /_csrf=([^;]+)/.exec(settingsReply.headers.get('set-cookie') ?? '')![1]!;
      expect(settings).toMatchObject({
        DisableWriteActions: true,
        WorkflowTerminateDisabled: true,
        WorkflowResetDisabled: true,
        WorkflowSignalDisabled: true,
        StartWorkflowDisabled: true,
        BatchActionsDisabled: true,
        // The guard's own path: the browser sends it only its session cookie, on whatever host.
        Codec: { Endpoint: '/codec', IncludeCredentials: false },
      });
      const launch = await call(alice, 'capture_process_scenario', {
        executable: '/usr/bin/true',
        idempotency_key: 'ui-terminate-target',
      });
      const terminate = await fetch(
        `${ui.url}/api/v1/namespaces/${t.namespace}/workflows/${encodeURIComponent(launch.launch.workflow_id)}/terminate`,
        {
          method: 'POST',
          body: '{}',
          headers: { cookie: `_csrf=${csrf}`, 'x-csrf-token': csrf, ...signedIn },
        },
      );
      expect(terminate.status).toBe(405);

      // The UI server's own switch lets a POST through whose decoded path names a workflow query,
      // and its router matches the raw path: an encoded slash smuggled a batch terminate and a
      // signal-with-start past it. Its guard passes reads only.
      const headers = {
        cookie: `_csrf=${csrf}`,
        'x-csrf-token': csrf,
        'content-type': 'application/json',
        ...signedIn,
      };
      const batch = await fetch(
        `${ui.url}/api/v1/namespaces/${t.namespace}/batch-operations/x%2Fworkflows%2Fy%2Fquery%2Fz`,
        {
          method: 'POST',
          headers,
          body: JSON.stringify({
            visibilityQuery: `WorkflowId = '${launch.launch.workflow_id}'`,
            reason: 'smuggled',
            terminationOperation: {},
          }),
        },
      );
      expect(batch.status).toBe(405);
      expect(batch.headers.get('allow')).toBe('GET, HEAD');
      const forgedId = 'launch/rival/mallory/forged-by-ui';
      const forged = encodeURIComponent(forgedId);
      const signalStart = await fetch(
        `${ui.url}/api/v1/namespaces/${t.namespace}/workflows/${forged}/signal-with-start/x%2Fquery%2Fy`,
        {
          method: 'POST',
          headers,
          body: JSON.stringify({ workflowType: { name: 'launchWorkflow' }, taskQueue: { name: 'x' } }),
        },
      );
      expect(signalStart.status).toBe(405);
      for (const method of ['PUT', 'PATCH', 'DELETE']) {
        const other = await fetch(`${ui.url}/api/v1/namespaces/${t.namespace}/workflows/${forged}`, {
          method,
          headers,
        });
        expect(other.status).toBe(405);
      }
      // Nothing was started or batched (asked of Temporal itself), and the launch still runs its course.
      const temporal = new TemporalClient({ connection, namespace: t.namespace });
      await expect(temporal.workflow.getHandle(forgedId).describe()).rejects.toThrow(/not found/i);
      const batches = await connection.workflowService.listBatchOperations({ namespace: t.namespace });
      expect(batches.operationInfo ?? []).toEqual([]);
      // The launch's own workflow reads, and ends Completed (its last task may follow the reply by a moment).
      await eventually('the launch workflow to read as Completed', async () => {
        const own = await fetch(
          `${ui.url}/api/v1/namespaces/${t.namespace}/workflows/${encodeURIComponent(launch.launch.workflow_id)}`,
          { headers: signedIn },
        );
        expect(own.status).toBe(200);
        return JSON.stringify(await own.json()).includes('WORKFLOW_EXECUTION_STATUS_COMPLETED');
      });
    } finally {
      await connection.close();
      await ui.stop();
    }
  });

  it('shows nothing to a browser that has not signed in, and each signed-in team its own workflows only', async () => {
    const ui = await auditUi('ui-teams');
    try {
      const ours = await call(alice, 'capture_process_scenario', {
        executable: '/usr/bin/true',
        idempotency_key: 'ui-ours',
      });
      const theirs = await call(mallory, 'capture_process_scenario', {
        executable: '/usr/bin/true',
        idempotency_key: 'ui-theirs',
      });
      const api = `${ui.url}/api/v1/namespaces/${t.namespace}`;
      // Temporal's JSON leaves an empty list out.
      const ids = async (reply: Response) =>
        (
          ((await reply.json()) as { executions?: { execution: { workflowId: string } }[] }).executions ?? []
        ).map((e) => e.execution.workflowId);

      // No token: the page goes to the sign-in form, the API says how to sign in and shows nothing.
      const page = await fetch(`${ui.url}/namespaces/${t.namespace}/workflows`, { redirect: 'manual' });
      expect(page.status).toBe(303);
      expect(page.headers.get('location')).toMatch(/^\/dossier\/sign-in\?next=/);
      const anonymous = await fetch(`${api}/workflows`);
      expect(anonymous.status).toBe(401);
      expect(await anonymous.text()).not.toContain('ui-ours');

      // Mallory signs in as a browser does and sees her team's launch, not alice's.
      const malloryToken = await t.tokenFor('mallory', 'rival-team');
      const form = await fetch(`${ui.url}/dossier/sign-in`, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded', origin: ui.url },
        body: new URLSearchParams({ token: malloryToken }).toString(),
      });
      expect(form.status).toBe(303);
      const asMallory = {
        cookie: form.headers
          .getSetCookie()
          .map((c) => c.split(';')[0])
          .join('; '),
      };
      const listed = await ids(await fetch(`${api}/workflows`, { headers: asMallory }));
      expect(listed).toContain(theirs.launch.workflow_id);
      expect(listed).not.toContain(ours.launch.workflow_id);
      // A query that tries to step out of her team's group is refused, not run.
      const escape = await fetch(
        `${api}/workflows?query=${encodeURIComponent(`WorkflowId = 'x') OR (WorkflowId = '${ours.launch.workflow_id}'`)}`,
        { headers: asMallory },
      );
      expect(escape.status).toBe(400);
      // Nor one that hides a quote in a line comment Temporal's parser knows (`//`), to open a second
      // group on the next line: an oracle on every search attribute of every team, had it passed.
      const commented = await fetch(
        `${api}/workflow-count?query=${encodeURIComponent(`WorkflowId = "-" //'\n) OR (DossierTeam = "local" //'\nAND WorkflowId != ""`)}`,
        { headers: asMallory },
      );
      expect(commented.status).toBe(400);
      const byId = await fetch(
        `${api}/workflows?query=${encodeURIComponent(`WorkflowId = '${ours.launch.workflow_id}'`)}`,
        { headers: asMallory },
      );
      expect(await ids(byId)).toEqual([]);
      const count = await fetch(
        `${api}/workflow-count?query=${encodeURIComponent(`WorkflowId = '${ours.launch.workflow_id}'`)}`,
        {
          headers: asMallory,
        },
      );
      expect(((await count.json()) as { count?: string }).count ?? '0').toBe('0');
      // Alice's workflow itself, its history and its raw history file are not hers to read.
      const alicesId = encodeURIComponent(ours.launch.workflow_id);
      for (const suffix of [
        '',
        '/history',
        '/history-reverse',
        `/run/${ours.launch.run_id ?? 'x'}/history.json`,
      ]) {
        const reply = await fetch(`${api}/workflows/${alicesId}${suffix}`, { headers: asMallory });
        expect(reply.status, suffix).toBe(403);
      }
      // Nor can she name it in a parameter of a read of her own.
      const smuggled = await fetch(
        `${api}/workflows/${encodeURIComponent(theirs.launch.workflow_id)}?execution.workflowId=${alicesId}`,
        { headers: asMallory },
      );
      expect(JSON.stringify(await smuggled.json())).not.toContain(ours.launch.workflow_id);
      // Alice, signed in with her token, sees hers.
      const asAlice = { authorization: `Bearer ${t.token}` };
      expect(await ids(await fetch(`${api}/workflows`, { headers: asAlice }))).toContain(
        ours.launch.workflow_id,
      );
      // A revoked token stops at once.
      expect(await t.stack.store.tokens.revoke(sha(malloryToken).slice(0, 16))).toBe(1);
      expect((await fetch(`${api}/workflows`, { headers: asMallory })).status).toBe(401);
    } finally {
      await ui.stop();
    }
  });

  it('a team’s failed analysis database build is in its own list with its tool, artifact and outcome, readable with its history; never in another team’s', async () => {
    const ui = await auditUi('ui-builds');
    const connection = await Connection.connect({ address: t.env.DOSSIER_TEMPORAL_ADDRESS! });
    try {
      // A build that fails fast: the provider refuses a file that is no binary.
      const text = path.join(roots, 'not-a-binary.txt');
      writeFileSync(text, 'just words, no executable here\n');
      const { artifact } = await call(alice, 'register_artifact', { path: text });
      const failed = await call(alice, 'list_functions', { artifact: artifact.digest, wait_ms: 110_000 });
      expect(failed.status, JSON.stringify(failed)).toBe('failed');
      expect(failed.error.code).toBe('unsupported_target');
      const buildId = databaseWorkflowId('local', artifact.digest, 'default', providerKey());

      // The audit finds the build, and the analysis that waited on it, by team, tool, artifact and outcome.
      const temporal = new TemporalClient({
        connection,
        namespace: t.namespace,
        dataConverter: dataConverter(payloadKeys([], t.home)),
      });
      const listed = (query: string) =>
        eventually(`a workflow for ${query}`, async () => {
          const ids: string[] = [];
          for await (const w of temporal.workflow.list({ query })) ids.push(w.workflowId);
          return ids.length ? ids : undefined;
        });
      const about = `DossierTeam = 'local' AND DossierArtifact = '${artifact.digest}' AND DossierOutcome = 'failed'`;
      expect(await listed(`${about} AND DossierTool = 'analysis_database'`)).toEqual([buildId]);
      expect(await listed(`${about} AND DossierTool = 'list_functions'`)).toEqual([
        failed.analysis.workflow_id,
      ]);

      // Through the audit UI: the team's own list shows the build, and its workflow and history read.
      const api = `${ui.url}/api/v1/namespaces/${t.namespace}`;
      const ids = async (reply: Response) =>
        (
          ((await reply.json()) as { executions?: { execution: { workflowId: string } }[] }).executions ?? []
        ).map((e) => e.execution.workflowId);
      const builds = `?query=${encodeURIComponent("DossierTool = 'analysis_database'")}`;
      const asAlice = { authorization: `Bearer ${t.token}` };
      expect(await ids(await fetch(`${api}/workflows${builds}`, { headers: asAlice }))).toContain(buildId);
      const build = `${api}/workflows/${encodeURIComponent(buildId)}`;
      const described = await fetch(build, { headers: asAlice });
      expect(described.status).toBe(200);
      expect(JSON.stringify(await described.json())).toContain('DossierOutcome');
      const history = await fetch(`${build}/history`, { headers: asAlice });
      expect(history.status).toBe(200);
      expect(JSON.stringify(await history.json())).toContain('WORKFLOW_EXECUTION_FAILED');
      // Another team sees none of it: not in its list, and neither the workflow nor its history.
      const asRival = { authorization: `Bearer ${await t.tokenFor('rival-auditor', 'rival-team')}` };
      expect(await ids(await fetch(`${api}/workflows${builds}`, { headers: asRival }))).not.toContain(
        buildId,
      );
      for (const suffix of ['', '/history', '/history-reverse'])
        expect((await fetch(`${build}${suffix}`, { headers: asRival })).status, suffix).toBe(403);
    } finally {
      await connection.close();
      await ui.stop();
    }
  }, 180_000);

  it('signs a browser in without the token in any cookie; through the guard the UI opens its team’s payloads, never another team’s', async () => {
    const ui = await auditUi('ui-codec');
    try {
      const secret = `ui-codec-secret-${Date.now()}`;
      const theirs = await call(alice, 'capture_process_scenario', {
        executable: '/usr/bin/true',
        env: { SECRET: secret },
        idempotency_key: 'ui-codec-payload',
      });
      const signIn = async (token: string) => {
        const form = await fetch(`${ui.url}/dossier/sign-in`, {
          method: 'POST',
          redirect: 'manual',
          headers: { 'content-type': 'application/x-www-form-urlencoded', origin: ui.url },
          body: new URLSearchParams({ token }).toString(),
        });
        expect(form.status).toBe(303);
        return form.headers.getSetCookie();
      };
      const malloryToken = await t.tokenFor('mallory-ui', 'rival-team');
      const aliceCookies = await signIn(t.token);
      const malloryCookies = await signIn(malloryToken);
      // Every cookie the sign-in (and the sign-out) sets: none holds a token, in any form.
      const signOut = await fetch(`${ui.url}/dossier/sign-out`, {
        method: 'POST',
        redirect: 'manual',
        headers: { origin: ui.url, cookie: aliceCookies.map((c) => c.split(';')[0]).join('; ') },
      });
      const every = [...aliceCookies, ...malloryCookies, ...signOut.headers.getSetCookie()];
      expect(every.length).toBeGreaterThanOrEqual(3);
      for (const cookie of every) {
        for (const token of [t.token, malloryToken]) {
          for (const form of [token, encodeURIComponent(token), token.slice('dsr_'.length, 24)])
            expect(cookie).not.toContain(form);
        }
      }
      // The cookie earlier releases kept the token in is cleared, not set.
      const old = every.filter((c) => c.startsWith('dossier_codec_token='));
      expect(old.every((c) => /^dossier_codec_token=;.*Max-Age=0/.test(c))).toBe(true);
      // The gateway has no sign-in that sets one either.
      const login = await fetch(t.url.replace(/\/mcp$/, '/codec/login'), {
        method: 'POST',
        body: new URLSearchParams({ token: t.token }),
      });
      expect(login.status).toBe(404);
      expect(login.headers.getSetCookie()).toEqual([]);

      // Alice signs in again and reads her launch's input as the UI does: its history, then the
      // sealed payloads posted to the UI's codec endpoint, which is the guard's.
      const asAlice = { cookie: (await signIn(t.token)).map((c) => c.split(';')[0]).join('; ') };
      const asMallory = { cookie: malloryCookies.map((c) => c.split(';')[0]).join('; ') };
      const history = (await (
        await fetch(
          `${ui.url}/api/v1/namespaces/${t.namespace}/workflows/${encodeURIComponent(theirs.launch.workflow_id)}/history`,
          { headers: asAlice },
        )
      ).json()) as { history: { events: Reply[] } };
      const payloads = history.history.events.find((e) => e.workflowExecutionStartedEventAttributes)!
        .workflowExecutionStartedEventAttributes.input.payloads as Reply[];
      const decode = (headers: Record<string, string>) =>
        fetch(`${ui.url}/codec/decode`, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'x-namespace': t.namespace,
            origin: ui.url,
            ...headers,
          },
          body: JSON.stringify({ payloads }),
        });
      const opened = await decode(asAlice);
      expect(opened.status).toBe(200);
      const clear = ((await opened.json()) as { payloads: Reply[] }).payloads;
      expect(Buffer.from(clear[0]!.data, 'base64').toString()).toContain(secret);
      // Mallory, signed in for another team, gets them back sealed.
      const withheld = await decode(asMallory);
      expect(withheld.status).toBe(200);
      expect(withheld.headers.get('x-dossier-withheld')).toBe(String(payloads.length));
      expect(((await withheld.json()) as { payloads: Reply[] }).payloads).toEqual(payloads);
      // Signed out, or from a page of another port of this host, nothing opens.
      expect((await decode({})).status).toBe(401);
      const otherPort = await decode({ ...asAlice, origin: 'http://127.0.0.1:1' });
      expect(otherPort.status).toBe(403);
      expect(await otherPort.text()).not.toContain(secret);
    } finally {
      await ui.stop();
    }
  });
});

describe('isolation "none", the admin’s escape', () => {
  it('runs only where the admin allows it, still as an unprivileged uid that cannot enter DOSSIER_HOME, and the Evidence says so', async () => {
    const escape = await startTestStack({ env: { DOSSIER_ALLOW_UNSANDBOXED: 'true' } });
    try {
      const client = await escape.connect();
      const reply = await call(client, 'capture_process_scenario', {
        executable: '/usr/bin/sh',
        args: [
          '-c',
          `id -u; cat /etc/hostname >/dev/null && echo host-visible; ls ${escape.home} || echo home-denied`,
        ],
        env: { PATH: '/usr/bin:/bin' },
        isolation: 'none',
        idempotency_key: 'escape-hatch',
      });
      expect(reply.status).toBe('succeeded');
      const lines = (await rows(client, reply.evidence_id, 'stdout')).map((r) => r.text);
      if (process.getuid?.() === 0) {
        expect(Number(lines[0])).toBeGreaterThanOrEqual(1_000_000);
        expect(lines).toContain('home-denied');
      }
      expect(lines).toContain('host-visible');
      const evidence = (await call(client, 'get_evidence', { evidence_id: reply.evidence_id })).evidence;
      expect(evidence.limitations.join(' ')).toMatch(/isolation "none"/);
    } finally {
      await escape.stop(true);
    }
  });
});
