// trace_feature: the strings, symbols, functions or address a query names in
// an artifact's analysis database, and the references to each, with their
// owning procedures (src/analysis/queries.ts holds the other queries).
import vm from 'node:vm';
import type { AnalysisDatabase, FunctionRow, XrefRow } from './database.ts';
import { DossierError } from '../domain/errors.ts';
import type { NewUnknown } from '../domain/types.ts';
import { hex, parseAddress, type QueryContext, type QueryResult } from './queries.ts';

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

interface TraceInput {
  query: string;
  search_mode: 'literal' | 'regex' | 'symbol' | 'address';
  case_sensitive: boolean;
  max_references: number;
}

/** The strings, symbols, functions or address the query names, each with the references to it. */
function findMatches(input: TraceInput, db: AnalysisDatabase): Match[] {
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
  return matches;
}

/** The references to the matches, up to max_references, and what the provider could not tell of them. */
function collectReferences(matches: Match[], input: TraceInput, artifact: string) {
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
  return { references, unknowns, total };
}

export function traceFeature(input: TraceInput, { db, artifact }: QueryContext): QueryResult {
  const matches = findMatches(input, db);
  const { references, unknowns, total } = collectReferences(matches, input, artifact);
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
