// The team's shared understanding of a binary, on two builds of a real C
// program compiled here (version 2: one function changed, one added, one
// removed, the rest identical; both stripped): annotations from two
// principals with compare-and-swap, history and revert, the diff checked
// against the compiler's symbols of unstripped copies, names carried to the
// later build and applied wherever the team reads, nothing of it visible to
// another team, and a bundle that carries it to another store.
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { digestOf } from '../../src/domain/canonical.ts';
import { allRows, call, type Reply } from '../helpers/mcp.ts';
import { scratchDir } from '../helpers/scratch.ts';
import { startTestStack, type TestStack } from '../helpers/stack.ts';

const work = scratchDir('knowledge');
const roots = path.join(work, 'roots');
const V1 = `
#include <stdio.h>
#include <string.h>
#define KEEP __attribute__((noinline, used))
KEEP int parse_licence(const char *s) {
  if (strncmp(s, "LIC-", 4) != 0) return -1;
  int n = 0;
  for (s += 4; *s >= '0' && *s <= '9'; s++) n = n * 10 + (*s - '0');
  return n;
}
KEEP unsigned checksum(const char *s) {
  unsigned h = 5381;
  while (*s) h = h * 33 + (unsigned char)*s++;
  return h;
}
KEEP void log_line(const char *m) { fprintf(stderr, "[log] %s\\n", m); }
KEEP int legacy_mode(int x) { return x * 7 + 3; }
typedef int (*handler)(int);
KEEP int double_it(int x) { return x * 2; }
handler handlers[] = { double_it, legacy_mode };
int main(int argc, char **argv) {
  const char *arg = argc > 1 ? argv[1] : "LIC-42";
  int n = parse_licence(arg);
  log_line(arg);
  for (unsigned i = 0; i < sizeof handlers / sizeof *handlers; i++) n += handlers[i](n);
  printf("%d %u\\n", n, checksum(arg));
  return 0;
}
`;
// checksum changes; legacy_mode goes, audit_event comes (through the same table, so main stays the same).
const V2 = V1.replace(
  'while (*s) h = h * 33 + (unsigned char)*s++;',
  'while (*s) h = (h << 5) ^ h ^ (unsigned char)*s++;\n  h ^= h >> 16;',
)
  .replace(
    'KEEP int legacy_mode(int x) { return x * 7 + 3; }',
    'KEEP int audit_event(int x) { return (x ^ 0x5a5a) - 11; }',
  )
  .replace('double_it, legacy_mode', 'double_it, audit_event');
const USER = ['parse_licence', 'checksum', 'log_line', 'double_it', 'main'];

let t: TestStack;
let alice: Client;
let bob: Client;
let v1: string;
let v2: string;
/** The compiler's symbols of the unstripped builds: name → angr's address (a PIE is mapped at 0x400000). */
let sym1: Map<string, string>;
let sym2: Map<string, string>;

function build(name: string, source: string) {
  const c = path.join(work, `${name}.c`);
  const full = path.join(work, name);
  writeFileSync(c, source);
  execFileSync('gcc', ['-O2', '-o', full, c]);
  execFileSync('strip', ['-o', path.join(roots, name), full]);
  const symbols = new Map<string, string>();
  for (const line of execFileSync('nm', ['--defined-only', full], { encoding: 'utf8' }).split('\n')) {
    const [address, type, symbol] = line.trim().split(/\s+/);
    if (symbol && /^[tT]$/.test(type!))
      symbols.set(symbol, `0x${(0x400000 + Number.parseInt(address!, 16)).toString(16)}`);
  }
  return { file: path.join(roots, name), symbols };
}

const nameAt = (symbols: Map<string, string>, address: string) =>
  [...symbols].find(([, a]) => a === address)?.[0];

async function analyse(client: Client, tool: string, args: Record<string, unknown>): Promise<Reply> {
  for (;;) {
    const reply = await call(client, tool, { wait_ms: 60_000, ...args });
    if (reply.status !== 'running') {
      expect(reply.status, JSON.stringify(reply.error)).toBe('succeeded');
      return reply;
    }
  }
}

async function register(client: Client, file: string) {
  const reply = await call(client, 'register_artifact', { path: file });
  expect(reply.error).toBeUndefined();
  return reply.artifact.digest as string;
}

const annotate = (client: Client, args: Record<string, unknown>) => call(client, 'set_annotation', args);

beforeAll(async () => {
  mkdirSync(roots);
  const one = build('v1', V1);
  const two = build('v2', V2);
  sym1 = one.symbols;
  sym2 = two.symbols;
  t = await startTestStack({ env: { DOSSIER_ALLOWED_ROOTS: roots } });
  alice = await t.connect(await t.tokenFor('alice', 're'));
  bob = await t.connect(await t.tokenFor('bob', 're'));
  v1 = await register(alice, one.file);
  v2 = await register(alice, two.file);
}, 120_000);
afterAll(async () => {
  await t?.stop(true);
});

describe('annotations on version 1, from two principals', () => {
  let functionsV1: Reply;
  beforeAll(async () => {
    functionsV1 = await analyse(alice, 'list_functions', { artifact: v1, detail: 'summary' });
  }, 180_000);

  it('are revisions with authors; of two concurrent writes on one revision one is refused with the current revision', async () => {
    const rows = await allRows(alice, functionsV1.evidence_id, 'functions');
    for (const name of USER) expect(rows.map((r) => r.address)).toContain(sym1.get(name));
    expect(rows.every((r) => typeof r.identity === 'string')).toBe(true);

    const first = await annotate(alice, {
      artifact: v1,
      function: sym1.get('parse_licence'),
      expected_revision: 0,
      name: 'parse_licence_key',
      type: 'int parse_licence_key(const char *s)',
      tags: ['licence', 'input'],
    });
    expect(first.annotation).toMatchObject({ revision: 1, name: 'parse_licence_key', updated_by: 'alice' });
    // The same write again is a retry: answered as it was, no new revision.
    expect(
      await annotate(alice, {
        artifact: v1,
        function: sym1.get('parse_licence'),
        expected_revision: 0,
        name: 'parse_licence_key',
        type: 'int parse_licence_key(const char *s)',
        tags: ['licence', 'input'],
      }),
    ).toMatchObject({ changed: false, annotation: { revision: 1 } });
    for (const [name, by, teamName] of [
      ['checksum', bob, 'djb2_checksum'],
      ['log_line', bob, 'log_message'],
      ['legacy_mode', alice, 'legacy_scale'],
    ] as const)
      expect(
        (await annotate(by, { artifact: v1, function: sym1.get(name), expected_revision: 0, name: teamName }))
          .annotation.revision,
      ).toBe(1);

    // Both read revision 1 and write at once: exactly one lands.
    const [a, b] = await Promise.all([
      annotate(alice, {
        artifact: v1,
        function: 'parse_licence_key',
        expected_revision: 1,
        name: 'check_licence',
      }),
      annotate(bob, {
        artifact: v1,
        function: sym1.get('parse_licence'),
        expected_revision: 1,
        comment: 'reads LIC-<digits>',
      }),
    ]);
    const [won, lost] = a.error ? [b, a] : [a, b];
    expect(won.annotation.revision).toBe(2);
    expect(lost.error).toMatchObject({
      code: 'revision_conflict',
      details: {
        expected_revision: 1,
        current_revision: 2,
        changes_since: [expect.objectContaining({ revision: 2 })],
      },
    });
    expect(lost.error.details.changes_since[0].changed_by).toBe(won === a ? 'alice' : 'bob');
    expect(lost.error.message).toMatch(/at revision 2, not 1/);
  });

  it('keep a history, revert to an earlier revision as a new one, and log every change', async () => {
    const item = { artifact: v1, function: sym1.get('parse_licence') };
    const before = await call(alice, 'get_annotation', item);
    expect(before.annotation.revision).toBe(2);
    expect(before.history.map((h: Reply) => h.revision)).toEqual([2, 1]);
    const reverted = await call(bob, 'revert_annotation', { ...item, to_revision: 1, expected_revision: 2 });
    expect(reverted.annotation).toMatchObject({
      revision: 3,
      name: 'parse_licence_key',
      comment: null,
      updated_by: 'bob',
    });
    const stale = await call(alice, 'revert_annotation', { ...item, to_revision: 2, expected_revision: 2 });
    expect(stale.error).toMatchObject({ code: 'revision_conflict', details: { current_revision: 3 } });
    const after = await call(alice, 'get_annotation', item);
    expect(after.history[0]).toMatchObject({
      revision: 3,
      origin: 'revert',
      reverted_to: 1,
      changed_by: 'bob',
    });
    expect(after.history.map((h: Reply) => h.changed_by)).toHaveLength(3);

    const events = await call(alice, 'list_annotation_events', { artifact: v1 });
    expect(events.events).toHaveLength(6);
    expect(new Set(events.events.map((e: Reply) => e.changed_by))).toEqual(new Set(['alice', 'bob']));
    expect(events.events[0]).toMatchObject({
      revision: 3,
      origin: 'revert',
      item: sym1.get('parse_licence'),
    });
    // Still the same retained answer: annotations are applied on read.
    const again = await call(alice, 'list_functions', { artifact: v1, detail: 'summary' });
    expect(again.evidence_id).toBe(functionsV1.evidence_id);
  });
  it('refuse what they cannot take, saying what to do, and change nothing', async () => {
    const item = { artifact: v1, function: sym1.get('main') };
    const refused = async (args: Record<string, unknown>, tool = 'set_annotation') => {
      const reply = await call(alice, tool, args);
      expect(reply.error, JSON.stringify(args)).toBeDefined();
      expect(reply.error.remediation).toBeTruthy();
      return reply.error;
    };
    expect((await refused({ ...item, expected_revision: 0 })).message).toMatch(/sets nothing/);
    expect((await refused({ ...item, expected_revision: 0, name: 'x'.repeat(257) })).code).toBe(
      'invalid_params',
    );
    expect((await refused({ ...item, expected_revision: 0, name: 'has space' })).code).toBe('invalid_params');
    expect((await refused({ ...item, expected_revision: 0, tags: ['a b'] })).code).toBe('invalid_params');
    expect(
      (await refused({ ...item, address: '0x404000', expected_revision: 0, comment: 'two items' })).code,
    ).toBe('invalid_params');
    expect(
      (await refused({ artifact: v1, address: 'here', expected_revision: 0, comment: 'x' })).message,
    ).toMatch(/not an address/);
    expect(
      (await refused({ artifact: v1, address: '0x404000', expected_revision: 0, variables: { a: 'b' } }))
        .message,
    ).toMatch(/Only a function has variables/);
    expect(
      (await refused({ artifact: v1, function: 'no_such_name', expected_revision: 0, comment: 'x' })).code,
    ).toBe('not_found');
    expect(
      (
        await refused({
          artifact: `sha256:${'0'.repeat(64)}`,
          ...{ function: '0x1' },
          expected_revision: 0,
          comment: 'x',
        })
      ).code,
    ).toBe('not_found');
    expect((await refused({ ...item, to_revision: 1, expected_revision: 0 }, 'revert_annotation')).code).toBe(
      'not_found',
    );
    expect((await refused({ artifact: v1, base: v1 }, 'diff_binaries')).message).toMatch(/two builds/);
    expect((await refused({ artifact: v1, base: `sha256:${'0'.repeat(64)}` }, 'diff_binaries')).code).toBe(
      'not_found',
    );
    // Every field within its own bound, together more than any reply could show with its history.
    const variables = Object.fromEntries(
      Array.from({ length: 64 }, (_, i) => [`v${i}_${'a'.repeat(240)}`, `n${i}_${'b'.repeat(240)}`]),
    );
    const heavy = await refused({ ...item, expected_revision: 0, note: 'x'.repeat(16_000), variables });
    expect(heavy).toMatchObject({
      code: 'invalid_params',
      message: expect.stringMatching(/more than an annotation may hold together \(18000\)/),
    });
    expect((await call(alice, 'get_annotation', item)).annotation).toBeNull();
  });
});

describe('version 2', () => {
  let diff: Reply;
  beforeAll(async () => {
    diff = await analyse(bob, 'diff_binaries', { artifact: v2, base: v1, detail: 'summary' });
  }, 240_000);

  it('is diffed once for the team, matching what the compiler says changed, came and went', async () => {
    expect(diff.summary).toMatchObject({ changed: 1, added: 1, removed: 1 });
    const again = await call(alice, 'diff_binaries', { artifact: v2, base: v1, detail: 'summary' });
    expect(again).toMatchObject({ evidence_id: diff.evidence_id, analysis: { attached: true } });

    const matches = await allRows(alice, diff.evidence_id, 'matches');
    const classOf = new Map<string, string>();
    for (const m of matches) {
      const before = nameAt(sym1, m.base_address);
      const after = nameAt(sym2, m.address);
      if (before || after) expect(after, `${m.base_address} → ${m.address}`).toBe(before);
      if (after) classOf.set(after, m.class);
      expect(m.similarity).toBeGreaterThan(0.5);
    }
    expect(Object.fromEntries(USER.map((n) => [n, classOf.get(n)]))).toEqual({
      parse_licence: 'identical',
      checksum: 'changed',
      log_line: 'identical',
      double_it: 'identical',
      main: 'identical',
    });
    expect((await allRows(alice, diff.evidence_id, 'added')).map((r) => nameAt(sym2, r.address))).toEqual([
      'audit_event',
    ]);
    expect(
      (await allRows(alice, diff.evidence_id, 'removed')).map((r) => nameAt(sym1, r.base_address)),
    ).toEqual(['legacy_mode']);
    // Read through the team's names: the base side has them, the identical side carries them.
    const parse = matches.find((m) => m.address === sym2.get('parse_licence'))!;
    const page = await call(alice, 'inspect_analysis_view', {
      evidence_id: diff.evidence_id,
      view: { kind: 'page', collection: 'matches', where: { address: [parse.address] } },
    });
    expect(page.rows[0].row).toMatchObject({ name: 'parse_licence_key', base_name: 'parse_licence_key' });
  });

  it('carries names: propagated to identical functions with their source, suggested for the changed one', async () => {
    const functions = await analyse(alice, 'list_functions', { artifact: v2, detail: 'summary' });
    const rows = await allRows(alice, functions.evidence_id, 'functions');
    const at = (name: string) => rows.find((r) => r.address === sym2.get(name))!;
    expect(at('parse_licence')).toMatchObject({
      name: 'parse_licence_key',
      prototype: 'int parse_licence_key(const char *s)',
      tags: ['input', 'licence'],
      annotated: {
        name: {
          revision: 3,
          by: 'bob',
          provider_name: expect.stringMatching(/^sub_/),
          propagated_from: { artifact: v1, address: sym1.get('parse_licence'), revision: 3 },
        },
      },
    });
    // log_line moved (checksum grew): its identity did not.
    expect(sym2.get('log_line')).not.toBe(sym1.get('log_line'));
    expect(at('log_line')).toMatchObject({
      name: 'log_message',
      annotated: { name: { propagated_from: { address: sym1.get('log_line') } } },
    });
    expect(at('checksum').name).toMatch(/^sub_/);
    expect(at('checksum').annotated).toBeUndefined();

    const changed = await call(alice, 'get_annotation', { artifact: v2, function: sym2.get('checksum') });
    expect(changed.annotation).toBeNull();
    expect(changed.suggestions).toEqual([
      expect.objectContaining({
        name: 'djb2_checksum',
        from: expect.objectContaining({
          artifact: v1,
          address: sym1.get('checksum'),
          revision: 1,
          by: 'bob',
        }),
      }),
    ]);
    const carried = await call(alice, 'list_carried_annotations', { artifact: v2 });
    expect(carried.carried.filter((c: Reply) => c.kind === 'suggested').map((c: Reply) => c.name)).toEqual([
      'djb2_checksum',
    ]);
    expect(
      carried.carried
        .filter((c: Reply) => c.kind === 'propagated')
        .map((c: Reply) => c.name)
        .sort(),
    ).toEqual(['log_message', 'parse_licence_key']);
    // Accepting it is an ordinary write, which remembers where it came from.
    const accepted = await annotate(alice, {
      artifact: v2,
      function: sym2.get('checksum'),
      expected_revision: 0,
      name: 'djb2_checksum',
      // The suggestion's source as it was offered.
      accepts: changed.suggestions[0].from,
    });
    expect(accepted.annotation).toMatchObject({ revision: 1, name: 'djb2_checksum' });
    const history = await call(alice, 'get_annotation', { artifact: v2, function: 'djb2_checksum' });
    expect(history.history[0].source).toEqual({
      artifact: v1,
      kind: 'function',
      item: sym1.get('checksum'),
      revision: 1,
    });

    const same = await call(alice, 'find_identical_functions', {
      artifact: v2,
      function: sym2.get('log_line'),
    });
    expect(same.functions.map((f: Reply) => [f.artifact, f.address, f.name]).sort()).toEqual(
      [
        [v1, sym1.get('log_line'), 'log_message'],
        [v2, sym2.get('log_line'), 'log_message'],
      ].sort(),
    );
  });

  it('shows the team’s names in the call graph, trace_feature owners, find_strings references and the pseudo-C', async () => {
    const parse = sym2.get('parse_licence')!;
    const graph = await analyse(alice, 'get_call_graph', {
      artifact: v2,
      function: sym2.get('main'),
      detail: 'complete',
    });
    const edge = graph.result.collections.edges.find((e: Reply) => e.dst === parse);
    expect(edge).toMatchObject({
      dst_name: 'parse_licence_key',
      annotated: { dst_name: { propagated_from: { artifact: v1 } } },
    });
    expect(graph.result.collections.edges.find((e: Reply) => e.dst === sym2.get('checksum')).dst_name).toBe(
      'djb2_checksum',
    );

    const trace = await analyse(alice, 'trace_feature', { artifact: v2, query: 'LIC-', detail: 'complete' });
    const owners = trace.result.collections.references.map((r: Reply) => r.owner.procedure_name);
    expect(owners).toContain('parse_licence_key');

    const strings = await analyse(alice, 'find_strings', {
      artifact: v2,
      contains: 'LIC-',
      detail: 'complete',
    });
    const lic = strings.result.collections.strings.find((s: Reply) => s.text === 'LIC-');
    expect(lic.referenced_by).toEqual([{ address: parse, name: 'parse_licence_key' }]);
    expect(lic.annotated['referenced_by.0.name']).toMatchObject({ revision: 3 });

    const code = await analyse(alice, 'decompile_function', {
      artifact: v2,
      function: sym2.get('main'),
      detail: 'complete',
    });
    const text = code.result.collections.lines.map((l: Reply) => l.text).join('\n');
    expect(text).toContain('parse_licence_key(');
    expect(text).toContain('djb2_checksum(');
    expect(text).not.toContain(`sub_${parse.slice(2)}`);
    const renamed = code.result.collections.lines.find((l: Reply) => l.text.includes('parse_licence_key('));
    expect(renamed.annotated.text.provider_text).toContain(`sub_${parse.slice(2)}`);

    // Variables of a function renamed by the team, applied to its retained pseudo-C on read.
    const own = await analyse(alice, 'decompile_function', {
      artifact: v2,
      function: sym2.get('checksum'),
      detail: 'complete',
    });
    const variable = own.result.collections.lines
      .map((l: Reply) => l.text)
      .join('\n')
      .match(/\b(v\d+|a\d+)\b/)?.[1];
    expect(variable).toBeDefined();
    await annotate(alice, {
      artifact: v2,
      function: sym2.get('checksum'),
      expected_revision: 1,
      variables: { [variable!]: 'hash' },
    });
    const reread = await allRows(alice, own.evidence_id, 'lines');
    expect(reread.map((l) => l.text).join('\n')).toMatch(/\bhash\b/);
    expect(own.result.document.function).toBe('djb2_checksum');

    // The name the team gave is accepted where a function is asked for: the same shared analysis.
    const byName = await analyse(alice, 'decompile_function', { artifact: v2, function: 'djb2_checksum' });
    expect(byName.evidence_id).toBe(own.evidence_id);
    const graphByName = await analyse(alice, 'get_call_graph', { artifact: v2, function: 'djb2_checksum' });
    expect(graphByName.status).toBe('succeeded');
    // Another team gave no function that name: to it, it is angr's to know, and angr does not.
    const stranger = await t.connect(await t.tokenFor('carol', 'elsewhere'));
    expect(await register(stranger, path.join(roots, 'v2'))).toBe(v2);
    const unnamed = await call(stranger, 'decompile_function', {
      artifact: v2,
      function: 'djb2_checksum',
      wait_ms: 60_000,
    });
    expect(unnamed.error?.code ?? unnamed.status).toMatch(/not_found|failed/);
    // A name the team gave one function and the analysis another is refused, naming both.
    await analyse(stranger, 'list_functions', { artifact: v2, detail: 'summary' });
    const namedMain = await annotate(stranger, {
      artifact: v2,
      function: sym2.get('checksum'),
      expected_revision: 0,
      name: 'main',
    });
    expect(namedMain.error).toBeUndefined();
    const ambiguous = await call(stranger, 'get_call_graph', { artifact: v2, function: 'main' });
    expect(ambiguous.error).toMatchObject({
      code: 'invalid_params',
      details: { addresses: [sym2.get('checksum'), sym2.get('main')] },
    });
  }, 300_000);

  it('another team sees none of it', async () => {
    const eve = await t.connect(await t.tokenFor('eve', 'rivals'));
    const digest = await register(eve, path.join(roots, 'v2'));
    expect(digest).toBe(v2);
    const functions = await analyse(eve, 'list_functions', { artifact: v2, detail: 'summary' });
    const rows = await allRows(eve, functions.evidence_id, 'functions');
    expect(rows.find((r) => r.address === sym2.get('parse_licence'))).toMatchObject({
      name: expect.stringMatching(/^sub_/),
    });
    expect(rows.some((r) => r.annotated)).toBe(false);
    expect(
      (await call(eve, 'get_annotation', { artifact: v1, function: sym1.get('parse_licence') })).annotation,
    ).toBeNull();
    expect((await call(eve, 'list_annotations', { artifact: v2 })).annotations).toEqual([]);
    expect((await call(eve, 'list_annotation_events', {})).events).toEqual([]);
    expect((await call(eve, 'list_carried_annotations', { artifact: v2 })).carried).toEqual([]);
    expect(
      (await call(eve, 'inspect_analysis_view', { evidence_id: diff.evidence_id, view: { kind: 'summary' } }))
        .error.code,
    ).toBe('not_found');
    const mine = await call(eve, 'find_identical_functions', {
      artifact: v2,
      function: sym2.get('log_line'),
    });
    expect(mine.functions.map((f: Reply) => f.artifact)).toEqual([v2]);
    expect(
      (await annotate(eve, { artifact: v1, function: sym1.get('main'), expected_revision: 0, name: 'x' }))
        .error.code,
    ).toBe('not_found');
  }, 180_000);

  it('a bundle carries annotations, their history, the diff’s links and its unknowns to another store', async () => {
    const functions = await call(alice, 'list_functions', { artifact: v2, detail: 'summary' });
    // An unknown recorded against the diff travels in the same bundle as the annotations.
    const unknown = await call(alice, 'record_unknown', {
      question: 'Why did parse_licence change between the builds?',
      scope: `${v2} parse_licence`,
      evidence_ids: [diff.evidence_id],
    });
    const exported = await call(alice, 'export_evidence_bundle', {
      evidence_ids: [functions.evidence_id, diff.evidence_id],
      idempotency_key: 'knowledge-bundle-1',
    });
    expect(exported.status, JSON.stringify(exported.error)).toBe('succeeded');
    expect(exported.summary).toMatchObject({ evidence: 2, annotations: 5, unknowns: 1 });
    const text = readFileSync(exported.summary.path, 'utf8');

    const other = await startTestStack({ env: { DOSSIER_ALLOWED_ROOTS: roots } });
    try {
      const carol = await other.connect(await other.tokenFor('carol', 're'));
      const token = await other.tokenFor('carol', 're');
      // A revision that set_annotation would refuse, its digest made right: refused whole, its
      // Evidence not imported either.
      const crafted = JSON.parse(text) as Reply;
      const { digest: _digest, ...first } = crafted.annotations[0];
      first.revisions[0].name = { evil: 1 };
      crafted.annotations[0] = { ...first, digest: digestOf(first) };
      const refused = await fetch(new URL('/bundles', other.url), {
        method: 'POST',
        body: JSON.stringify(crafted),
        headers: { Authorization: `Bearer ${token}` },
      });
      expect(refused.status).toBe(400);
      expect(((await refused.json()) as Reply).error).toMatchObject({
        code: 'invalid_params',
        message: expect.stringMatching(
          /nothing was imported: annotation 0 is not an annotation history: .*name/,
        ),
      });
      expect((await call(carol, 'get_evidence', { evidence_id: diff.evidence_id })).error.code).toBe(
        'not_found',
      );
      const imported = (await (
        await fetch(new URL('/bundles', other.url), {
          method: 'POST',
          body: text,
          headers: { Authorization: `Bearer ${token}` },
        })
      ).json()) as Reply;
      expect(imported).toMatchObject({
        imported: 2,
        annotations: { created: 5, diverged: 0 },
        unknowns: { imported: 1, conflicts: [] },
      });
      expect((await call(carol, 'list_unknowns', {})).unknowns.map((u: Reply) => u.unknown_id)).toContain(
        unknown.unknown.unknown_id,
      );
      const rows = await allRows(carol, functions.evidence_id, 'functions');
      expect(rows.find((r) => r.address === sym2.get('parse_licence'))).toMatchObject({
        name: 'parse_licence_key',
        annotated: { name: { propagated_from: { artifact: v1, revision: 3 } } },
      });
      const history = await call(carol, 'get_annotation', {
        artifact: v1,
        function: sym1.get('parse_licence'),
      });
      expect(history.history.map((h: Reply) => [h.revision, h.changed_by, h.imported?.by])).toEqual([
        [3, 'bob', 'carol'],
        [2, expect.any(String), 'carol'],
        [1, 'alice', 'carol'],
      ]);
      // Importing again changes nothing.
      const again = (await (
        await fetch(new URL('/bundles', other.url), {
          method: 'POST',
          body: text,
          headers: { Authorization: `Bearer ${token}` },
        })
      ).json()) as Reply;
      expect(again.annotations).toMatchObject({ created: 0, unchanged: 5 });
      expect(again.unknowns).toMatchObject({ imported: 0, updated: 0, conflicts: [] });
    } finally {
      await other.stop(true);
    }
  }, 180_000);
  it('an annotation as large as it may be reads back whole, with its history a page at a time', async () => {
    const type = { artifact: v1, type_name: 'struct licence_notes' };
    const note = 'n'.repeat(16_000);
    const first = await annotate(alice, { ...type, expected_revision: 0, note, comment: 'c'.repeat(1_000) });
    expect(first.annotation?.revision, JSON.stringify(first.error)).toBe(1);
    const second = await annotate(bob, { ...type, expected_revision: 1, note: `${note.slice(1)}m` });
    expect(second.annotation?.revision, JSON.stringify(second.error)).toBe(2);
    const read = await call(alice, 'get_annotation', type);
    expect(read.error).toBeUndefined();
    expect(read.annotation.note).toHaveLength(16_000);
    expect(read.history.length).toBeGreaterThanOrEqual(1);
    const seen = read.history.map((h: Reply) => h.revision);
    let before = read.next_before_revision;
    while (before !== null) {
      const page = await call(alice, 'get_annotation', { ...type, before_revision: before });
      expect(page.error).toBeUndefined();
      seen.push(...page.history.map((h: Reply) => h.revision));
      before = page.next_before_revision;
    }
    expect(seen).toEqual([2, 1]);
    // No revision asked for: the page is the annotation, and the history starts at the newest.
    const none = await call(alice, 'get_annotation', { ...type, history_limit: 0 });
    expect(none).toMatchObject({ history: [], next_before_revision: 3 });
  });
});
