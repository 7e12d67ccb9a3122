// The analysis tools' answers, read from an artifact's analysis database.
// Each is bound to its contract (src/activities/analyses.ts) and returns what
// becomes the retained Evidence: a small summary, a document and collections.
import vm from 'node:vm';
import type { AnalysisDatabase, FunctionRow, XrefRow } from '../analysis/database.ts';
import { DossierError } from '../domain/errors.ts';
import type { NewUnknown } from '../domain/types.ts';
import type { DatabaseRef } from '../launches/protocol.ts';
import type { FunctionLink } from '../store/functionIndex.ts';
import { ownersByString, withIdentities } from './names.ts';

export const hex = (n: number | null | undefined) =>
  n === null || n === undefined ? null : `0x${n.toString(16)}`;

/** What a query returns; runAnalysis adds the database's facts and retains it. */
export interface QueryResult {
  summary: Record<string, unknown>;
  document: Record<string, unknown>;
  collections: Record<string, unknown[]>;
  truncated?: boolean;
  limitations?: string[];
  unknowns?: NewUnknown[];
  links?: FunctionLink[]; // a diff's matches, kept as the team's links between the two builds
}

export interface QueryContext {
  db: AnalysisDatabase;
  database: DatabaseRef;
  artifact: string;
  /** The base build of a diff (diff_binaries' `base`), with its own database. */
  base?: { db: AnalysisDatabase; database: DatabaseRef };
}

/** "0x401136" or "4198710" as an address, else undefined. */
function parseAddress(text: string): number | undefined {
  const t = text.trim();
  if (/^0x[0-9a-fA-F]{1,16}$/.test(t)) return Number.parseInt(t.slice(2), 16);
  if (/^\d{1,20}$/.test(t)) return Number(t);
  return undefined;
}

/** One function named by name or address; ambiguous or unknown names are refused with what exists. */
export function resolveFunction(db: AnalysisDatabase, ref: string): FunctionRow {
  const address = parseAddress(ref);
  const at = address !== undefined ? db.functionAt(address) : undefined;
  const found = address !== undefined ? (at ? [at] : []) : db.functionsNamed(ref);
  if (found.length === 1) return found[0]!;
  if (found.length > 1) {
    throw new DossierError(
      'invalid_params',
      `${found.length} functions are named "${ref}".`,
      `Name one by its address: ${found.map((f) => hex(f.address)).join(', ')}.`,
      { function: ref, addresses: found.map((f) => hex(f.address)) },
    );
  }
  throw new DossierError(
    'not_found',
    `No function "${ref}" in this binary's analysis.`,
    'list_functions shows the functions the provider recovered, by name and address.',
    { function: ref },
  );
}

export function inspectBinary(_input: unknown, { db }: QueryContext): QueryResult {
  const binary = (db.meta().binary ?? {}) as Record<string, unknown>;
  const sections = db.table<Record<string, unknown>>('sections').map((s) => ({
    name: s.name,
    address: hex(s.address as number | null),
    size: s.size,
    flags: s.flags,
    entropy: s.entropy === null ? null : Math.round((s.entropy as number) * 1000) / 1000,
    type: s.type,
  }));
  const addressed = <T extends Record<string, unknown>>(rows: T[], fields: string[]) =>
    rows.map((r) =>
      Object.fromEntries(Object.entries(r).map(([k, v]) => [k, fields.includes(k) ? hex(v as number) : v])),
    );
  const imports = addressed(db.table('imports'), ['address', 'plt_address']);
  const exports = addressed(db.table('exports'), ['address']);
  const symbols = addressed(db.table('symbols'), ['address']).map(({ idx: _idx, ...s }) => s);
  const facts = { ...binary, entry: hex(binary.entry as number), load_base: hex(binary.load_base as number) };
  return {
    summary: {
      ...facts,
      sections: sections.length,
      imports: imports.length,
      exports: exports.length,
      symbols: symbols.length,
    },
    document: { binary: facts },
    collections: { sections, imports, exports, symbols },
  };
}

export function findStrings(
  input: {
    min_length: number;
    encodings: string[];
    contains?: string;
    case_sensitive: boolean;
    max_strings: number;
  },
  { db }: QueryContext,
): QueryResult {
  const needle = input.contains && !input.case_sensitive ? input.contains.toLowerCase() : input.contains;
  const kept = db
    .strings()
    .filter(
      (s) =>
        s.length >= input.min_length &&
        input.encodings.includes(s.encoding) &&
        (!needle || (input.case_sensitive ? s.text : s.text.toLowerCase()).includes(needle)),
    );
  const owners = ownersByString(db);
  const rows = kept.slice(0, input.max_strings).map((s) => ({
    address: hex(s.address),
    section: s.section,
    encoding: s.encoding,
    text: s.text,
    length: s.length,
    references: s.references,
    referenced_by: owners.get(s.id) ?? [],
  }));
  const truncated = kept.length > rows.length;
  return {
    summary: {
      strings: rows.length,
      matched: kept.length,
      referenced: rows.filter((r) => r.references > 0).length,
    },
    document: { filter: input },
    collections: { strings: rows },
    truncated,
    limitations: truncated
      ? [`strings were capped at max_strings=${input.max_strings} of ${kept.length}`]
      : [],
  };
}

export function listFunctions(_input: unknown, { db }: QueryContext): QueryResult {
  const functions = withIdentities(db).map((f) => ({
    ...f,
    address: hex(f.address),
    end_address: hex(f.end_address),
    part_of: hex(f.part_of),
  }));
  const foundBy: Record<string, number> = { symbol: 0, eh_frame: 0, plt: 0, cfg: 0 };
  for (const f of functions) foundBy[f.found_by] = (foundBy[f.found_by] ?? 0) + 1;
  return {
    summary: {
      functions: functions.length,
      named: functions.filter((f) => f.named).length,
      plt: functions.filter((f) => f.is_plt).length,
      found_by: foundBy,
      parts: functions.filter((f) => f.part_of !== null).length,
    },
    document: {},
    collections: { functions },
  };
}

export function getCallGraph(
  input: { function: string; direction: 'callees' | 'callers' | 'both'; depth: number; max_edges: number },
  { db, artifact }: QueryContext,
): QueryResult {
  const root = resolveFunction(db, input.function);
  const names = new Map(db.functions().map((f) => [f.address, f.name]));
  const edges: Record<string, unknown>[] = [];
  const nodes = new Map<number, number>([[root.address, 0]]);
  let truncated = false;
  for (const direction of input.direction === 'both'
    ? (['callees', 'callers'] as const)
    : [input.direction]) {
    let frontier = [root.address];
    const seen = new Set(frontier);
    for (let depth = 1; depth <= input.depth && frontier.length && !truncated; depth++) {
      const next: number[] = [];
      for (const address of frontier) {
        const hop = direction === 'callees' ? db.callees(address) : db.callers(address);
        for (const e of hop) {
          if (edges.length >= input.max_edges) {
            truncated = true;
            break;
          }
          edges.push({
            depth,
            direction,
            src: hex(e.src),
            src_name: names.get(e.src) ?? null,
            dst: hex(e.dst),
            dst_name: names.get(e.dst) ?? null,
            call_site: hex(e.call_site),
          });
          const reached = direction === 'callees' ? e.dst : e.src;
          if (!seen.has(reached)) {
            seen.add(reached);
            next.push(reached);
            if (!nodes.has(reached)) nodes.set(reached, depth);
          }
        }
      }
      frontier = next;
    }
  }
  return {
    summary: { function: root.name, address: hex(root.address), edges: edges.length, functions: nodes.size },
    document: {
      root: { name: root.name, address: hex(root.address) },
      direction: input.direction,
      depth: input.depth,
    },
    collections: {
      edges,
      nodes: [...nodes].map(([address, depth]) => ({
        address: hex(address),
        name: names.get(address) ?? null,
        depth,
      })),
    },
    truncated,
    limitations: truncated ? [`edges were capped at max_edges=${input.max_edges}`] : [],
    // What the cap left out stays an open question of the team's, as a trace's does.
    unknowns: truncated
      ? [
          {
            question: `Which calls past the first ${input.max_edges} edges lie within ${input.depth} levels of ${root.name} (${input.direction})?`,
            scope: `${artifact} call graph ${hex(root.address)} ${input.direction}`,
          },
        ]
      : [],
  };
}

/** Runs a regular expression over every candidate with a time bound: a hostile pattern cannot stall the worker. */
function regexMatches(pattern: string, caseSensitive: boolean, texts: string[]): number[] {
  try {
    new RegExp(pattern, caseSensitive ? 'u' : 'iu');
  } catch (err) {
    throw new DossierError(
      'invalid_params',
      `query is not a valid regular expression: ${(err as Error).message}`,
      'Fix the expression (JavaScript syntax, Unicode mode).',
    );
  }
  try {
    return vm.runInNewContext(
      'const re = new RegExp(pattern, flags); const out = []; for (let i = 0; i < texts.length; i++) if (re.test(texts[i])) out.push(i); out',
      { pattern, flags: caseSensitive ? 'u' : 'iu', texts },
      { timeout: 5_000 },
    ) as number[];
  } catch {
    throw new DossierError(
      'resource_constraint',
      'The regular expression took more than 5 s over this binary’s strings.',
      'Use a simpler expression (no nested quantifiers), or a literal search.',
    );
  }
}

interface Match {
  match_index: number;
  type: 'string' | 'symbol' | 'function' | 'address';
  name: string | null;
  address: string | null;
  section: string | null;
  encoding: string | null;
  references: number;
  xrefs: XrefRow[];
}

export function traceFeature(
  input: {
    query: string;
    search_mode: 'literal' | 'regex' | 'symbol' | 'address';
    case_sensitive: boolean;
    max_references: number;
  },
  { db, artifact }: QueryContext,
): QueryResult {
  const matches: Match[] = [];
  const add = (m: Omit<Match, 'match_index' | 'references'>) =>
    matches.push({ ...m, match_index: matches.length, references: m.xrefs.length });
  const stringMatch = (s: { id: number; address: number; section: string; encoding: string; text: string }) =>
    add({
      type: 'string',
      name: s.text,
      address: hex(s.address),
      section: s.section,
      encoding: s.encoding,
      xrefs: db.referencesToString(s.id),
    });
  const functionMatch = (f: FunctionRow) =>
    add({
      type: 'function',
      name: f.name,
      address: hex(f.address),
      section: null,
      encoding: null,
      xrefs: db.referencesTo(f.address),
    });

  if (input.search_mode === 'literal' || input.search_mode === 'regex') {
    const strings = db.strings();
    const hits =
      input.search_mode === 'regex'
        ? regexMatches(
            input.query,
            input.case_sensitive,
            strings.map((s) => s.text),
          )
        : strings.flatMap((s, i) =>
            (
              input.case_sensitive
                ? s.text.includes(input.query)
                : s.text.toLowerCase().includes(input.query.toLowerCase())
            )
              ? [i]
              : [],
          );
    for (const i of hits) stringMatch(strings[i]!);
  } else if (input.search_mode === 'symbol') {
    for (const f of db.functionsNamed(input.query)) functionMatch(f);
    const functionAddresses = new Set(matches.map((m) => m.address));
    for (const s of db.symbolsNamed(input.query)) {
      if (s.address !== null && functionAddresses.has(hex(s.address))) continue;
      add({
        type: 'symbol',
        name: s.name,
        address: hex(s.address),
        section: null,
        encoding: null,
        xrefs: s.address === null ? [] : db.referencesTo(s.address),
      });
    }
  } else {
    const address = parseAddress(input.query);
    if (address === undefined) {
      throw new DossierError(
        'invalid_params',
        `"${input.query}" is not an address.`,
        'Pass an address such as "0x401136" (as list_functions and find_strings show them).',
      );
    }
    const f = db.functionAt(address);
    const s = db.stringAt(address);
    if (f) functionMatch(f);
    else if (s) stringMatch(s);
    else
      add({
        type: 'address',
        name: null,
        address: hex(address),
        section: null,
        encoding: null,
        xrefs: db.referencesTo(address),
      });
  }

  const references: Record<string, unknown>[] = [];
  const unknowns: NewUnknown[] = [];
  let total = 0;
  for (const m of matches) {
    for (const x of m.xrefs) {
      total++;
      if (references.length >= input.max_references) continue;
      const owner = {
        outcome: x.owner_outcome,
        procedure_name: x.owner_name,
        procedure_address: hex(x.owner_address),
      };
      references.push({
        source_address: hex(x.src),
        target_address: hex(x.dst),
        target_addresses: [m.address],
        kind: x.kind,
        match_index: m.match_index,
        match_type: m.type,
        owner,
      });
      if (x.owner_outcome === 'unavailable') {
        unknowns.push({
          question: `Which procedure owns the reference at ${hex(x.src)} to ${m.type} ${JSON.stringify(m.name ?? m.address)}? (${x.kind}; the provider could not tell)`,
          scope: `${artifact} ${hex(x.src)}->${hex(x.dst)}`,
        });
      }
    }
  }
  const truncated = total > references.length;
  const byType: Record<string, number> = {};
  for (const m of matches) byType[m.type] = (byType[m.type] ?? 0) + 1;
  const byOwner: Record<string, number> = { found: 0, not_found: 0, unavailable: 0 };
  for (const r of references) byOwner[(r.owner as { outcome: string }).outcome]! += 1;
  if (truncated) {
    unknowns.push({
      question: `Which references past the first ${input.max_references} point to the matches of ${JSON.stringify(input.query)}?`,
      scope: `${artifact} trace ${input.search_mode}:${input.query}`,
    });
  }
  return {
    summary: {
      query: input.query,
      search_mode: input.search_mode,
      truncated,
      matches: matches.length,
      matches_by_type: byType,
      references: references.length,
      references_found: total,
      references_by_owner: byOwner,
      residual_unknowns: unknowns.length,
    },
    document: { query: input.query, search_mode: input.search_mode, case_sensitive: input.case_sensitive },
    collections: {
      references,
      matches: matches.map(({ xrefs: _x, ...m }) => m),
    },
    truncated,
    limitations: truncated
      ? [`references were capped at max_references=${input.max_references} of ${total}`]
      : [],
    unknowns,
  };
}
