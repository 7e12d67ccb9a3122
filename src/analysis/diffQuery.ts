// diff_binaries: the functions of two builds matched (src/analysis/diff.ts),
// retained as Evidence like every analysis answer, and the matches kept as the
// team's links between the two builds, through which annotations of the base
// are offered on the artifact (propagated when identical, suggested when changed).
import { DIFF_ALGORITHM, Differ, matchClass, type Fn } from './diff.ts';
import { DossierError } from '../domain/errors.ts';
import { hex, type QueryContext, type QueryResult } from './queries.ts';

const round = (x: number) => Math.round(x * 1000) / 1000;

export function diffBinaries(input: { artifact: string; base: string }, ctx: QueryContext): QueryResult {
  if (!ctx.base) {
    throw new DossierError(
      'internal',
      'The base build’s analysis database was not provided to the diff.',
      'Ask again.',
    );
  }
  const started = performance.now();
  const { matches, added, removed } = new Differ(ctx.base.db, ctx.db).run();
  const rows = matches.map((m) => ({
    address: hex(m.fn.address),
    name: m.fn.name,
    base_address: hex(m.base.address),
    base_name: m.base.name,
    class: matchClass(m),
    method: m.method,
    similarity: round(m.similarity),
    confidence: round(m.confidence),
    identity: m.fn.identity,
    base_identity: m.base.identity,
  }));
  const shape = (f: Fn) => ({ identity: f.identity, size: f.size, blocks: f.blocks });
  const byMethod: Record<string, number> = {};
  for (const m of matches) byMethod[m.method] = (byMethod[m.method] ?? 0) + 1;
  const identical = rows.filter((r) => r.class === 'identical').length;
  const noIdentity = [ctx.base.db, ctx.db].some((db) => db.identities().length === 0);
  return {
    summary: {
      base: input.base,
      artifact: input.artifact,
      functions: { base: ctx.base.db.functions().length, artifact: ctx.db.functions().length },
      matched: rows.length,
      identical,
      changed: rows.length - identical,
      added: added.length,
      removed: removed.length,
      by_method: byMethod,
      elapsed_ms: Math.round(performance.now() - started),
    },
    document: {
      base: input.base,
      artifact: input.artifact,
      base_database: ctx.base.database.digest,
      algorithm: DIFF_ALGORITHM,
    },
    collections: {
      matches: rows,
      added: added.map((f) => ({ address: hex(f.address), name: f.name, ...shape(f) })),
      removed: removed.map((f) => ({ base_address: hex(f.address), base_name: f.name, ...shape(f) })),
    },
    truncated: ctx.base.database.truncated,
    limitations: [
      'identical: the same function identity (code with addresses neutralised); changed: matched with another identity',
      'structural matches are BinDiff-like heuristics: similarity and confidence say how sure each one is',
      ...(noIdentity
        ? [
            'one database has no function identities (built before them): matched by symbols and call graph only',
          ]
        : []),
      ...ctx.base.database.limitations.map((l) => `base: ${l}`),
    ],
    links: rows.map((r) => ({
      artifact: input.artifact,
      address: r.address!,
      base: input.base,
      base_address: r.base_address!,
      match_class: r.class,
      similarity: r.similarity,
      confidence: r.confidence,
    })),
  };
}
