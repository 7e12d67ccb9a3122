// The analysis tools' answers, read from an artifact's analysis database.
// Each is bound to its contract (src/activities/analysis/bindings.ts) and returns what
// becomes the retained Evidence: a small summary, a document and collections.
import type { AnalysisDatabase, FunctionRow } from './database.ts';
import { DossierError } from '../domain/errors.ts';
import type { FunctionLink, NewUnknown } from '../domain/types.ts';
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

/** What a query reads of its database's reference (a DatabaseRef of src/launches/protocol.ts). */
export interface DatabaseFacts {
  digest: string;
  truncated: boolean;
  limitations: string[];
}

export interface QueryContext {
  db: AnalysisDatabase;
  database: DatabaseFacts;
  artifact: string;
  /** The base build of a diff (diff_binaries' `base`), with its own database. */
  base?: { db: AnalysisDatabase; database: DatabaseFacts };
}

/** "0x401136" or "4198710" as an address, else undefined. */
export function parseAddress(text: string): number | undefined {
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
