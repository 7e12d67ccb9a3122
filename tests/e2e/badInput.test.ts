// Bad input and ordinary sizes end in a clear answer, the same on SQLite and
// PostgreSQL (issue 13): NUL characters, huge offsets, archive members the
// parser skips or the filesystem cannot hold, and lists of large records.
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, freshStoreLocation } from '../helpers/backends.ts';
import { call, type Reply } from '../helpers/mcp.ts';
import { startTestStack, type TestStack } from '../helpers/stack.ts';
import { scratchDir } from '../helpers/scratch.ts';

const NO_DATABASE_TEXT = /byte sequence|syntax|SQLITE|relation|integer|violat|constraint failed/i;

describe.each(BACKENDS)('bad input on %s', (backend) => {
  const work = scratchDir(`bad-${backend}`);
  let t: TestStack;
  let client: Client;
  beforeAll(async () => {
    const env: Record<string, string> = { DOSSIER_ALLOWED_ROOTS: `/usr/bin:${work}` };
    if (backend === 'postgres') env.DOSSIER_STORE = (await freshStoreLocation('postgres')).location;
    t = await startTestStack({ env });
    client = await t.connect();
  });
  afterAll(async () => {
    await t?.stop(true);
  });

  it('a NUL anywhere but stdin is invalid_params before anything runs, with no database text', async () => {
    const nul = '\u0000';
    const cursor = Buffer.from(JSON.stringify([`2026${nul}`, 'ev_x'])).toString('base64url');
    const attempts: [string, Record<string, unknown>][] = [
      ['list_evidence', { cursor }],
      ['list_evidence', { tool: `capture${nul}` }],
      ['list_launches', { tool: `x${nul}` }],
      ['record_unknown', { question: `why${nul}`, scope: 'here' }],
      ['register_artifact', { path: `/usr/bin/true${nul}` }],
      [
        'capture_process_scenario',
        { executable: '/usr/bin/echo', args: [`a${nul}b`], idempotency_key: 'nul-arg' },
      ],
      [
        'capture_process_scenario',
        { executable: '/usr/bin/env', env: { A: `x${nul}` }, idempotency_key: 'nul-env' },
      ],
      ['capture_process_scenario', { executable: '/usr/bin/true', idempotency_key: `k${nul}` }],
    ];
    for (const [tool, args] of attempts) {
      const reply = await call(client, tool, args);
      expect(reply.error?.code, `${tool} ${JSON.stringify(args)}: ${JSON.stringify(reply)}`).toBe(
        'invalid_params',
      );
      expect(reply.error.message).not.toMatch(NO_DATABASE_TEXT);
    }
    // Nothing was launched.
    expect((await call(client, 'list_launches', {})).launches).toEqual([]);
    // stdin carries bytes for a program: a NUL there is fine.
    const cat = await call(client, 'capture_process_scenario', {
      executable: '/usr/bin/od',
      args: ['-c'],
      stdin: `a${nul}b`,
      idempotency_key: 'nul-stdin',
    });
    expect(cat.status, JSON.stringify(cat.error)).toBe('succeeded');
    expect(cat.summary.stdout_head).toContain('\\0');
    // A syscall filter asks for the trace it filters, without trace_syscalls too.
    const filtered = await call(client, 'capture_process_scenario', {
      executable: '/usr/bin/true',
      trace_filter: ['openat'],
      idempotency_key: 'filter-without-trace',
    });
    expect(filtered.status, JSON.stringify(filtered.error)).toBe('succeeded');
    const events = await call(client, 'inspect_analysis_view', {
      evidence_id: filtered.evidence_id,
      view: { kind: 'page', collection: 'events', offset: 0, limit: 64 },
    });
    expect(events.rows.length).toBeGreaterThan(0);
    expect(new Set(events.rows.map((r: Reply) => r.row.syscall))).toEqual(new Set(['openat']));
  });

  it('stdin up to its ceiling reaches the program through the default request size; past it, in bytes, is invalid_params', async () => {
    const max = 512 * 1024;
    const whole = await call(client, 'capture_process_scenario', {
      executable: '/usr/bin/wc',
      args: ['-c'],
      stdin: 'x'.repeat(max),
      idempotency_key: `stdin-ceiling-${backend}`,
    });
    expect(whole.status, JSON.stringify(whole.error)).toBe('succeeded');
    expect(whole.summary.stdout_head.trim()).toBe(String(max));
    // Counted in bytes of UTF-8, as the bound says: fewer characters than the ceiling, more bytes.
    const wide = await call(client, 'capture_process_scenario', {
      executable: '/usr/bin/wc',
      args: ['-c'],
      stdin: 'é'.repeat(max / 2 + 1),
      idempotency_key: `stdin-wide-${backend}`,
    });
    expect(wide.error).toMatchObject({
      code: 'invalid_params',
      message: expect.stringMatching(/stdin is at most 524288 bytes/),
    });
  });

  it('an argument a tool does not take is named, with the one it looks like', async () => {
    const reply = await call(client, 'get_device', { device_id: 'bench-1' });
    expect(reply.error).toMatchObject({ code: 'invalid_params' });
    expect(reply.error.message).toMatch(/did you mean "device_id" → "device"\?/);
    const typo = await call(client, 'list_evidence', { limt: 5 });
    expect(typo.error.message).toMatch(/"limt" → "limit"/);
    const unlike = await call(client, 'whoami', { zzz: 1 });
    expect(unlike.error.message).not.toMatch(/did you mean/);
  });

  it('pages past the end of a collection are empty, however far; offsets beyond the bound are invalid_params', async () => {
    const seq = await call(client, 'capture_process_scenario', {
      executable: '/usr/bin/seq',
      args: ['3'],
      idempotency_key: 'seq-offsets',
    });
    for (const where of [undefined, { line: [1] }, { line: [1, 2] }]) {
      const far = await call(client, 'inspect_analysis_view', {
        evidence_id: seq.evidence_id,
        view: {
          kind: 'page',
          collection: 'stdout',
          offset: 1_000_000_000,
          limit: 256,
          ...(where ? { where } : {}),
        },
      });
      expect(far.rows, JSON.stringify(far)).toEqual([]);
      expect(far.coverage.exhausted).toBe(true);
    }
    const beyond = await call(client, 'inspect_analysis_view', {
      evidence_id: seq.evidence_id,
      view: { kind: 'page', collection: 'stdout', offset: 2_147_483_647, limit: 256 },
    });
    expect(beyond.error.code).toBe('invalid_params');
  });

  it('every tar member is in the manifest or refused with a reason: types the parser skips, names Linux cannot hold', async () => {
    const archive = path.join(work, 'odd.tar');
    execFileSync('python3', [
      '-c',
      `
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w", format=tarfile.GNU_FORMAT) as tar:
    def add(name, data=b"", kind=tarfile.REGTYPE):
        info = tarfile.TarInfo(name); info.size = len(data); info.type = kind
        tar.addfile(info, io.BytesIO(data) if data else None)
    add("kept.txt", b"kept\\n")
    add("vendor-type", b"", b"Z")
    add("sparse-file", b"", tarfile.GNUTYPE_SPARSE)
    add("x" * 300, b"long\\n")
    add("dir/" + "y" * 256 + "/file", b"deep\\n")
    add("also-kept.txt", b"also\\n")
`,
      archive,
    ]);
    const registered = await call(client, 'register_artifact', { path: archive });
    const reply = await call(client, 'extract_artifact', {
      artifact: registered.artifact.digest,
      idempotency_key: 'odd-tar',
    });
    expect(reply.status, JSON.stringify(reply.error)).toBe('succeeded');
    const rows: Reply[] = (
      await call(client, 'inspect_analysis_view', {
        evidence_id: reply.evidence_id,
        view: { kind: 'page', collection: 'entries', offset: 0, limit: 64 },
      })
    ).rows.map((r: Reply) => r.row);
    const byName = new Map(rows.map((r) => [r.path, r]));
    expect(
      rows.map((r) => [r.name, r.status, r.reason]),
      'the manifest',
    ).toHaveLength(6);
    expect(byName.get('kept.txt')).toMatchObject({ status: 'written' });
    expect(byName.get('also-kept.txt')).toMatchObject({ status: 'written' });
    expect(byName.get('vendor-type')).toMatchObject({ status: 'refused' });
    expect(byName.get('vendor-type')!.reason).toMatch(/type flag tar does not define/);
    expect(byName.get('sparse-file')!.reason).toMatch(/tar type S \(SparseFile\)/);
    expect(byName.get('x'.repeat(300))).toMatchObject({
      status: 'refused',
      reason: 'a name component longer than 255 bytes',
    });
    expect(byName.get(`dir/${'y'.repeat(256)}/file`)).toMatchObject({ status: 'refused' });
    expect(rows).toHaveLength(6);
  });

  it('lists page by bytes: list_evidence, list_launches and resources/list never fail for large records, and reach every one', async () => {
    const big = 'z'.repeat(3_000);
    for (let i = 0; i < 30; i++) {
      const r = await call(client, 'capture_process_scenario', {
        executable: '/usr/bin/echo',
        args: [`${big}-${i}`],
        investigation: 'large-records',
        idempotency_key: `large-${i}`,
      });
      expect(r.status).toBe('succeeded');
    }
    for (const [tool, field] of [
      ['list_evidence', 'evidence'],
      ['list_launches', 'launches'],
    ] as const) {
      const seen = new Set<string>();
      let pages = 0;
      for (let cursor: string | undefined; ; pages++) {
        const page = await call(client, tool, {
          ...(tool === 'list_evidence'
            ? { investigation: 'large-records' }
            : { tool: 'capture_process_scenario' }),
          limit: 200,
          ...(cursor ? { cursor } : {}),
        });
        expect(page.error, JSON.stringify(page.error)).toBeUndefined();
        for (const item of page[field]) {
          if (tool === 'list_evidence') seen.add(item.evidence_id);
          else if (item.launch.idempotency_key.startsWith('large-')) seen.add(item.launch.idempotency_key);
        }
        if (!page.next_cursor) break;
        cursor = page.next_cursor;
      }
      expect(seen.size).toBe(30);
      if (tool === 'list_evidence') expect(pages).toBeGreaterThan(0); // it took more than one reply
    }
    const uris = new Set<string>();
    for (let cursor: string | undefined; ;) {
      const { resources, nextCursor } = await client.listResources(cursor ? { cursor } : {});
      for (const r of resources) uris.add(r.uri);
      if (!nextCursor) break;
      cursor = nextCursor;
    }
    expect(uris.size).toBeGreaterThanOrEqual(30);
    const { resourceTemplates } = await client.listResourceTemplates();
    expect(resourceTemplates.map((r) => r.uriTemplate)).toEqual(['dossier://evidence/{evidence_id}']);
  });
});

describe('a worker and a gateway on one event loop', () => {
  it('retains a capture at the row bound without stalling another team, and says what it kept', async () => {
    const t = await startTestStack({ env: { DOSSIER_MAX_COLLECTION_ROWS: '200000' } });
    try {
      const flooder = await t.connect();
      const other = await t.connect(await t.tokenFor('quiet', 'another-team', 'viewer'));
      const before: number[] = [];
      for (let i = 0; i < 10; i++) {
        const t0 = performance.now();
        await call(other, 'whoami');
        before.push(performance.now() - t0);
      }
      // 16 MiB of newlines (the max_output_bytes ceiling): 16.7 M lines, kept as 200,000 rows.
      const flood = call(flooder, 'capture_process_scenario', {
        executable: '/usr/bin/python3',
        args: ['-c', `import sys; sys.stdout.write("\\n" * ${16 * 1024 * 1024})`],
        max_output_bytes: 16 * 1024 * 1024,
        idempotency_key: 'flood',
        detail: 'summary',
      });
      const during: number[] = [];
      let done = false;
      void flood.finally(() => (done = true));
      while (!done) {
        const t0 = performance.now();
        await call(other, 'whoami');
        during.push(performance.now() - t0);
        await new Promise((r) => setTimeout(r, 50));
      }
      const reply = await flood;
      expect(reply.status, JSON.stringify(reply.error)).toBe('succeeded');
      const evidence = (await call(flooder, 'get_evidence', { evidence_id: reply.evidence_id })).evidence;
      expect(evidence.collections.stdout.rows).toBe(200_000);
      expect(evidence.truncated).toBe(true);
      expect(evidence.limitations).toContain(
        'stdout had more than 200000 rows; the first 200000 are retained (DOSSIER_MAX_COLLECTION_ROWS)',
      );
      expect(during.length).toBeGreaterThan(0);
      // No call of the other team waited more than a second while the flood was retained.
      expect(
        Math.max(...during),
        `whoami during the flood: ${during.map((d) => d.toFixed(0)).join(' ')}`,
      ).toBeLessThan(1_000);
      void before;
    } finally {
      await t.stop(true);
    }
  }, 180_000);
});
