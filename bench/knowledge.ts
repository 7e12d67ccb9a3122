// Shared-knowledge figures (issue 33), on two builds of a real program: Lua
// 5.4.4's interpreter (Debian's source), compiled here with gcc -O2
// -fno-inline (about 1,100 functions; without -fno-inline gcc folds a third of
// them into their callers), and a version 2 with CHANGED functions edited,
// REMOVED ones deleted and ADDED new ones, both stripped. Measured: the two
// database builds and the diff through the gateway; the identical/changed
// classification's precision and recall against the compiler's ground truth
// (each function's bytes and relocations in the -ffunction-sections object
// files, see TRUTH); and what annotations add to a 64-row list_functions page.
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { provisionProvider } from '../src/analysis/venv.ts';
import { loadConfig } from '../src/config.ts';
import { effectiveAnnotations } from '../src/gateway/carried.ts';
import { benchDir, benchStack, callTool, connect, median, ms, timed } from './lib.ts';

const SOURCES = path.join(os.homedir(), '.cache', 'dossier', 'bench-sources');
const LUA = path.join(SOURCES, 'lua5.4-5.4.4', 'src');
const CFLAGS = ['-O2', '-fno-inline', '-ffunction-sections', '-DLUA_USE_LINUX'];

/** Functions version 2 edits: a stack check at the top of each (a call and its arguments more). */
const CHANGED = [
  'math_abs', 'math_floor', 'math_fmod', 'math_min', 'math_max', 'math_type', 'str_len', 'str_reverse',
  'str_rep', 'str_byte', 'luaB_rawlen', 'luaB_type', 'luaB_rawequal', 'tinsert', 'tremove', 'tconcat',
  'os_execute', 'os_remove', 'os_rename', 'os_difftime',
]; // prettier-ignore
/** Functions version 2 deletes, with their entries in the library tables. */
const REMOVED = ['math_ult', 'str_upper', 'luaB_rawget', 'tunpack', 'os_tmpname'];
const ADDED = 5;

/**
 * The compiler's ground truth, from the object files: for every function
 * symbol, its bytes and its relocations (offset, type, and the symbol it
 * names when that is a function or object; a section symbol, a local label
 * and an addend are layout, not code). Two builds' functions are identical when these are equal.
 */
const TRUTH = `
import hashlib, json, sys
from elftools.elf.elffile import ELFFile
from elftools.elf.relocation import RelocationSection
out = {}
for path in sys.argv[1:]:
    with open(path, 'rb') as f:
        elf = ELFFile(f)
        symtab = elf.get_section_by_name('.symtab')
        relocs = {}
        for sec in elf.iter_sections():
            if isinstance(sec, RelocationSection):
                target = elf.get_section(sec['sh_info'])
                for r in sec.iter_relocations():
                    s = symtab.get_symbol(r['r_info_sym'])
                    # A local label (.LC3: a string literal's place) is layout too.
                    named = s['st_info']['type'] in ('STT_FUNC', 'STT_OBJECT', 'STT_NOTYPE') and not s.name.startswith('.L') and s.name
                    relocs.setdefault(target.name, []).append((r['r_offset'], r['r_info_type'], named or s['st_info']['type']))
        for s in symtab.iter_symbols():
            if s['st_info']['type'] != 'STT_FUNC' or s['st_shndx'] in ('SHN_UNDEF', 'SHN_ABS'):
                continue
            sec = elf.get_section(s['st_shndx'])
            lo, hi = s['st_value'], s['st_value'] + s['st_size']
            body = sec.data()[lo:hi]
            rel = sorted((o - lo, t, n) for o, t, n in relocs.get(sec.name, []) if lo <= o < hi)
            digest = hashlib.sha256(body + json.dumps(rel).encode()).hexdigest()
            out.setdefault(s.name, []).append(digest)
print(json.dumps(out))
`;

function ensureLua() {
  if (existsSync(LUA)) return;
  mkdirSync(SOURCES, { recursive: true });
  execFileSync('apt-get', ['source', 'lua5.4=5.4.4-3+deb12u1'], { cwd: SOURCES, stdio: 'ignore' });
}

/** Version 2's source: CHANGED edited, REMOVED deleted with their table entries, ADDED registered in mathlib. */
function mutate(dir: string) {
  const files = readdirSync(dir).filter((f) => f.endsWith('.c'));
  const edit = (name: string, fn: (text: string) => string) => {
    const file = files.find((f) =>
      readFileSync(path.join(dir, f), 'utf8').includes(`static int ${name} (lua_State *L) {`),
    );
    if (!file) throw new Error(`no function ${name} in the Lua source`);
    const at = path.join(dir, file);
    const before = readFileSync(at, 'utf8');
    const after = fn(before);
    if (after === before) throw new Error(`editing ${name} changed nothing`);
    writeFileSync(at, after);
  };
  for (const name of CHANGED)
    edit(name, (t) =>
      t.replace(
        `static int ${name} (lua_State *L) {\n`,
        `static int ${name} (lua_State *L) {\n  luaL_checkstack(L, 3, "${name} v2");\n`,
      ),
    );
  for (const name of REMOVED)
    edit(name, (t) =>
      t
        .replace(new RegExp(`static int ${name} \\(lua_State \\*L\\) \\{\\n[\\s\\S]*?\\n\\}\\n`), '')
        .replace(new RegExp(`\\s*\\{"\\w+",\\s*${name}\\},`), ''),
    );
  edit('math_abs', (t) => {
    const added = Array.from(
      { length: ADDED },
      (_, i) =>
        `static int math_v2_${i} (lua_State *L) {\n  lua_pushinteger(L, luaL_checkinteger(L, 1) * ${7919 + i * 104729} + ${i});\n  return 1;\n}\n`,
    ).join('\n');
    return t
      .replace('static int math_abs (lua_State *L) {', `${added}\nstatic int math_abs (lua_State *L) {`)
      .replace(
        '  {"abs",   math_abs},',
        `  {"abs",   math_abs},\n${Array.from({ length: ADDED }, (_, i) => `  {"v2_${i}", math_v2_${i}},`).join('\n')}`,
      );
  });
}

/** Builds one version: objects, the linked program, its stripped copy under roots; its symbols by address. */
function build(work: string, roots: string, name: string, src: string) {
  const dir = path.join(work, name);
  cpSync(src, dir, { recursive: true });
  const multiarch = path.join(dir, 'lua5.4-deb-multiarch.h');
  if (!existsSync(multiarch)) writeFileSync(multiarch, '#define DEB_HOST_MULTIARCH "x86_64-linux-gnu"\n');
  if (name === 'v2') mutate(dir);
  const sources = readdirSync(dir).filter((f) => f.endsWith('.c') && f !== 'luac.c');
  execFileSync('gcc', [...CFLAGS, '-c', ...sources], { cwd: dir });
  const objects = sources.map((f) => f.replace(/\.c$/, '.o'));
  execFileSync('gcc', ['-o', 'lua', ...objects, '-lm', '-ldl'], { cwd: dir });
  execFileSync('strip', ['-o', path.join(roots, `lua-${name}`), path.join(dir, 'lua')]);
  // A PIE is mapped at 0x400000 by angr; names that several files use for static functions are ambiguous.
  const byAddress = new Map<string, string>();
  for (const line of execFileSync('nm', ['--defined-only', 'lua'], { cwd: dir, encoding: 'utf8' }).split(
    '\n',
  )) {
    const [address, type, symbol] = line.trim().split(/\s+/);
    if (symbol && /^[tT]$/.test(type!))
      byAddress.set(`0x${(0x400000 + Number.parseInt(address!, 16)).toString(16)}`, symbol);
  }
  return { dir, objects, byAddress, binary: path.join(roots, `lua-${name}`) };
}

type Row = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

export async function benchKnowledge(): Promise<string[]> {
  ensureLua();
  const work = benchDir('knowledge');
  const roots = path.join(work, 'roots');
  mkdirSync(roots);
  const v1 = build(work, roots, 'v1', LUA);
  const v2 = build(work, roots, 'v2', LUA);
  const provider = await provisionProvider(
    loadConfig({ DOSSIER_HOME: path.join(work, 'home') }).analysis.python,
  );
  const truthOf = (b: typeof v1) =>
    JSON.parse(
      execFileSync(provider.python, ['-c', TRUTH, ...b.objects], { cwd: b.dir, encoding: 'utf8' }),
    ) as Record<string, string[]>;
  const [t1, t2] = [truthOf(v1), truthOf(v2)];
  // Scored: functions named once in each build's objects (static names used twice are left out).
  const unique = (t: Record<string, string[]>, n: string) => t[n]?.length === 1;
  const truthClass = (n: string) =>
    unique(t1, n) && unique(t2, n) ? (t1[n]![0] === t2[n]![0] ? 'identical' : 'changed') : undefined;

  const stack = await benchStack({ DOSSIER_ALLOWED_ROOTS: roots, DOSSIER_RATE_LIMIT_PER_MINUTE: '1000000' });
  try {
    const client = await connect(stack);
    const caller = { principal: 'local', team: 'local', role: 'admin' as const };
    // In-process, through the transport-free gateway: what the store and the overlay cost, no HTTP.
    const local = async (tool: string, args: Row): Promise<Row> => {
      const r = await stack.gateway!.callTool(caller, tool, args);
      if (!r.ok) throw new Error(`${tool}: ${JSON.stringify(r.error)}`);
      return r.value as Row;
    };
    const register = async (file: string) =>
      (await callTool(client, 'register_artifact', { path: file })).artifact.digest as string;
    const [a1, a2] = [await register(v1.binary), await register(v2.binary)];
    const analyse = async (tool: string, args: Row) => {
      for (;;) {
        const r = await callTool(client, tool, { ...args, wait_ms: 110_000, detail: 'summary' });
        if (r.status === 'succeeded') return r;
        if (r.status !== 'running') throw new Error(`${tool}: ${JSON.stringify(r.error)}`);
      }
    };
    const [build1, f1] = await timed(() => analyse('list_functions', { artifact: a1 }));
    const [build2, f2] = await timed(() => analyse('list_functions', { artifact: a2 }));
    const [diffMs, diff] = await timed(() => analyse('diff_binaries', { artifact: a2, base: a1 }));
    const [cachedMs] = await timed(() => analyse('diff_binaries', { artifact: a2, base: a1 }));
    const all = async (evidence: string, collection: string) => {
      const rows: Row[] = [];
      // A page keeps the rows that fit the reply budget: the next one starts where it stopped.
      for (let offset = 0; ;) {
        const p = await local('inspect_analysis_view', {
          evidence_id: evidence,
          view: { kind: 'page', collection, offset, limit: 256 },
        });
        rows.push(...p.rows.map((r: Row) => r.row));
        if (p.coverage.exhausted || p.coverage.next_offset === null) return rows;
        offset = p.coverage.next_offset as number;
      }
    };
    const matches = await all(diff.evidence_id, 'matches');
    const added = await all(diff.evidence_id, 'added');
    const removed = await all(diff.evidence_id, 'removed');

    // Precision and recall per class, over the functions the ground truth names in both builds.
    const score = { identical: { tp: 0, p: 0, t: 0 }, changed: { tp: 0, p: 0, t: 0 } };
    let mismatched = 0;
    let unscored = 0;
    const scored = new Set<string>();
    for (const m of matches) {
      const before = v1.byAddress.get(m.base_address);
      const after = v2.byAddress.get(m.address);
      const truth = after && truthClass(after);
      if (!truth && !(before && truthClass(before))) {
        unscored++;
        continue;
      }
      const cls = m.class as 'identical' | 'changed';
      score[cls].p++;
      if (truth && before === after) {
        scored.add(after!);
        if (truth === cls) score[cls].tp++;
      } else mismatched++;
    }
    for (const n of Object.keys(t2)) {
      const truth = truthClass(n);
      if (truth) score[truth].t++;
    }
    const missed = Object.keys(t2).filter((n) => truthClass(n) && !scored.has(n)).length;
    // Added and removed against the symbols only one build has.
    const setScore = (rows: Row[], field: string, map: Map<string, string>, truth: string[]) => {
      const said = rows.map((r) => map.get(r[field])).filter((n): n is string => n !== undefined);
      const right = said.filter((n) => truth.includes(n)).length;
      return { said: said.length, right, truth: truth.length };
    };
    const addedScore = setScore(
      added,
      'address',
      v2.byAddress,
      Object.keys(t2).filter((n) => !(n in t1)),
    );
    const removedScore = setScore(
      removed,
      'base_address',
      v1.byAddress,
      Object.keys(t1).filter((n) => !(n in t2)),
    );
    const pct = (x: number, y: number) => (y ? `${((100 * x) / y).toFixed(1)} %` : 'n/a');

    // The read cost of annotations on a 64-row list_functions page, in-process and over MCP.
    const page = (evidence: string, offset: number) =>
      local('inspect_analysis_view', {
        evidence_id: evidence,
        view: { kind: 'page', collection: 'functions', offset, limit: 64 },
      });
    const pages = async (evidence: string, total: number) => {
      // Warmed up first: the figure is a page of a running gateway, not its first one.
      for (let i = 0; i < 10; i++) await page(evidence, (i * 131) % (total - 64));
      const t: number[] = [];
      for (let i = 0; i < 40; i++) t.push((await timed(() => page(evidence, (i * 97) % (total - 64))))[0]);
      return median(t);
    };
    const total1 = f1.summary.functions as number;
    const total2 = f2.summary.functions as number;
    const bare1 = await pages(f1.evidence_id, total1);
    const bare2 = await pages(f2.evidence_id, total2);
    const rows1 = await all(f1.evidence_id, 'functions');
    const writes: number[] = [];
    for (const r of rows1) {
      const [t] = await timed(() =>
        local('set_annotation', {
          artifact: a1,
          function: r.address,
          expected_revision: 0,
          name: `team_${r.address.slice(2)}`,
          comment: 'named by the benchmark',
          tags: ['bench'],
        }),
      );
      writes.push(t);
    }
    const named1 = await pages(f1.evidence_id, total1);
    const named2 = await pages(f2.evidence_id, total2);
    // What of it is the store's lookup of carried names (own, links, the base's), alone.
    const rows2 = await all(f2.evidence_id, 'functions');
    const lookups: number[] = [];
    for (let i = 0; i < 40; i++) {
      const at = rows2
        .slice((i * 97) % (total2 - 64))
        .slice(0, 64)
        .map((r) => r.address as string);
      lookups.push((await timed(() => effectiveAnnotations(stack.store, caller.team, a2, at)))[0]);
    }
    const sample = await page(f2.evidence_id, 64);
    const carried = sample.rows.filter((r: Row) => r.row.annotated?.name?.propagated_from).length;

    return [
      `Programs: Lua 5.4.4 (Debian's source), gcc ${execFileSync('gcc', ['-dumpfullversion'], { encoding: 'utf8' }).trim()} ${CFLAGS.join(' ')}, stripped; version 2: ${CHANGED.length} functions edited, ${REMOVED.length} removed, ${ADDED} added.`,
      '',
      '| figure | value |',
      '|---|---|',
      `| functions (angr) in version 1 / version 2 | ${total1.toLocaleString('en')} / ${total2.toLocaleString('en')} |`,
      `| analysis database build, version 1 / version 2 (list_functions, first call) | ${ms(build1)} / ${ms(build2)} |`,
      `| diff_binaries, first call (both databases built) | ${ms(diffMs)} (matching itself: ${diff.summary.elapsed_ms} ms) |`,
      `| diff_binaries, the same pair again (the team's retained answer) | ${ms(cachedMs)} |`,
      `| matched / identical / changed / added / removed | ${diff.summary.matched} / ${diff.summary.identical} / ${diff.summary.changed} / ${diff.summary.added} / ${diff.summary.removed} |`,
      `| matches by method | ${Object.entries(diff.summary.by_method as Record<string, number>)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ')} |`,
      `| ground truth: functions named once in both builds' objects, identical / changed | ${score.identical.t} / ${score.changed.t} |`,
      `| identical: precision / recall | ${pct(score.identical.tp, score.identical.p)} / ${pct(score.identical.tp, score.identical.t)} |`,
      `| changed: precision / recall | ${pct(score.changed.tp, score.changed.p)} / ${pct(score.changed.tp, score.changed.t)} |`,
      `| scored functions matched to another function / left unmatched | ${mismatched} / ${missed} |`,
      `| matches the ground truth cannot score (PLT stubs, ambiguous static names) | ${unscored} |`,
      `| added: precision / recall (${addedScore.said} named rows, ${addedScore.truth} truly added) | ${pct(addedScore.right, addedScore.said)} / ${pct(addedScore.right, addedScore.truth)} |`,
      `| removed: precision / recall (${removedScore.said} named rows, ${removedScore.truth} truly removed) | ${pct(removedScore.right, removedScore.said)} / ${pct(removedScore.right, removedScore.truth)} |`,
      `| set_annotation, in-process (${writes.length} writes, p50) | ${ms(median(writes))} |`,
      `| 64-row list_functions page, version 1, no annotations / every function annotated (40 offsets, p50, in-process) | ${ms(bare1)} / ${ms(named1)} |`,
      `| 64-row list_functions page, version 2, no annotations / names carried through the diff (${carried} of 64 rows propagated) | ${ms(bare2)} / ${ms(named2)} |`,
      `| of which the store's lookup of the 64 rows' carried names (40 pages, p50) | ${ms(median(lookups))} |`,
    ];
  } finally {
    await stack.stop();
  }
}
