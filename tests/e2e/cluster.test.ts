// The team cluster as `dossier cluster up` runs it: a real Temporal server
// (built with Go, not the dev server) on PostgreSQL, two gateway processes and
// three worker processes on the PostgreSQL store. What the key contract
// promises must hold when the parts of a cluster fail: a storm over both
// gateways, a worker killed, Temporal restarted, a gateway replica lost.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { execFileSync, spawnSync } from 'node:child_process';
import net from 'node:net';
import { createHash, randomUUID } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { ensureTemporalCerts } from '../../src/dev/certs.ts';
import { startCluster, type Cluster } from '../../src/dev/cluster.ts';
import { artifactPath } from '../../src/evidence/artifacts.ts';
import { leaseSize } from '../../src/gateway/rateLimit.ts';
import { openStore } from '../../src/store/store.ts';
import { serverPorts } from '../../src/dev/temporalServer.ts';
import { signalGroup } from '../../src/sandbox/processes.ts';
import { allRows, call, connectMcp, effectCounter, registerAndExtract, slowEffect } from '../helpers/mcp.ts';
import { freeLowPorts, freePort } from '../helpers/ports.ts';
import { bareHandshake, temporalAnswer } from '../helpers/temporalTls.ts';
import { eventually, processesRunning } from '../helpers/wait.ts';
import { modernRequest, TASKS } from '../helpers/modern.ts';

const METRICS_TOKEN = `metrics-${randomUUID()}`;
const RATE_PER_MINUTE = 900;
let home: string;
let cluster: Cluster;
const clients: Client[] = [];
const leftovers: number[] = [];

async function client(gateway: number): Promise<Client> {
  const c = await connectMcp(cluster.gateways[gateway]!.url!, cluster.info.token);
  clients.push(c);
  return c;
}

/** Where the workers keep their workspaces: each a home of its own, as on separate hosts. */
const workerHomes = () => cluster.workers.map((w) => w.home);

/** A token of another principal, made in the cluster's store as `dossier token create` would. */
async function tokenFor(principal: string, team = 'local'): Promise<string> {
  const store = await openStore(cluster.info.store);
  try {
    return await store.tokens.create({ principal, team, role: 'operator' });
  } finally {
    await store.close();
  }
}

/** An agent whose client can show its human the approval form; it approves, and counts the questions. */
function approvingAgent(asked: string[]): Client {
  const agent = new Client({ name: 'agent', version: '1' }, { capabilities: { elicitation: { form: {} } } });
  agent.setRequestHandler(ElicitRequestSchema, async (request) => {
    asked.push((request.params as { message: string }).message);
    return { action: 'accept' as const, content: { approve: true } };
  });
  clients.push(agent);
  return agent;
}

/** The parent of a process, from /proc. */
function parentOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return undefined;
  }
}

beforeAll(async () => {
  home = mkdtempSync(path.join(os.tmpdir(), 'dossier-cluster-'));
  const frontend = await freeLowPorts(
    Object.values(serverPorts(10_000))
      .flat()
      .map((p) => p - 10_000),
  );
  const gateways = await freeLowPorts([0, 1]);
  cluster = await startCluster(
    {
      DOSSIER_HOME: home,
      DOSSIER_NAMESPACE: `c${randomUUID().slice(0, 8)}`,
      DOSSIER_TEMPORAL_PORT: String(frontend),
      DOSSIER_PORT: String(gateways),
      DOSSIER_UI_PORT: String(await freePort()),
      DOSSIER_TEMPORAL_UI_SERVER: inject('uiServer'),
      DOSSIER_METRICS_TOKEN: METRICS_TOKEN,
      DOSSIER_SHUTDOWN_GRACE_MS: '1500',
      DOSSIER_WORKER_CONCURRENCY: '32',
      DOSSIER_RATE_LIMIT_PER_MINUTE: String(RATE_PER_MINUTE),
    },
    {
      postgresUrl: inject('postgresUrl'),
      gateways: 2,
      workers: 3,
      separateHomes: true,
      log: () => undefined,
    },
  );
}, 300_000);

afterAll(async () => {
  for (const pid of leftovers) signalGroup(pid, 'SIGKILL');
  await Promise.allSettled(clients.splice(0).map((c) => c.close()));
  await cluster?.stop();
  rmSync(home, { recursive: true, force: true });
}, 120_000);

describe('the process cluster on a real Temporal server and PostgreSQL', () => {
  it('runs on the Temporal server it built, not the dev server, with the store on PostgreSQL', async () => {
    expect(cluster.info.store).toMatch(/^postgres:\/\//);
    const version = execFileSync(cluster.temporal.binary, ['--version']).toString();
    expect(version).toContain('1.29.1');
    // Its own Prometheus endpoint, with the PostgreSQL persistence it talks to.
    const metrics = await fetch(cluster.info.temporal_metrics_url).then((r) => r.text());
    expect(metrics).toMatch(/^persistence_requests\{.*\} \d+/m);
  });

  it('Temporal serves only holders of the cluster’s certificates: without one the SDK, a bare handshake on any port and the CLI are refused, and launches go on', async () => {
    const { temporal_address: address, temporal_tls: tls } = cluster.info;
    expect(await temporalAnswer(address)).not.toBe('served'); // plain TCP, as anyone could before
    const [host, port] = [address.slice(0, address.lastIndexOf(':')), Number(address.split(':').pop())];
    const trust = { serverRootCACertificate: readFileSync(tls.ca), serverNameOverride: tls.server_name };
    const pair = (set: { cert: string; key: string }) => ({
      clientCertPair: { crt: readFileSync(set.cert), key: readFileSync(set.key) },
    });
    // The members' certificate is served: the refusals below are the certificate's doing, not the address's.
    expect(await temporalAnswer(address, { ...trust, ...pair(tls) })).toBe('served');
    expect(await temporalAnswer(address, trust)).not.toBe('served'); // TLS, no certificate
    const foreign = await ensureTemporalCerts(path.join(home, 'another-ca'));
    expect(await temporalAnswer(address, { ...trust, ...pair(foreign.sets.client) })).not.toBe('served');
    // Every listener that takes calls (the frontend, its HTTP API, history, matching) ends a handshake
    // without one; the worker service has none (its port is only reserved).
    const ports = serverPorts(port);
    for (const p of [ports.frontend, ports.frontendHttp, ports.history, ports.matching]) {
      const knock = (cert?: { cert: string; key: string }) =>
        bareHandshake(
          { host, port: p, ca: trust.serverRootCACertificate, servername: tls.server_name },
          cert,
        );
      expect(await knock()).toMatch(/^refused/);
      expect(await knock(tls)).toBe('served');
    }

    // The Temporal CLI, as any local user would run it, cannot stop a team's running launch.
    const c = await client(0);
    const effect = effectCounter(workerHomes());
    const args = { ...slowEffect(effect, 3), idempotency_key: 'cli-terminate' };
    const running = await call(c, 'capture_process_scenario', { ...args, wait_ms: 300 });
    expect(running.status).toBe('running');
    const terminate = spawnSync(
      inject('temporalCli'),
      ['workflow', 'terminate', '--address', address, '--namespace', cluster.info.namespace].concat([
        '--workflow-id',
        running.launch.workflow_id,
        '--reason',
        'not yours',
        '--command-timeout',
        '5s',
      ]),
      { encoding: 'utf8', env: { PATH: process.env.PATH, HOME: home }, timeout: 30_000 },
    );
    expect(terminate.status, terminate.stdout).not.toBe(0);
    const outcome = await call(c, 'await_launch', { idempotency_key: 'cli-terminate', wait_ms: 60_000 });
    expect(outcome.status).toBe('succeeded');
    expect(effect.count()).toBe(1);
  }, 120_000);

  it('the UI server’s private port, reached directly, reads but cannot write: its way to Temporal passes reads only', async () => {
    // What any local user can do: find the UI server's loopback port and skip the guard in front of it.
    const settings = readFileSync(path.join(home, 'cluster', 'ui', 'config', 'dossier.yaml'), 'utf8');
    const api = `http://127.0.0.1:${/^port: (\d+)$/m.exec(settings)![1]}/api/v1`;
    const inner = `${api}/namespaces/${cluster.info.namespace}`;
    const c = await client(0);
    const effect = effectCounter(workerHomes());
    const args = { ...slowEffect(effect, 4), idempotency_key: 'ui-batch-terminate' };
    const running = await call(c, 'capture_process_scenario', { ...args, wait_ms: 300 });
    const query = `WorkflowId = '${running.launch.workflow_id}'`;
    const listed = await fetch(`${inner}/workflows?query=${encodeURIComponent(query)}`);
    expect(await listed.text()).toContain(running.launch.workflow_id);
    // The UI server's own write switch lets a batch terminate through when its path holds an encoded slash.
    const reply = await fetch(`${api}/settings`);
    const csrf = /_csrf=([^;]+)/.exec(reply.headers.get('set-cookie') ?? '')?.[1] ?? '';
    const batch = await fetch(`${inner}/batch-operations/x%2Fworkflows%2Fy%2Fquery%2Fz`, {
      method: 'POST',
      headers: { cookie: `_csrf=${csrf}`, 'x-csrf-token': csrf, 'content-type': 'application/json' },
      body: JSON.stringify({ visibilityQuery: query, reason: 'not yours', terminationOperation: {} }),
    });
    expect(batch.status, await batch.text()).toBe(403);
    const outcome = await call(c, 'await_launch', { idempotency_key: 'ui-batch-terminate', wait_ms: 60_000 });
    expect(outcome.status).toBe('succeeded');
  }, 120_000);

  it('a 64-client storm of identical calls spread over both gateways: one effect, one launch, 63 attached', async () => {
    const effect = effectCounter(workerHomes());
    const args = { ...effect.launch(), idempotency_key: 'storm-64' };
    const callers = await Promise.all(Array.from({ length: 64 }, (_, i) => client(i % 2)));
    const replies = await Promise.all(callers.map((c) => call(c, 'capture_process_scenario', args)));
    expect(replies.map((r) => r.status)).toEqual(Array(64).fill('succeeded'));
    expect(new Set(replies.map((r) => r.evidence_id)).size).toBe(1);
    expect(new Set(replies.map((r) => r.launch.run_id)).size).toBe(1);
    expect(replies.filter((r) => r.launch.attached === false)).toHaveLength(1);
    expect(effect.count()).toBe(1);
    await Promise.allSettled(callers.map((c) => c.close()));
  });

  it('a worker process killed mid-launch: that launch ends interrupted and never re-runs; others go on', async () => {
    const c = await client(0);
    const effect = effectCounter(workerHomes());
    const args = { ...slowEffect(effect, 120), idempotency_key: 'worker-killed', wait_ms: 0 };
    await call(c, 'capture_process_scenario', args);
    const target = await eventually('the target to start', () => processesRunning(effect.marker)[0] ?? 0);
    leftovers.push(target);
    // The worker that supervises it: the member whose pid is among the target's ancestors.
    const ancestors = new Set<number>();
    for (let p: number | undefined = target; p && p > 1; p = parentOf(p)) ancestors.add(p);
    const victim = cluster.workers.find((w) => ancestors.has(w.process.pid!));
    expect(victim).toBeDefined();

    await victim!.kill('SIGKILL'); // restarted by the cluster a second later, like a container
    await eventually('the target to end with its worker', () => processesRunning(effect.marker).length === 0);
    // The other workers serve new launches at once.
    const other = await call(c, 'capture_process_scenario', {
      executable: '/usr/bin/true',
      idempotency_key: 'while-a-worker-is-down',
    });
    expect(other.status).toBe('succeeded');
    const outcome = await call(c, 'await_launch', { idempotency_key: 'worker-killed', wait_ms: 90_000 });
    expect(outcome.status).toBe('interrupted');
    expect(outcome.error.code).toBe('interrupted');
    const retry = await call(await client(1), 'capture_process_scenario', { ...args, wait_ms: 1_000 });
    expect(retry).toMatchObject({ status: 'interrupted', launch: { attached: true } });
    expect(effect.count()).toBe(1);
    // A member's process is replaced only once the restarted one is ready.
    await eventually(
      'the cluster to restart the killed worker',
      () => victim!.process.child.exitCode === null && victim!.process.child.signalCode === null,
      60_000,
    );
  }, 180_000);

  it('the Temporal server killed and restarted mid-wait: the outcome is not lost, the retry attaches', async () => {
    const c = await client(1);
    const effect = effectCounter(workerHomes());
    const args = { ...slowEffect(effect, 4), idempotency_key: 'temporal-restart' };
    const waiting = call(c, 'capture_process_scenario', { ...args, wait_ms: 30_000 }).catch(
      (err: Error) => err,
    );
    await eventually('the effect to begin', () => effect.count() === 1);
    await cluster.restartTemporal({ downMs: 1_000 });
    const first = await waiting;
    // The wait may end in the outcome or in an error while Temporal was away; either way nothing is lost.
    if (!(first instanceof Error) && first.status !== 'running') expect(first.status).toBe('succeeded');
    const retry = await call(c, 'capture_process_scenario', { ...args, wait_ms: 60_000 });
    expect(retry).toMatchObject({ status: 'succeeded', launch: { attached: true } });
    expect(retry.summary.exit_code).toBe(0);
    expect(effect.count()).toBe(1);
  }, 180_000);

  it('a gateway replica killed: its client continues on the other replica with the same key and launch', async () => {
    const effect = effectCounter(workerHomes());
    const args = { ...slowEffect(effect, 3), idempotency_key: 'gateway-killed' };
    const before = await call(await client(0), 'capture_process_scenario', { ...args, wait_ms: 300 });
    expect(before.status).toBe('running');
    await cluster.gateways[0]!.kill('SIGKILL', { restart: false });
    try {
      const retry = await call(await client(1), 'capture_process_scenario', { ...args, wait_ms: 30_000 });
      expect(retry).toMatchObject({
        status: 'succeeded',
        launch: { attached: true, run_id: before.launch.run_id },
      });
      expect(effect.count()).toBe(1);
    } finally {
      await cluster.gateways[0]!.start();
    }
  }, 120_000);

  it('a session opened on gateway 1 continues on gateway 2 when gateway 1 dies, its human still reachable', async () => {
    const auth = { requestInit: { headers: { Authorization: `Bearer ${cluster.info.token}` } } };
    const asked: string[] = [];
    const first = approvingAgent(asked);
    const toFirst = new StreamableHTTPClientTransport(new URL(cluster.gateways[0]!.url!), auth);
    await first.connect(toFirst);
    const sessionId = toFirst.sessionId!;
    expect((await call(first, 'whoami')).principal).toBe('local');
    await cluster.gateways[0]!.kill('SIGKILL', { restart: false });
    try {
      // What a load balancer does when a replica goes: the same session, now sent to the other one.
      const second = approvingAgent(asked);
      await second.connect(
        new StreamableHTTPClientTransport(new URL(cluster.gateways[1]!.url!), { ...auth, sessionId }),
      );
      const reply = await call(second, 'capture_process_scenario', {
        executable: '/usr/bin/true',
        idempotency_key: 'resumed-session',
      });
      expect(reply.status).toBe('succeeded');
      // The approval form reached the human through the resumed session: its capabilities came with it.
      expect(asked).toHaveLength(1);
      expect(asked[0]).toContain('/usr/bin/true');
      // A session id is no key to another principal's session.
      const stranger = await connectMcp(cluster.gateways[1]!.url!, await tokenFor('stranger'));
      clients.push(stranger);
      const hijack = new Client({ name: 'hijack', version: '1' });
      await hijack.connect(
        new StreamableHTTPClientTransport(new URL(cluster.gateways[1]!.url!), {
          requestInit: { headers: { Authorization: `Bearer ${await tokenFor('stranger')}` } },
          sessionId,
        }),
      );
      await expect(call(hijack, 'whoami')).rejects.toThrow(/Session not found|404/);
    } finally {
      await cluster.gateways[0]!.start();
    }
  }, 120_000);

  it('the stateless era needs no replica of its own: a request, its input_required retry, a task and its answer each land on the other gateway', async () => {
    const [a, b] = [cluster.gateways[0]!.url!, cluster.gateways[1]!.url!];
    const token = cluster.info.token;
    const approver = { elicitation: { form: {} } };
    const withTasks = { ...approver, extensions: { [TASKS]: {} } };
    const approve = { approval: { action: 'accept', content: { approve: true } } };
    const effect = effectCounter(workerHomes());
    const args = (key: string) => ({
      name: 'capture_process_scenario',
      arguments: { ...slowEffect(effect, 2), idempotency_key: key, wait_ms: 100 },
    });
    const untilDone = (url: string, taskId: string) =>
      eventually(
        'the task to end',
        async () => {
          const got = await modernRequest(url, token, 'tasks/get', { taskId }, { capabilities: withTasks });
          return ['working', 'input_required'].includes(got.body.result!.status)
            ? undefined
            : got.body.result!;
        },
        60_000,
      );

    // input_required from the first gateway; the answer, with the state it sealed, to the second.
    const asked = await modernRequest(a, token, 'tools/call', args('modern-replicas'), {
      capabilities: approver,
    });
    expect(asked.body.result).toMatchObject({ resultType: 'input_required' });
    const created = await modernRequest(
      b,
      token,
      'tools/call',
      { ...args('modern-replicas'), inputResponses: approve, requestState: asked.body.result!.requestState },
      { capabilities: withTasks },
    );
    expect(created.body.result).toMatchObject({ resultType: 'task', status: 'working' });
    // And the task is followed on the first.
    const done = await untilDone(a, created.body.result!.taskId as string);
    expect(done!.status).toBe('completed');
    expect(done!.result.structuredContent).toMatchObject({ status: 'succeeded' });

    // A task that asks, made on the second gateway, answered on the first, followed on the second.
    const question = await modernRequest(b, token, 'tools/call', args('modern-replicas-2'), {
      capabilities: withTasks,
    });
    expect(question.body.result).toMatchObject({ resultType: 'task', status: 'input_required' });
    const taskId = question.body.result!.taskId as string;
    const answered = await modernRequest(
      a,
      token,
      'tasks/update',
      { taskId, inputResponses: approve },
      { capabilities: withTasks },
    );
    expect(answered.body.result).toMatchObject({ resultType: 'complete' });
    const ran = await untilDone(b, taskId);
    expect(ran!.result.structuredContent).toMatchObject({ status: 'succeeded' });
    expect(effect.count()).toBe(2);
  }, 180_000);

  it('a principal’s session cap holds across both gateways: the least recently used session goes', async () => {
    const token = await tokenFor('many-sessions');
    const opened: Client[] = [];
    for (let i = 0; i < 65; i++) {
      const c = await connectMcp(cluster.gateways[i % 2]!.url!, token);
      clients.push(c);
      opened.push(c);
    }
    // The cap is 64 (DOSSIER_MAX_SESSIONS_PER_PRINCIPAL's default), counted over both gateways: the
    // 65th session closed the first, the 66th the second, wherever each was opened.
    const c66 = await connectMcp(cluster.gateways[1]!.url!, token);
    clients.push(c66);
    await expect(call(opened[0]!, 'whoami')).rejects.toThrow(/Session not found|404/);
    await expect(call(opened[1]!, 'whoami')).rejects.toThrow(/Session not found|404/);
    const replies = await Promise.all([...opened.slice(2), c66].map((c) => call(c, 'whoami')));
    expect(replies.every((r) => r.principal === 'many-sessions')).toBe(true);
  }, 120_000);

  it('a principal’s rate limit holds across both gateways, not once per replica', async () => {
    const token = await tokenFor('rate-limited');
    const started = Date.now();
    const callers = await Promise.all([0, 1, 0, 1].map((g) => connectMcp(cluster.gateways[g]!.url!, token)));
    clients.push(...callers);
    const perCaller = 400;
    const outcomes = await Promise.all(
      callers.map(async (c) => {
        let allowed = 0;
        for (let i = 0; i < perCaller; i++) {
          const reply = await call(c, 'whoami');
          if (reply.principal === 'rate-limited') allowed++;
          else expect(reply.error.code).toBe('resource_constraint');
        }
        return allowed;
      }),
    );
    const seconds = (Date.now() - started) / 1000;
    const allowed = outcomes.reduce((n, a) => n + a, 0) + callers.length; // the initializes count too
    // A burst of 900, refilled at 15/s while the test ran; each replica may run ahead by under one lease.
    const ceiling =
      RATE_PER_MINUTE + Math.ceil((seconds * RATE_PER_MINUTE) / 60) + 2 * leaseSize(RATE_PER_MINUTE);
    expect(allowed).toBeGreaterThanOrEqual(RATE_PER_MINUTE - 10);
    expect(allowed).toBeLessThanOrEqual(ceiling);
    // A limit per replica would have let every one of the 1,604 requests through.
    expect(allowed).toBeLessThan(callers.length * (perCaller + 1));
  }, 120_000);

  it('an artifact registered through gateway 1 reaches a worker on another home through the store, and pages through gateway 2', async () => {
    const homes = [...cluster.gateways, ...cluster.workers].map((m) => m.home);
    expect(new Set(homes).size).toBe(5); // nothing shared by folder
    const inbox = path.join(home, 'inbox', 'local');
    mkdirSync(path.join(inbox, 'tree'), { recursive: true });
    for (let i = 0; i < 300; i++) writeFileSync(path.join(inbox, 'tree', `f${i}.txt`), `file ${i}\n`);
    execFileSync('tar', ['-czf', path.join(inbox, 'tree.tar.gz'), '-C', inbox, 'tree']);
    const extracted = await registerAndExtract(await client(0), path.join(inbox, 'tree.tar.gz'), 'tree-1');
    expect(extracted.status).toBe('succeeded');
    const rows = await allRows(await client(1), extracted.evidence_id);
    expect(rows.filter((r) => r.type === 'file')).toHaveLength(300);
    // Stored by gateway 1, fetched (and proven against its digest) by the worker that extracted it.
    const digest = `sha256:${createHash('sha256')
      .update(readFileSync(path.join(inbox, 'tree.tar.gz')))
      .digest('hex')}`;
    const holders = homes.filter((h) => existsSync(artifactPath(h, digest)));
    expect(holders).toContain(cluster.gateways[0]!.home);
    expect(holders.some((h) => cluster.workers.some((w) => w.home === h))).toBe(true);

    // An extracted file registered through gateway 2, whose host never had the extraction's output:
    // the worker published what it wrote, for this team.
    const entry = await call(await client(1), 'register_artifact', {
      evidence_id: extracted.evidence_id,
      entry: 'tree/f7.txt',
    });
    expect(entry.error).toBeUndefined();
    expect(entry.artifact.digest).toBe(`sha256:${createHash('sha256').update('file 7\n').digest('hex')}`);
    expect(existsSync(artifactPath(cluster.gateways[1]!.home, entry.artifact.digest))).toBe(true);
  });

  it('a bundle exported on a worker’s host is listed, served and imported through both gateways', async () => {
    const launch = await call(await client(0), 'get_launch', { idempotency_key: 'tree-1' });
    const exported = await call(await client(0), 'export_evidence_bundle', {
      evidence_ids: [launch.evidence_id],
      idempotency_key: 'bundle-1',
    });
    expect(exported.status).toBe('succeeded');
    const reported = exported.summary.path as string;
    const name = path.basename(reported);
    // Written on a worker's host, not on either gateway's.
    expect(cluster.workers.some((w) => reported.startsWith(w.home))).toBe(true);
    const auth = { Authorization: `Bearer ${cluster.info.token}` };
    const base = (i: number) => cluster.gateways[i]!.url!.replace(/\/mcp$/, '');
    const listed = (await fetch(`${base(1)}/bundles`, { headers: auth }).then((r) => r.json())) as {
      bundles: { name: string; bytes: number }[];
    };
    expect(listed.bundles.map((b) => b.name)).toContain(name);
    const body = Buffer.from(
      await (await fetch(`${base(1)}/bundles/${name}`, { headers: auth })).arrayBuffer(),
    );
    expect(`sha256:${createHash('sha256').update(body).digest('hex')}`).toBe(
      `sha256:${exported.summary.sha256}`,
    );
    // The path the export reported is the worker's; importing it through a gateway finds it by name.
    const imported = await call(await client(0), 'import_evidence_bundle', { path: reported });
    expect(imported.error).toBeUndefined();
    expect(imported.already_present).toBe(1);
    // Another team cannot reach it by name.
    const stranger = await connectMcp(cluster.gateways[1]!.url!, await tokenFor('outsider', 'elsewhere'));
    clients.push(stranger);
    const refused = await call(stranger, 'import_evidence_bundle', { path: reported });
    expect(refused.error.code).toBe('not_found');
  });

  it('an analysis database built on a worker’s host is read by a gateway on another, through the store', async () => {
    const inbox = path.join(home, 'inbox', 'local');
    const source = path.join(home, 'probe.c');
    writeFileSync(
      source,
      '__attribute__((noipa)) int probe_feature(int x) { return x * 7; }\nint main(int c, char **v) { return probe_feature(c); }\n',
    );
    execFileSync('gcc', ['-O0', '-o', path.join(inbox, 'probe'), source]);
    const registered = await call(await client(0), 'register_artifact', { path: path.join(inbox, 'probe') });
    const artifact = registered.artifact.digest as string;
    const functions = await call(await client(0), 'list_functions', {
      artifact,
      detail: 'summary',
      wait_ms: 100_000,
    });
    expect(functions.status).toBe('succeeded');
    // Completion of procedure names reads the database on the gateway's own host.
    const agent = await client(1);
    const completed = await agent.complete({
      ref: { type: 'ref/prompt', name: 'investigate_feature' },
      argument: { name: 'procedure', value: 'probe' },
      context: { arguments: { artifact } },
    });
    expect(completed.completion.values).toEqual(['probe_feature']);
    const fetched = readdirSync(path.join(cluster.gateways[1]!.home, 'analysis', 'sha256'), {
      recursive: true,
    }).filter((f) => String(f).endsWith('.sqlite'));
    expect(fetched).toHaveLength(1);
  }, 180_000);

  it('/metrics on each gateway counts the launches it answered', async () => {
    const scrape = (i: number) =>
      fetch(cluster.gateways[i]!.url!.replace(/\/mcp$/, '/metrics'), {
        headers: { Authorization: `Bearer ${METRICS_TOKEN}` },
      }).then((r) => r.text());
    const texts = await Promise.all([scrape(0), scrape(1)]);
    const attached = texts.map((t) =>
      Number(
        t.match(
          /^dossier_launch_calls_total\{tool="capture_process_scenario",kind="attached"\} (\d+)/m,
        )?.[1] ?? 0,
      ),
    );
    // Gateway 1 was restarted above; gateway 2 still counts its 32 storm replies (at most one of them new).
    expect(attached[1]).toBeGreaterThanOrEqual(31);
  });

  it('a gateway that cannot start again at once (its port still held) keeps trying, and comes back', async () => {
    const gateway = cluster.gateways[1]!;
    const url = new URL(gateway.url!);
    await gateway.kill('SIGKILL'); // the cluster restarts it a second later…
    // Clients of earlier tests reconnect their event streams here meanwhile: hang up on them.
    const squatter = net.createServer((socket) => socket.destroy());
    await new Promise<void>((resolve) => squatter.listen(Number(url.port), url.hostname, resolve));
    await new Promise((r) => setTimeout(r, 3_000)); // …and that start fails on the held port
    await new Promise((resolve) => squatter.close(resolve));
    await eventually(
      'the gateway to answer again',
      () =>
        fetch(new URL('/healthz', url))
          .then((r) => r.ok)
          .catch(() => false),
      60_000,
    );
    expect((await call(await client(1), 'whoami')).principal).toBe('local');
  }, 120_000);
});
