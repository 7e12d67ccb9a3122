// Static analysis on a real provider (angr), shared by the team: a C fixture
// compiled here with a known feature string referenced from two named
// functions, a function whose symbol is stripped, and a data table; exact
// references and owners; one database build however many ask; real Debian
// binaries as smoke targets; bad input.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { providerKey } from '../../src/analysis/venv.ts';
import { databaseKey } from '../../src/launches/keys.ts';
import { call, type Reply } from '../helpers/mcp.ts';
import { startTestStack, type TestStack } from '../helpers/stack.ts';
import { scratchDir } from '../helpers/scratch.ts';
import { CPU_FEATURES, cpuFeaturesArgs, groundTruth, scoreFunctions } from '../helpers/boundaries.ts';

const work = scratchDir('analysis');
const FEATURE = 'FEATURE_FLAG_TELEMETRY';
const FIXTURE = `
#include <stdio.h>
#include <string.h>
#define FEATURE "${FEATURE}"
const char *const feature_table[] = { FEATURE, "feature-x", 0 };
__attribute__((noipa)) int check_feature(const char *s) { return strcmp(s, FEATURE) == 0; }
__attribute__((noipa)) void report_feature(int on) { printf("%s=%d\\n", FEATURE, on); }
/* Its symbol is removed after linking. */
__attribute__((noipa)) int hidden_feature(const char *s) { return strncmp(s, FEATURE, 7) == 0; }
int main(int argc, char **argv) {
  const char *arg = argc > 1 ? argv[1] : feature_table[argc - 1];
  int on = check_feature(arg) + hidden_feature(arg);
  report_feature(on);
  return on ? 0 : 1;
}
`;

let t: TestStack;
let alice: Client;
let fixture: string; // digest

function compile(name: string, source: string, flags: string[] = ['-O0']): string {
  const c = path.join(work, `${name}.c`);
  const out = path.join(work, 'roots', name);
  writeFileSync(c, source);
  execFileSync('gcc', [...flags, '-o', out, c]);
  execFileSync('objcopy', ['--strip-symbol=hidden_feature', out]);
  return out;
}

async function register(client: Client, file: string): Promise<string> {
  const reply = await call(client, 'register_artifact', { path: file });
  expect(reply.error).toBeUndefined();
  return reply.artifact.digest as string;
}

async function all(
  client: Client,
  evidenceId: string,
  collection: string,
  where?: Record<string, unknown[]>,
) {
  const rows: Reply[] = [];
  for (let offset = 0; ;) {
    const page = await call(client, 'inspect_analysis_view', {
      evidence_id: evidenceId,
      view: { kind: 'page', collection, where, offset, limit: 256 },
    });
    expect(page.error).toBeUndefined();
    rows.push(...page.rows.map((r: Reply) => r.row));
    if (page.coverage.exhausted) return rows;
    offset = page.coverage.next_offset;
  }
}

/** Calls until the analysis has finished (a first call may answer running while the database builds). */
async function analyse(client: Client, tool: string, args: Record<string, unknown>): Promise<Reply> {
  for (;;) {
    const reply = await call(client, tool, { wait_ms: 60_000, ...args });
    if (reply.status !== 'running') return reply;
  }
}

beforeAll(async () => {
  mkdirSync(path.join(work, 'roots'));
  t = await startTestStack({ env: { DOSSIER_ALLOWED_ROOTS: `/usr/bin:${path.join(work, 'roots')}` } });
  alice = await t.connect();
  fixture = await register(alice, compile('fixture', FIXTURE));
}, 120_000);
afterAll(async () => {
  await t?.stop(true);
});

describe('trace_feature on the C fixture', () => {
  let trace: Reply;
  beforeAll(async () => {
    trace = await analyse(alice, 'trace_feature', { artifact: fixture, query: FEATURE, detail: 'summary' });
  }, 180_000);

  it('finds the string and its four references, with the owner of each', async () => {
    expect(trace.status, JSON.stringify(trace.error)).toBe('succeeded');
    expect(trace.summary).toMatchObject({
      query: FEATURE,
      search_mode: 'literal',
      truncated: false,
      matches: 1,
      matches_by_type: { string: 1 },
      references: 4,
      references_by_owner: { found: 3, not_found: 0, unavailable: 1 },
      residual_unknowns: 1,
    });
    const refs = await all(alice, trace.evidence_id, 'references');
    const owners = refs.map((r) => `${r.kind}:${r.owner.outcome}:${r.owner.procedure_name}`).sort();
    expect(owners.slice(0, 2)).toEqual([
      'code_offset:found:check_feature',
      'code_offset:found:report_feature',
    ]);
    expect(owners[2]).toMatch(/^code_offset:found:sub_[0-9a-f]+$/);
    expect(owners[3]).toBe('data_pointer:unavailable:null');
    expect(new Set(refs.map((r) => r.target_addresses[0])).size).toBe(1);

    // The stripped function is one angr recovered but no symbol names.
    const functions = await analyse(alice, 'list_functions', { artifact: fixture, detail: 'summary' });
    // Flags are true/false, as a `where` filter asks for them.
    const unnamed = await all(alice, functions.evidence_id, 'functions', { named: [false] });
    expect(unnamed.length).toBeGreaterThan(0);
    expect(await all(alice, functions.evidence_id, 'functions', { named: [0] })).toEqual([]);
    const hidden = refs.find((r) => r.owner.procedure_name?.startsWith('sub_'))!;
    expect(unnamed.map((f) => f.address)).toContain(hidden.owner.procedure_address);
  });

  it('pages references by exact target address and owner outcome, with source_index and coverage', async () => {
    const target = (await all(alice, trace.evidence_id, 'references'))[0]!.target_address;
    const found = await call(alice, 'inspect_analysis_view', {
      evidence_id: trace.evidence_id,
      view: {
        kind: 'page',
        collection: 'references',
        where: { 'owner.outcome': ['found'], target_addresses: [target] },
        offset: 0,
        limit: 2,
      },
    });
    expect(found.coverage).toMatchObject({ returned: 2, matched: 3, total: 4, exhausted: false });
    expect(found.rows.every((r: Reply) => typeof r.source_index === 'number')).toBe(true);
    const upper = await call(alice, 'inspect_analysis_view', {
      evidence_id: trace.evidence_id,
      view: {
        kind: 'page',
        collection: 'references',
        where: { target_address: [target.toUpperCase()] },
        offset: 0,
        limit: 2,
      },
    });
    expect(upper.coverage.matched).toBe(0); // exact: no address normalization
  });

  it('the data reference’s owner is unavailable, its source is feature_table, and it is a residual unknown of its own', async () => {
    const binary = await analyse(alice, 'inspect_binary', { artifact: fixture, detail: 'summary' });
    expect(binary.summary).toMatchObject({ format: 'elf', arch: 'AMD64', bits: 64, pie: true });
    const [table] = await all(alice, binary.evidence_id, 'symbols', { name: ['feature_table'] });
    const [data] = await all(alice, trace.evidence_id, 'references', { 'owner.outcome': ['unavailable'] });
    expect(data!.source_address).toBe(table!.address);
    const unknowns = await all(alice, trace.evidence_id, 'residual_unknowns');
    expect(unknowns).toHaveLength(1);
    const open = await call(alice, 'list_unknowns', { status: 'open' });
    expect(open.unknowns.some((u: Reply) => u.scope.includes(data!.source_address))).toBe(true);
  });

  it('the same request later returns the same evidence_id, answered from the store', async () => {
    const again = await call(alice, 'trace_feature', {
      artifact: fixture,
      query: FEATURE,
      detail: 'summary',
    });
    expect(again).toMatchObject({
      status: 'succeeded',
      evidence_id: trace.evidence_id,
      analysis: { attached: true },
    });
    const evidence = await call(alice, 'get_evidence', { evidence_id: trace.evidence_id });
    expect(evidence.evidence.provider).toMatchObject({ name: 'angr', version: '9.2.213' });
  });
});

describe('investigate_feature', () => {
  it('completes procedures from the artifact’s analysis database and the provider, and checks start_with_tool', async () => {
    const complete = (name: string, value: string) =>
      alice.complete({
        ref: { type: 'ref/prompt', name: 'investigate_feature' },
        argument: { name, value },
        context: { arguments: { artifact: fixture } },
      });
    expect((await complete('procedure', 'check')).completion.values).toEqual(['check_feature']);
    const addresses = (await complete('procedure', '0x')).completion;
    expect(addresses.total).toBeGreaterThan(5);
    expect(addresses.values.every((v) => /^0x[0-9a-f]+$/.test(v))).toBe(true);
    expect((await complete('provider', '')).completion.values).toEqual(['angr']);
    const prompt = await alice.getPrompt({
      name: 'investigate_feature',
      arguments: { feature: 'telemetry', artifact: fixture, start_with_tool: 'trace_feature' },
    });
    const text = (prompt.messages[0]!.content as { text: string }).text;
    expect(text).toContain('1. Begin with the tool trace_feature');
    expect(text).toMatch(/trace_feature.*get_call_graph.*decompile_function/s);
    await expect(
      alice.getPrompt({ name: 'investigate_feature', arguments: { feature: 'x', start_with_tool: 'rm_rf' } }),
    ).rejects.toThrow(/not a tool/);
  });
});

describe('the other analysis tools', () => {
  it('find_strings, get_call_graph and decompile_function answer from the provider', async () => {
    const strings = await analyse(alice, 'find_strings', {
      artifact: fixture,
      contains: 'FEATURE_FLAG',
      detail: 'complete',
    });
    expect(strings.result.collections.strings).toEqual([
      expect.objectContaining({ text: FEATURE, references: 4, encoding: 'ascii' }),
    ]);

    const graph = await analyse(alice, 'get_call_graph', {
      artifact: fixture,
      function: 'main',
      detail: 'complete',
    });
    const callees = graph.result.collections.edges.map((e: Reply) => e.dst_name);
    expect(callees).toEqual(expect.arrayContaining(['check_feature', 'report_feature']));
    expect(callees.some((n: string) => /^sub_/.test(n))).toBe(true);
    // A capped graph says so in the reply itself, and leaves what it cut an open question.
    const capped = await analyse(alice, 'get_call_graph', {
      artifact: fixture,
      function: 'main',
      max_edges: 1,
      detail: 'complete',
    });
    expect(capped).toMatchObject({ truncated: true });
    expect(capped.limitations).toContain('edges were capped at max_edges=1');
    const open = await call(alice, 'list_unknowns', { status: 'open' });
    expect(JSON.stringify(open.unknowns)).toContain('past the first 1 edges');

    const code = await analyse(alice, 'decompile_function', {
      artifact: fixture,
      function: 'check_feature',
      detail: 'complete',
    });
    expect(code.status, JSON.stringify(code.error)).toBe('succeeded');
    const text = code.result.collections.lines.map((l: Reply) => l.text).join('\n');
    expect(text).toContain('strcmp');
    expect(text).toContain(FEATURE);
    const evidence = await call(alice, 'get_evidence', { evidence_id: code.evidence_id });
    expect(evidence.evidence.limitations.join(' ')).toMatch(/approximation/);
  }, 180_000);

  it('works on real Debian binaries, showing its progress while the database builds', async () => {
    const sed = await register(alice, '/usr/bin/sed');
    const first = await call(alice, 'list_functions', { artifact: sed, wait_ms: 0, detail: 'summary' });
    expect(first).toMatchObject({ status: 'running', analysis: { attached: false } });
    // A running analysis says how to follow it: by asking again, not with await_launch.
    expect(first.next).toMatch(/Call list_functions again with the same input/);
    const seen = new Set<string>();
    let reply = first;
    while (reply.status === 'running') {
      if (reply.progress?.phase) seen.add(String(reply.progress.phase));
      reply = await call(alice, 'list_functions', { artifact: sed, wait_ms: 1_000, detail: 'summary' });
    }
    expect(reply.status, JSON.stringify(reply.error)).toBe('succeeded');
    expect([...seen].some((p) => p.startsWith('analysis: '))).toBe(true);
    expect(reply.summary.functions).toBeGreaterThan(100);

    const digest = await register(alice, '/usr/bin/true');
    const binary = await analyse(alice, 'inspect_binary', { artifact: digest, detail: 'summary' });
    expect(binary.summary).toMatchObject({ format: 'elf', stripped: true, libraries: ['libc.so.6'] });
  }, 240_000);

  it('on real binaries every analysis’s first reply fits 8 KB on the wire; detail "complete" brings up to 40,000 B', async () => {
    // Both databases were built above; true's complete results are 17-30 KB of JSON, sed's larger still.
    for (const binary of ['/usr/bin/true', '/usr/bin/sed']) {
      const artifact = await register(alice, binary);
      /** The whole tools/call result as the client received it, once the analysis has finished. */
      const first = async (tool: string, args: Record<string, unknown>) => {
        for (;;) {
          const raw = await alice.callTool({ name: tool, arguments: { artifact, wait_ms: 60_000, ...args } }, undefined, { timeout: 130_000 }); // prettier-ignore
          const reply = raw.structuredContent as Reply;
          if (reply.status === 'running') continue;
          expect(reply.status, `${tool}: ${JSON.stringify(reply.error)}`).toBe('succeeded');
          return { reply, wire: Buffer.byteLength(JSON.stringify(raw)) };
        }
      };
      const functions = await first('list_functions', {});
      const some = await all(alice, functions.reply.evidence_id, 'functions', { is_plt: [false] });
      const fn = some.filter((f) => f.callees > 0).sort((a, b) => a.size - b.size)[0]!.address as string;
      const asks: [string, Record<string, unknown>][] = [
        ['list_functions', {}],
        ['inspect_binary', {}],
        ['find_strings', {}],
        ['get_call_graph', { function: fn }],
        ['decompile_function', { function: fn }],
        ['trace_feature', { query: 'Usage' }],
      ];
      for (const [tool, args] of asks) {
        const { reply, wire } = await first(tool, args);
        expect(wire, `${binary} ${tool}`).toBeLessThanOrEqual(8_000);
        // A result too large for the first reply says how to read the rest.
        if (reply.detail === 'summary')
          expect(reply.continuation, tool).toMatchObject({ kind: 'page', offset: 0 });
        const complete = await call(alice, tool, { artifact, detail: 'complete', ...args });
        const bytes = Buffer.byteLength(JSON.stringify({ ...complete, _isError: undefined }));
        expect(bytes, `${binary} ${tool}`).toBeLessThanOrEqual(40_000);
        // true's inspect_binary (about 30 KB) comes whole when asked for.
        if (binary === '/usr/bin/true' && tool === 'inspect_binary')
          expect(complete).toMatchObject({
            detail: 'complete',
            result: { collections: { symbols: expect.any(Array) } },
          });
      }
    }
  }, 600_000);
});

describe('function boundaries against the compiler’s truth', () => {
  // A real program nobody here wrote: Google's cpu_features (list_cpu_features), which the npm
  // package cpu-features ships; ~120 functions, among them tiny ones and a noreturn helper.
  // Both are installed by the project's own scripts (npm ci; scripts/system-packages.sh test), so a
  // machine without them fails here, saying what to install, rather than skipping.
  const absent = existsSync(CPU_FEATURES)
    ? undefined
    : 'node_modules/cpu-features (an optional dependency of ssh2) is missing: run npm ci';

  /** Strips `out`, lists its functions through the gateway and scores them against `out`'s symbols. */
  async function listAndScore(out: string, strip: string) {
    execFileSync(strip, ['-o', `${out}.stripped`, out]);
    const digest = await register(alice, `${out}.stripped`);
    const reply = await analyse(alice, 'list_functions', { artifact: digest, detail: 'summary' });
    expect(reply.status, JSON.stringify(reply.error)).toBe('succeeded');
    const rows = await all(alice, reply.evidence_id, 'functions');
    const binary = (await analyse(alice, 'inspect_binary', { artifact: digest, detail: 'summary' })).summary;
    const score = scoreFunctions(
      groundTruth(out),
      rows.filter((f) => !f.is_plt).map((f) => ({ address: Number(f.address), end: Number(f.end_address) })),
      Number(binary.load_base) - binary.link_base,
    );
    const why = JSON.stringify({ missed: score.missed, spurious: score.spurious });
    return { digest, reply, rows, score, why };
  }

  /** A stripped 32-bit ARM build's every function start and extent found, and no start listed inside one. */
  async function expectEveryFunctionWhole(out: string) {
    const { score, why } = await listAndScore(out, 'arm-linux-gnueabihf-strip');
    const truth = groundTruth(out);
    expect(score.starts.recall, why).toBe(1);
    expect(score.extents.recall, why).toBe(1);
    // crt's code around sizeless symbols may be listed; nothing inside a function the compiler emitted is.
    const inside = score.spurious
      .map(Number)
      .filter((a) => [...truth.functions].some(([lo, f]) => lo < a && a < f.end));
    expect(inside, why).toEqual([]);
    return truth;
  }

  // clang for 32-bit ARM writes no call-frame records for C: the list rests on angr's CFG.
  const armhf = (() => {
    if (absent) return absent;
    try {
      execFileSync('clang', ['--version'], { stdio: 'ignore' });
      execFileSync('arm-linux-gnueabihf-strip', ['--version'], { stdio: 'ignore' });
    } catch {
      return 'clang or binutils-arm-linux-gnueabihf is not installed: run bash scripts/system-packages.sh test';
    }
    if (!existsSync('/usr/arm-linux-gnueabihf/lib/crt1.o'))
      return 'libc6-dev-armhf-cross is not installed: run bash scripts/system-packages.sh test';
    return undefined;
  })();
  it('on 32-bit ARM without call-frame records, a stripped clang -O2 build scores F1 ≥ 0.98 on starts and extents', async () => {
    if (armhf) throw new Error(armhf);
    const out = path.join(work, 'roots', 'list_cpu_features_armhf');
    execFileSync('clang', [
      '--target=arm-linux-gnueabihf',
      '-O2',
      '-w',
      '-o',
      out,
      ...cpuFeaturesArgs('armhf'),
    ]);
    const { reply, score, why } = await listAndScore(out, 'arm-linux-gnueabihf-strip');
    expect(score.truth).toBeGreaterThan(80);
    expect(reply.summary.found_by.eh_frame).toBe(0);
    expect(score.starts.precision, why).toBeGreaterThanOrEqual(0.98);
    expect(score.starts.f1, why).toBeGreaterThanOrEqual(0.98);
    expect(score.extents.f1, why).toBeGreaterThanOrEqual(0.98);
  }, 240_000);
  // zlib's shape in a few lines: API functions nothing calls, whose switches clang for 32-bit ARM
  // lowers to offset tables (`add lr, pc, #4; ldr r3, [lr, r3, lsl #2]; add pc, lr, r3`), and a tail
  // call over other functions (gzclose to gzclose_r). angr resolved none of those tables: each case
  // was listed as a function of its own, and the bytes of the table after the lr form dropped the
  // function's ARM blocks for Thumb fragments.
  const API = `#include <stdio.h>
#include <stdlib.h>
struct stream { int state, mode, level, pending, bits; unsigned char *buf; };
#define CASES switch (s->state) { \
  case 40: s->level += 3; break; case 41: s->level ^= 5; break; case 42: s->bits -= 8; break; \
  case 43: s->pending += 13; break; case 44: s->level = s->bits; break; case 45: s->bits = 21; break; \
  case 46: s->pending >>= 2; break; case 47: s->level |= 9; break; default: return -2; }
int stream_pending(struct stream *s, unsigned *pending, int *bits) {
  if (!s || !s->buf) return -2;
  CASES
  if (pending) *pending = s->pending;
  if (bits) *bits = s->bits;
  return 0;
}
int stream_prime(struct stream *s, int bits, int value) {
  if (!s || !s->buf) return -2;
  CASES
  if (bits < 0 || bits > 16) return -2;
  s->bits += bits; s->pending |= value << bits;
  return 0;
}
int stream_close_read(struct stream *s) {
  if (!s || s->mode != 7247) return -2;
  free(s->buf); s->buf = 0; s->state = 0;
  return 0;
}
int stream_close_write(struct stream *s) {
  if (!s || s->mode != 31153) return -2;
  fflush(stdout); free(s->buf); s->buf = 0;
  return s->pending;
}
int stream_close(struct stream *s) {
  if (!s) return -2;
  return s->mode == 7247 ? stream_close_read(s) : stream_close_write(s);
}
int main(int argc, char **argv) {
  struct stream s = { argc, argc > 2 ? 7247 : 31153, 0, 0, 0, malloc(16) };
  printf("%d\\n", argc > 1 ? atoi(argv[1]) : 0);
  return stream_close(&s);
}
`;
  it('on 32-bit ARM, clang’s offset-table switches and tail calls split no function and hide no start', async () => {
    if (armhf) throw new Error(armhf);
    const src = path.join(work, 'roots', 'api_armhf.c');
    const out = path.join(work, 'roots', 'api_armhf');
    writeFileSync(src, API);
    execFileSync('clang', ['--target=arm-linux-gnueabihf', '-O2', '-w', '-o', out, src]);
    const truth = await expectEveryFunctionWhole(out);
    expect(truth.functions.size).toBe(6);
  }, 240_000);
  // An interpreter's shape in a few lines, as Debian's gcc builds it for 32-bit ARM (Thumb-2, PIE):
  // a computed goto whose table of labels sits in .data.rel.ro (each label even: the code sets bit
  // 0 before `bx`), and static functions nothing calls, whose addresses the code computes PC-relative
  // (`ldr r1, =f-(.L+4)` then `.L: add r1, pc`) to pass them on. The provider before seeded every
  // label as a function (vm_run split in 15 pieces) and read the labels' even addresses as ARM code.
  const VM = `#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
struct vm { int acc, pc, steps; const unsigned char *code; };
static int by_value(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }
static int by_value_desc(const void *a, const void *b) { return *(const int *)b - *(const int *)a; }
static volatile int stopped;
static void on_signal(int sig) { stopped = sig; }
static void report(void) { fputs("done\\n", stderr); }
int vm_run(struct vm *m) {
  static const void *ops[] = { &&op_halt, &&op_inc, &&op_dec, &&op_dbl, &&op_neg, &&op_sort, &&op_jmp, &&op_out, &&op_sig, &&op_nop };
  int scratch[8];
#define NEXT do { m->steps++; goto *ops[m->code[m->pc++] % 10]; } while (0)
  NEXT;
op_inc: m->acc += m->code[m->pc++]; NEXT;
op_dec: m->acc -= m->code[m->pc++]; NEXT;
op_dbl: m->acc *= 2; if (m->acc > 1000) m->acc %= 997; NEXT;
op_neg: m->acc = -m->acc; NEXT;
op_sort:
  for (int i = 0; i < 8; i++) scratch[i] = (m->acc * (i + 3)) % 17;
  qsort(scratch, 8, sizeof scratch[0], m->acc & 1 ? by_value : by_value_desc);
  m->acc += scratch[0];
  NEXT;
op_jmp: m->pc = m->code[m->pc]; if (m->steps > 10000) return -1; NEXT;
op_out: printf("%d\\n", m->acc); NEXT;
op_sig: signal(SIGUSR1, on_signal); NEXT;
op_nop: if (stopped) return -2; NEXT;
op_halt: return m->acc;
}
int vm_steps(const struct vm *m) { return m ? m->steps : -1; }
int main(int argc, char **argv) {
  static const unsigned char prog[] = { 1, 5, 3, 5, 2, 7, 4, 7, 8, 9, 3, 7, 0 };
  struct vm m = { argc, 0, 0, prog };
  atexit(report);
  int r = vm_run(&m);
  printf("%d %d %s\\n", r, vm_steps(&m), argc > 1 ? argv[1] : "");
  return r == 0;
}
`;
  it('on 32-bit ARM Thumb-2, a computed goto splits no function and callbacks taken PC-relative are found whole', async () => {
    if (armhf) throw new Error(armhf);
    try {
      execFileSync('arm-linux-gnueabihf-gcc', ['--version'], { stdio: 'ignore' });
    } catch {
      throw new Error('gcc-arm-linux-gnueabihf is not installed: run bash scripts/system-packages.sh test');
    }
    const src = path.join(work, 'roots', 'vm_armhf.c');
    const out = path.join(work, 'roots', 'vm_armhf');
    writeFileSync(src, VM);
    execFileSync('arm-linux-gnueabihf-gcc', ['-O2', '-w', '-o', out, src]);
    const truth = await expectEveryFunctionWhole(out);
    const named = [...truth.functions.values()].map((f) => f.name);
    expect(named).toEqual(
      expect.arrayContaining(['vm_run', 'by_value', 'by_value_desc', 'on_signal', 'report']),
    );
  }, 240_000);
  it('list_functions on a stripped gcc -O2 build scores F1 ≥ 0.98 on starts and extents against its symbols, and says how each was found', async () => {
    if (absent) throw new Error(absent);
    const out = path.join(work, 'roots', 'list_cpu_features');
    execFileSync('gcc', ['-O2', '-w', '-o', out, ...cpuFeaturesArgs('x86-64')]);
    const { digest, reply, rows, score, why } = await listAndScore(out, 'strip');
    expect(score.truth).toBeGreaterThan(100);
    expect(score.starts.precision, why).toBeGreaterThanOrEqual(0.98);
    expect(score.starts.f1, why).toBeGreaterThanOrEqual(0.98);
    expect(score.extents.f1, why).toBeGreaterThanOrEqual(0.98);

    // Each function says how it was found, the summary counts them, and a view filters on it.
    const counts: Record<string, number> = {};
    for (const f of rows) counts[f.found_by] = (counts[f.found_by] ?? 0) + 1;
    expect(reply.summary.found_by).toEqual({ symbol: 0, eh_frame: 0, plt: 0, cfg: 0, ...counts });
    expect(counts.eh_frame).toBeGreaterThan(100);
    // A function without a symbol is named after its own start (crt's register_tm_clones begins
    // after the padding angr first put in it).
    const unnamed = rows.filter((f) => String(f.name).startsWith('sub_'));
    expect(unnamed.length).toBeGreaterThan(0);
    for (const f of unnamed) expect(f.name).toBe(`sub_${Number(f.address).toString(16)}`);
    const cfgOnly = await all(alice, reply.evidence_id, 'functions', { found_by: ['cfg'] });
    expect(cfgOnly).toHaveLength(counts.cfg ?? 0);
    // Every analysis of the artifact carries the same account in its Evidence.
    const strings = await analyse(alice, 'find_strings', { artifact: digest, detail: 'summary' });
    const evidence = await call(alice, 'get_evidence', { evidence_id: strings.evidence_id });
    expect(evidence.evidence.limitations.join('\n')).toContain(
      `${counts.eh_frame} from the compiler's call-frame records (.eh_frame)`,
    );
  }, 240_000);
});

describe('shared by the team', () => {
  it('10 concurrent identical calls by two principals run one database build and return one evidence_id; another question on the artifact builds nothing more', async () => {
    const digest = await register(alice, compile('fixture-o2', FIXTURE, ['-O2']));
    const bob = await t.connect(await t.tokenFor('bob', 'local'));
    const replies = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        analyse(i % 2 ? bob : alice, 'trace_feature', {
          artifact: digest,
          query: FEATURE,
          detail: 'summary',
        }),
      ),
    );
    expect(new Set(replies.map((r) => r.evidence_id)).size).toBe(1);
    expect(replies.every((r) => r.status === 'succeeded')).toBe(true);
    const db = await t.stack.store.analyses.get('local', databaseKey(digest, 'default', providerKey()));
    expect(db).toMatchObject({ status: 'succeeded', runs: 1 });

    await analyse(bob, 'find_strings', { artifact: digest, detail: 'summary' });
    expect(
      (await t.stack.store.analyses.get('local', databaseKey(digest, 'default', providerKey())))!.runs,
    ).toBe(1);
  }, 240_000);
});

describe('bad input', () => {
  it('a non-binary artifact fails with unsupported_target and its stderr retained', async () => {
    const text = path.join(work, 'roots', 'notes.txt');
    writeFileSync(text, 'just words\n');
    const digest = await register(alice, text);
    const reply = await analyse(alice, 'list_functions', { artifact: digest });
    expect(reply.status).toBe('failed');
    expect(reply.error.code).toBe('unsupported_target');
    const stderr = await all(alice, reply.evidence_id, 'stderr');
    expect(stderr.map((l) => l.text).join('\n')).toMatch(/not a binary/);
  }, 120_000);

  it('another team’s artifact is not_found, an unknown function is not_found, a broken expression is invalid_params', async () => {
    const mallory = await t.connect(await t.tokenFor('mallory', 'rival-team'));
    const foreign = await call(mallory, 'trace_feature', { artifact: fixture, query: FEATURE });
    expect(foreign.error.code).toBe('not_found');
    const missing = await analyse(alice, 'get_call_graph', {
      artifact: fixture,
      function: 'no_such_function',
    });
    expect(missing.error.code).toBe('not_found');
    const regex = await analyse(alice, 'trace_feature', {
      artifact: fixture,
      query: '(unclosed',
      search_mode: 'regex',
    });
    expect(regex.error.code).toBe('invalid_params');
  }, 120_000);
});
