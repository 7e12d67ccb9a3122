// Surface figures (issue 31): what an agent's context pays. tools/list for the
// default session and for every toolset, in both protocol eras, as the
// JSON-RPC response on the wire; and the first reply of every tool that
// returns Evidence, as the whole tools/call result on the wire (text and
// structured content together), on a small binary and a larger one. Tokens
// are estimated as bytes / 4. Only MCP requests over HTTP, so the same file
// measures an older checkout (`node --import tsx bench/surface.ts [binary…]`).
import { execFileSync } from 'node:child_process';
import { statSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { DEVICE_HOME, DEVICE_USER, startSshd } from '../tests/helpers/sshd.ts';
import { benchDir, benchStack } from './lib.ts';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const HANDSHAKE = '2025-11-25';
const STATELESS = '2026-07-28';

/** The JSON-RPC response of one POST (JSON or an SSE stream), with its size as sent. */
async function post(url: string, headers: Record<string, string>, message: Json) {
  const res = await fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...headers,
    },
    body: JSON.stringify(message),
  });
  const text = await res.text();
  const lines = (res.headers.get('content-type') ?? '').includes('text/event-stream')
    ? text
        .split(/\r?\n/)
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).trim())
    : [text];
  const raw = lines.find((l) => l && (JSON.parse(l) as Json).id === message.id) ?? '';
  return { res, raw, reply: (raw ? JSON.parse(raw) : {}) as Json };
}

let nextId = 1;

/** A handshake-era session (2025-11-25), raw: what each reply takes on the wire. */
async function handshake(url: string, token: string) {
  const auth = { authorization: `Bearer ${token}` };
  const init = await post(url, auth, {
    jsonrpc: '2.0',
    id: nextId++,
    method: 'initialize',
    params: { protocolVersion: HANDSHAKE, capabilities: {}, clientInfo: { name: 'bench', version: '1' } },
  });
  const session = init.res.headers.get('mcp-session-id')!;
  const headers = { ...auth, 'mcp-session-id': session, 'mcp-protocol-version': HANDSHAKE };
  await post(url, headers, { jsonrpc: '2.0', method: 'notifications/initialized' });
  return (method: string, params: Json = {}) =>
    post(url, headers, { jsonrpc: '2.0', id: nextId++, method, params });
}

/** One stateless-era request (2026-07-28), raw. */
function stateless(url: string, token: string) {
  return (method: string, params: Json = {}) =>
    post(
      url,
      {
        authorization: `Bearer ${token}`,
        'mcp-protocol-version': STATELESS,
        'mcp-method': method,
        ...(method === 'tools/call' ? { 'mcp-name': params.name as string } : {}),
      },
      {
        jsonrpc: '2.0',
        id: nextId++,
        method,
        params: {
          ...params,
          _meta: {
            'io.modelcontextprotocol/protocolVersion': STATELESS,
            'io.modelcontextprotocol/clientCapabilities': {},
            'io.modelcontextprotocol/clientInfo': { name: 'bench', version: '1' },
          },
        },
      },
    );
}

const kb = (n: number) => `${n.toLocaleString('en-US')} B`;
const tokens = (n: number) => `~${Math.round(n / 4).toLocaleString('en-US')}`;
const bytes = (v: unknown) => Buffer.byteLength(JSON.stringify(v));

/** `binaries`: the small one first (run without arguments), then larger ones (run with --help). */
export async function benchSurface(binaries = ['/usr/bin/true', '/usr/bin/tar']): Promise<string[]> {
  const roots = benchDir('surface-roots');
  const small = binaries[0]!;
  for (const bin of binaries)
    execFileSync('tar', [
      'czf',
      path.join(roots, `${path.basename(bin)}.tar.gz`),
      '-C',
      '/usr/bin',
      path.basename(bin),
    ]);
  const stack = await benchStack({
    DOSSIER_RATE_LIMIT_PER_MINUTE: '1000000',
    DOSSIER_ALLOWED_ROOTS: `/usr/bin:/bin:${roots}`,
    DOSSIER_CAPTURE_APPROVAL: 'off',
  });
  const { mcp_url: url, token } = stack.devJson;
  const lines: string[] = [];
  try {
    // 1. tools/list.
    lines.push(
      '| tools/list | era | tools | bytes (JSON-RPC response) | est. tokens (bytes/4) |',
      '|---|---|---:|---:|---:|',
    );
    for (const [label, at] of [
      ['default session', url],
      ['every toolset (?toolsets=all)', `${url}?toolsets=all`],
    ] as const) {
      const eras = [
        ['2025-11-25 (handshake)', await handshake(at, token)],
        ['2026-07-28 (stateless)', stateless(at, token)],
      ] as const;
      for (const [era, ask] of eras) {
        const { raw, reply } = await ask('tools/list');
        const n = Buffer.byteLength(raw);
        lines.push(`| ${label} | ${era} | ${reply.result.tools.length} | ${kb(n)} | ${tokens(n)} |`);
      }
    }
    lines.push('');

    // 2. First replies of the tools that return Evidence.
    const ask = await handshake(`${url}?toolsets=all`, token);
    /** A call; one that waits is asked again (attaching) while it answers "running". */
    const call = async (name: string, args: Json, wait = false) => {
      for (;;) {
        const { raw, reply } = await ask('tools/call', {
          name,
          arguments: wait ? { wait_ms: 110_000, ...args } : args,
        });
        const result = reply.result as Json;
        if (!result) throw new Error(`${name}: ${raw}`);
        // An analysis building its database answers "running": its first reply with a result is the next.
        if (wait && result.structuredContent?.status === 'running') continue;
        return { result, wire: bytes(result) };
      }
    };
    const rows: [string, string, Json][] = [];
    const measure = async (binary: string, name: string, args: Json) => {
      const { result, wire } = await call(name, args, name !== 'get_launch');
      const s = result.structuredContent as Json;
      // What the wire would carry without the JSON's copy as text content (clients that read only text lose it).
      const bare = bytes({ ...result, content: [{ type: 'text', text: '' }] });
      // The same call asking for detail "complete" (a launch's retry with its key attaches; an analysis is answered again).
      const complete =
        name === 'get_launch' ? undefined : (await call(name, { ...args, detail: 'complete' }, true)).result;
      rows.push([binary, name, { wire, text: Buffer.byteLength(result.content[0].text), bare, s, complete }]);
      return s;
    };
    let sshd: Awaited<ReturnType<typeof startSshd>> | undefined;
    for (const binary of binaries) {
      const base = path.basename(binary);
      const reg = await call('register_artifact', { path: binary });
      const artifact = reg.result.structuredContent.artifact.digest as string;
      const inspected = await measure(binary, 'inspect_binary', { artifact });
      await measure(binary, 'find_strings', { artifact });
      const listed = await measure(binary, 'list_functions', { artifact });
      // A function to follow: the smallest that calls another, among the first page of non-PLT functions.
      const page = await call('inspect_analysis_view', {
        evidence_id: listed.evidence_id,
        view: { kind: 'page', collection: 'functions', where: { is_plt: [false] }, limit: 256 },
      });
      const fns = (page.result.structuredContent.rows as Json[]).map((r) => r.row);
      const fn = fns.filter((f) => f.callees > 0).sort((a, b) => a.size - b.size)[0]!.address as string;
      await measure(binary, 'get_call_graph', { artifact, function: fn });
      // A loaded host may need more than the decompiler's default 120 s on a larger binary.
      await measure(binary, 'decompile_function', { artifact, function: fn, timeout_s: 600 });
      await measure(binary, 'trace_feature', { artifact, query: 'Usage' });
      const key = (tool: string) => `bench-${tool}-${base}-${process.pid}`;
      const args = binary === small ? [] : ['--help'];
      await measure(binary, 'capture_process_scenario', {
        executable: binary,
        args,
        idempotency_key: key('capture'),
      });
      await measure(binary, 'get_launch', { idempotency_key: key('capture') });
      await measure(binary, 'observe_native_calls', {
        executable: binary,
        args,
        idempotency_key: key('observe'),
      });
      const archive = await call('register_artifact', { path: path.join(roots, `${base}.tar.gz`) });
      await measure(binary, 'extract_artifact', {
        artifact: archive.result.structuredContent.artifact.digest,
        idempotency_key: key('extract'),
      });
      await measure(binary, 'extract_firmware', { artifact, idempotency_key: key('firmware') });
      await measure(binary, 'export_evidence_bundle', {
        evidence_ids: [inspected.evidence_id],
        idempotency_key: key('export'),
      });
      if (process.getuid?.() !== 0) continue;
      sshd ??= await startSshd();
      const device = `bench-${process.pid}`;
      await call('register_device', {
        device_id: device,
        ssh: {
          host: '127.0.0.1',
          port: sshd.port,
          user: DEVICE_USER,
          host_key: sshd.hostKey,
          private_key: sshd.privateKey,
        },
      });
      await measure(binary, 'device_exec', { device, argv: [binary, ...args], idempotency_key: key('exec') });
      await measure(binary, 'device_pull', { device, path: binary, idempotency_key: key('pull') });
      await measure(binary, 'device_push', {
        device,
        artifact,
        path: `${DEVICE_HOME}/${base}-${process.pid}`,
        idempotency_key: key('push'),
      });
    }
    await sshd?.stop();
    const size = (b: string) => `${Math.round(statSync(b).size / 1024)} KiB`;
    lines.push(
      '| tool | binary | first reply on the wire | its text | its structured content | wire without the text copy | reply | detail "complete": structured |',
      '|---|---|---:|---:|---:|---:|---|---|',
    );
    const shape = (s: Json) =>
      s.error && s.status !== 'succeeded'
        ? `${s.status ?? 'refused'}: ${s.error.code}`
        : s.detail === 'summary' && s.continuation
          ? `summary + ${s.continuation.collection} page of ${s.continuation.limit}`
          : (s.detail ?? s.status);
    for (const [binary, name, r] of rows) {
      const c = r.complete as Json | undefined;
      const completeCell = c ? `${kb(bytes(c.structuredContent))} (${shape(c.structuredContent)})` : '—';
      lines.push(
        `| ${name} | ${path.basename(binary)} (${size(binary)}) | ${kb(r.wire)} | ${kb(r.text)} | ${kb(bytes(r.s))} | ${kb(r.bare)} | ${shape(r.s)} | ${completeCell} |`,
      );
    }
  } finally {
    await stack.stop();
  }
  return lines;
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  const asked = process.argv.slice(2);
  console.log((await benchSurface(asked.length ? asked : undefined)).join('\n'));
  process.exit(0);
}
