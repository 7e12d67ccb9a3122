// `dossier call` and `dossier launches`: the gateway from a terminal, as an MCP
// client over HTTP. The endpoint and token come from DOSSIER_URL and
// DOSSIER_TOKEN, or from the running embedded stack's dev.json.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { PRODUCT } from '../domain/product.ts';
import { createReadStream, existsSync, readFileSync, statSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { ConfigError, type Config } from '../config.ts';
import { clusterJsonPath, devJsonPath, type ClusterJson, type DevJson } from '../dev/devJson.ts';
import { liveStacks } from './stacks.ts';

type Reply = Record<string, unknown> & { status?: string; launch?: Record<string, unknown>; error?: unknown };

/** A line of progress that the next one replaces: on a terminal only (piped output stays clean JSON). */
function transient(line: string) {
  if (process.stderr.isTTY) process.stderr.write(`\r${line}\x1b[K`);
}

/** Clears the transient progress line, if any was written. */
function settled() {
  if (process.stderr.isTTY) process.stderr.write('\r\x1b[K');
}

/**
 * The gateway's MCP endpoint and a token: DOSSIER_URL and DOSSIER_TOKEN, else
 * the embedded stack's dev.json, else the first gateway of `dossier cluster up`.
 */
function endpoint(config: Config): { url: string; token: string; from: string } {
  let url = process.env.DOSSIER_URL;
  let token = process.env.DOSSIER_TOKEN;
  let from = url ? 'DOSSIER_URL' : '';
  if ((!url || !token) && existsSync(devJsonPath(config))) {
    const dev = JSON.parse(readFileSync(devJsonPath(config), 'utf8')) as DevJson;
    from ||= devJsonPath(config);
    url ??= dev.mcp_url;
    token ??= dev.token;
  } else if ((!url || !token) && existsSync(clusterJsonPath(config))) {
    const cluster = JSON.parse(readFileSync(clusterJsonPath(config), 'utf8')) as ClusterJson;
    from ||= clusterJsonPath(config);
    url ??= cluster.mcp_urls[0];
    token ??= cluster.token;
  }
  if (!url || !token) {
    // Stacks of this user that run elsewhere: say how to reach them rather than leave a guess.
    const elsewhere = liveStacks().map(
      (e) => `a stack runs with DOSSIER_HOME=${e.home} (started in ${e.cwd}): export DOSSIER_HOME=${e.home}`,
    );
    throw new ConfigError(
      [
        process.env.DOSSIER_HOME
          ? `DOSSIER_HOME=${config.home} holds no dev.json or cluster.json`
          : `no stack was found for ${process.cwd()}: none runs that was started from it or a folder above it, nor is there a .dossier/ with connection details`,
        ...elsewhere,
        `set DOSSIER_URL and DOSSIER_TOKEN, or run \`npm start\` (or \`dossier cluster up\`) with this DOSSIER_HOME`,
      ],
      'No gateway to talk to',
    );
  }
  return { url, token, from };
}

async function connect(config: Config): Promise<Client> {
  const { url, token, from } = endpoint(config);
  const client = new Client({ name: `${PRODUCT.name}-cli`, version: PRODUCT.version });
  try {
    await client.connect(
      new StreamableHTTPClientTransport(new URL(url), {
        requestInit: { headers: { Authorization: `Bearer ${token}` } },
      }),
    );
  } catch (err) {
    const status = (err as { code?: unknown }).code;
    if (status === 401 || status === 403)
      throw new ConfigError(
        [
          `${url} (from ${from}) refused the token: revoked, mistyped, or another gateway's. Use a live token of yours.`,
        ],
        'The gateway refused the token',
      );
    // Nothing listens there (a stack stopped since it wrote dev.json).
    throw new Unreachable(
      [
        `${url} (from ${from}) did not answer: ${(err as Error).message}. Is \`npm start\` running with this DOSSIER_HOME? Otherwise set DOSSIER_URL and DOSSIER_TOKEN.`,
      ],
      'Cannot reach the gateway',
    );
  }
  return client;
}

/**
 * Ends the CLI's MCP session on the gateway (DELETE), then its connection: a run leaves no session
 * behind to crowd out those of the token's other clients (the gateway keeps 64 a principal).
 */
async function disconnect(client: Client | undefined) {
  if (!client) return;
  const transport = client.transport as StreamableHTTPClientTransport | undefined;
  if (transport?.sessionId) {
    const ended = transport.terminateSession().catch(() => undefined);
    await Promise.race([ended, new Promise((r) => setTimeout(r, 2_000).unref())]);
  }
  await client.close().catch(() => undefined);
}

/** No gateway answered where the CLI was told to look. */
class Unreachable extends ConfigError {}

async function callOnce(client: Client, name: string, args: Record<string, unknown>) {
  // A connection lost under the call (its reply stream dropped) ends it at once, not at the timeout.
  const lost = new AbortController();
  client.onerror = (err) => lost.abort(err);
  try {
    const result = await client.callTool({ name, arguments: args }, undefined, {
      timeout: 130_000,
      signal: lost.signal,
      onprogress: (p) => transient(`… ${(p.progress / 1000).toFixed(0)} s ${p.message ?? ''}`.slice(0, 200)),
    });
    settled();
    return { reply: (result.structuredContent ?? {}) as Reply, isError: result.isError === true };
  } finally {
    client.onerror = undefined;
  }
}

export async function callCommand(config: Config, argv: string[]) {
  const { values, positionals } = parseArgs({
    args: argv,
    options: {
      key: { type: 'string' },
      json: { type: 'string' },
      'wait-ms': { type: 'string' },
    },
    allowPositionals: true,
  });
  const usage = "usage: dossier call TOOL ['{…}' | --json '{…}'] [--key K] [--wait-ms N]";
  const [tool, inline, ...extra] = positionals;
  if (!tool) throw new ConfigError([usage], 'Invalid arguments');
  if (extra.length > 0)
    throw new ConfigError(
      [`unexpected ${extra.map((e) => JSON.stringify(e)).join(' ')}`, usage],
      'Invalid arguments',
    );
  if (inline !== undefined && values.json !== undefined)
    throw new ConfigError(
      ["the tool's arguments twice: give them as JSON after the tool's name or with --json, not both"],
      'Invalid arguments',
    );
  let parsed: unknown;
  try {
    parsed = JSON.parse(inline ?? values.json ?? '{}');
  } catch {
    parsed = undefined;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    throw new ConfigError(
      [`the tool's arguments must be a JSON object, e.g. '{"executable":"/usr/bin/true"}'`],
      'Invalid arguments',
    );
  const args = parsed as Record<string, unknown>;
  if (values.key) args.idempotency_key = values.key;
  if (values['wait-ms']) args.wait_ms = Number(values['wait-ms']);
  let client: Client | undefined = await connect(config);
  /**
   * Asks again when the gateway went away mid-call (a restart, a lost connection), on a new
   * connection: safe for what is asked here (a launch with its key attaches, a wait or an
   * analysis only reads). A refusal of the call itself is an answer, not a loss.
   */
  const ask = async (name: string, a: Record<string, unknown>, retry: boolean) => {
    for (let attempt = 1; ; attempt++) {
      try {
        client ??= await connect(config);
        return await callOnce(client, name, a);
      } catch (err) {
        if (!retry || attempt > RECONNECTS || !lostGateway(err)) throw err;
        settled();
        process.stderr.write(
          `dossier: the gateway went away (${(err as Error).message.replace(/\s*\n\s*(- )?/g, ' ').slice(0, 300)}); asking again (${attempt}/${RECONNECTS})…\n`,
        );
        await disconnect(client);
        client = undefined;
        await new Promise((r) => setTimeout(r, Math.min(1_000 * attempt, 5_000)));
      }
    }
  };
  // Ctrl-C leaves the launch running (only cancel_launch ends one) and the gateway without this
  // run's session.
  const interrupted = () => void disconnect(client).finally(() => process.exit(130));
  process.once('SIGINT', interrupted);
  try {
    let { reply, isError } = await ask(tool, args, typeof args.idempotency_key === 'string');
    // Whether this call started the launch is said by its first reply, not by the waits after it.
    const attached = (reply.launch as Reply | undefined)?.attached;
    // Still running: keep waiting, with progress, until it ends (a launch through await_launch,
    // an analysis by asking the same again, which attaches to it).
    while (reply.status === 'running' && (reply.launch || reply.analysis)) {
      if (reply.launch) {
        const launch = reply.launch as Reply;
        process.stderr.write(
          launch.phase === 'pending'
            ? `pending: ${String(reply.message)}\n`
            : `running: ${String(launch.ui_url)}\n`,
        );
        ({ reply, isError } = await ask(
          'await_launch',
          { idempotency_key: reply.launch.idempotency_key, wait_ms: 110_000 },
          true,
        ));
      } else {
        process.stderr.write(`running: ${String((reply.analysis as Reply).ui_url)}\n`);
        ({ reply, isError } = await ask(tool, { ...args, wait_ms: 110_000 }, true));
      }
    }
    if (attached !== undefined && reply.launch)
      reply = { ...reply, launch: { ...(reply.launch as Reply), attached } };
    console.log(JSON.stringify(reply, null, 2));
    // A launch that ended any other way than succeeded (failed, interrupted, cancelled) is a failure
    // to a script, whether or not the reply was an error.
    if (isError || UNSUCCESSFUL.includes(String(reply.status))) process.exitCode = 1;
  } finally {
    process.off('SIGINT', interrupted);
    await disconnect(client);
  }
}

/** The endings of a launch or analysis that `call` exits 1 for. */
const UNSUCCESSFUL = ['failed', 'interrupted', 'cancelled'];

/** How often `call` asks again after losing its gateway (about a minute in all). */
const RECONNECTS = 15;

/** The gateway went away (a refused connection, a dropped stream, a reply that never came), not a refusal. */
function lostGateway(err: unknown): boolean {
  if (err instanceof Unreachable) return true; // the reconnect itself failed: try again
  if (err instanceof ConfigError) return false;
  if (err instanceof McpError)
    return err.code === ErrorCode.RequestTimeout || err.code === ErrorCode.ConnectionClosed;
  const status = (err as { code?: unknown }).code;
  if (typeof status === 'number') return status >= 500; // an HTTP answer: only a server's failure
  return /fetch failed|ECONNREFUSED|ECONNRESET|EPIPE|socket|terminated|disconnected|aborted/i.test(
    String((err as Error)?.message ?? err),
  );
}

export async function launchesCommand(config: Config, argv: string[]) {
  const { values } = parseArgs({
    args: argv,
    options: {
      status: { type: 'string' },
      tool: { type: 'string' },
      limit: { type: 'string', default: '20' },
    },
  });
  const client = await connect(config);
  try {
    const args: Record<string, unknown> = { limit: Number(values.limit) };
    if (values.status) args.status = values.status;
    if (values.tool) args.tool = values.tool;
    const { reply, isError } = await callOnce(client, 'list_launches', args);
    if (isError) {
      console.error(JSON.stringify(reply.error, null, 2));
      process.exitCode = 1;
      return;
    }
    const rows = ((reply.launches ?? []) as Reply[]).map((l) => {
      const launch = l.launch as Record<string, string>;
      const ms = launch.finished_at
        ? Date.parse(launch.finished_at) - Date.parse(launch.started_at!)
        : undefined;
      return [
        launch.phase === 'pending' ? 'pending' : (l.status ?? ''),
        launch.tool,
        launch.principal,
        launch.idempotency_key,
        launch.started_at,
        ms === undefined ? '' : `${ms} ms`,
        launch.ui_url,
      ];
    });
    const header = ['STATUS', 'TOOL', 'PRINCIPAL', 'KEY', 'STARTED', 'TOOK', 'UI'];
    const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i]).length)));
    for (const r of [header, ...rows])
      console.log(
        r
          .map((c, i) => String(c).padEnd(widths[i]!))
          .join('  ')
          .trimEnd(),
      );
  } finally {
    await disconnect(client);
  }
}

/** `dossier upload FILE [--name N]`: streams a file to POST /artifacts and prints the artifact record. */
export async function uploadCommand(config: Config, argv: string[]) {
  const { values, positionals } = parseArgs({
    args: argv,
    options: { name: { type: 'string' } },
    allowPositionals: true,
  });
  const file = positionals[0];
  if (!file || positionals.length > 1)
    throw new ConfigError(['usage: dossier upload FILE [--name NAME]'], 'Invalid arguments');
  let size: number;
  try {
    const st = statSync(file);
    if (!st.isFile()) throw new Error('not a regular file');
    size = st.size;
  } catch (err) {
    throw new ConfigError([`${file}: ${(err as Error).message}`], 'Nothing to upload');
  }
  const { url, token, from } = endpoint(config);
  // Beside the MCP endpoint, under the same prefix (a gateway behind a proxy path keeps it).
  const target = new URL(url.replace(/\/mcp\/?$/, '').replace(/\/+$/, '') + '/artifacts');
  target.searchParams.set('name', values.name ?? path.basename(file));
  const { status, body } = await new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = (target.protocol === 'https:' ? https : http).request(
      target,
      {
        method: 'POST',
        agent: false, // one request: no kept-alive socket holds the process open after the reply
        headers: {
          Authorization: `Bearer ${token}`,
          'content-type': 'application/octet-stream',
          'content-length': String(size),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', (err) =>
      reject(
        new ConfigError(
          [
            `${target.origin} (from ${from}) did not answer: ${err.message}. Is \`npm start\` running with this DOSSIER_HOME? Otherwise set DOSSIER_URL and DOSSIER_TOKEN.`,
          ],
          'Cannot reach the gateway',
        ),
      ),
    );
    let sent = 0;
    const source = createReadStream(file);
    source.on('data', (c) => {
      sent += c.length;
      if (size > 8 * 1024 * 1024) transient(`… ${Math.floor((sent / size) * 100)}% of ${size} bytes`);
    });
    source.on('error', reject);
    source.pipe(req);
  });
  settled();
  let reply: unknown;
  try {
    reply = JSON.parse(body);
  } catch {
    reply = { error: body.slice(0, 1_000) };
  }
  console.log(JSON.stringify(reply, null, 2));
  if (status !== 201 && status !== 200) process.exitCode = 1;
}
