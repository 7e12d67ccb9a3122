// Completion of prompt arguments: live, team-scoped candidates,
// matched by case-insensitive prefix after Unicode normalization (found by that
// prefix in the store's index, so none is out of reach), deduplicated, sorted
// by code point, at most 100 values with total and hasMore, at most 10,000
// matches read. A completion grants nothing, and any internal
// error answers an empty list.
import { openDatabase, type SharedDatabases } from '../analysis/files.ts';
import type { AnalysisStore } from '../store/analyses.ts';
import type { CandidateKind, CandidateStore } from '../store/candidates.ts';
import type { Principal } from '../domain/types.ts';
import { fold } from '../domain/fold.ts';
import { CATALOG } from '../tools/catalog.ts';
import { PROMPTS_BY_NAME } from '../tools/prompts.ts';

export const COMPLETION_LIMITS = { values: 100, scanned: 10_000, valueChars: 4_096 };

export interface Completion {
  values: string[];
  total: number;
  hasMore: boolean;
}

const EMPTY: Completion = { values: [], total: 0, hasMore: false };
const byCodePoint = (a: string, b: string) => {
  const x = [...a];
  const y = [...b];
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    const d = x[i]!.codePointAt(0)! - y[i]!.codePointAt(0)!;
    if (d !== 0) return d;
  }
  return x.length - y.length;
};

/** Pure: filters and bounds candidates as above. */
export function complete(candidates: string[], typed: string): Completion {
  if (typed.length > COMPLETION_LIMITS.valueChars) return EMPTY;
  const prefix = fold(typed);
  const matches = new Set<string>();
  for (const c of candidates.slice(0, COMPLETION_LIMITS.scanned)) {
    if (c.length <= COMPLETION_LIMITS.valueChars && fold(c).startsWith(prefix)) matches.add(c);
  }
  const sorted = [...matches].sort(byCodePoint);
  return {
    values: sorted.slice(0, COMPLETION_LIMITS.values),
    total: sorted.length,
    hasMore: sorted.length > COMPLETION_LIMITS.values,
  };
}

/** Procedure discovery for completion: at most this many unique addresses, read in pages of 500. */
export const PROCEDURE_LIMITS = { addresses: 5_000, page: 500 };

/**
 * Procedures of an artifact from the team's analysis database: every observed
 * address; names only when discovery was exhaustive and the name's address is
 * unique (past the bound, whether a name is unique is unknown).
 */
async function procedures(
  stores: CompletionStores,
  team: string,
  artifact: string | undefined,
): Promise<string[]> {
  if (!artifact || !stores.home) return [];
  const record = await stores.analyses.newestDatabase(team, artifact);
  if (!record?.result) return [];
  const ref = record.result as { digest: string };
  const db = await openDatabase(stores.home, ref.digest, stores.blobs);
  const seen = new Map<number, string>();
  let exhaustive = false;
  for (let offset = 0; seen.size < PROCEDURE_LIMITS.addresses; offset += PROCEDURE_LIMITS.page) {
    const page = db.functionsPage(offset, PROCEDURE_LIMITS.page);
    for (const f of page) if (seen.size < PROCEDURE_LIMITS.addresses) seen.set(f.address, f.name);
    if (page.length < PROCEDURE_LIMITS.page) {
      exhaustive = seen.size < PROCEDURE_LIMITS.addresses || page.length === 0;
      break;
    }
  }
  const addresses = [...seen.keys()].map((a) => `0x${a.toString(16)}`);
  if (!exhaustive) return addresses;
  const count = new Map<string, number>();
  for (const name of seen.values()) count.set(name, (count.get(name) ?? 0) + 1);
  return [...addresses, ...[...count].filter(([, n]) => n === 1).map(([name]) => name)];
}

/** Where completion reads: the store's candidates and analyses, and this host's analysis databases. */
export interface CompletionStores {
  candidates: CandidateStore;
  analyses: AnalysisStore;
  home?: string;
  blobs?: SharedDatabases;
}

export async function completePromptArgument(
  stores: CompletionStores,
  caller: Principal,
  prompt: string,
  argument: string,
  typed: string,
  context: Record<string, string> = {},
): Promise<Completion> {
  try {
    const kind = PROMPTS_BY_NAME.get(prompt)?.arguments.find((a) => a.name === argument)?.completes;
    if (!kind || typed.length > COMPLETION_LIMITS.valueChars) return EMPTY;
    const candidates =
      kind === 'tool'
        ? CATALOG.map((c) => c.name)
        : kind === 'provider'
          ? ['angr']
          : kind === 'procedure'
            ? await procedures(stores, caller.team, context.artifact)
            : await recorded(stores, caller, kind, typed);
    return complete(candidates, typed);
  } catch {
    return EMPTY;
  }
}

/** The resource template whose `evidence_id` completes from the team's Evidence (mcp/server.ts serves it). */
export const EVIDENCE_TEMPLATE = 'dossier://evidence/{evidence_id}';

/** Resource-template argument completion: the team's Evidence ids for the Evidence template. */
export async function completeResourceArgument(
  stores: CompletionStores,
  caller: Principal,
  uri: string,
  argument: string,
  typed: string,
): Promise<Completion> {
  if (uri !== EVIDENCE_TEMPLATE || argument !== 'evidence_id' || typed.length > COMPLETION_LIMITS.valueChars)
    return EMPTY;
  try {
    return complete(await recorded(stores, caller, 'evidence', typed), typed);
  } catch {
    return EMPTY;
  }
}

/** The team's (or, for launch keys, the principal's) live records of `kind` that `typed` may begin. */
function recorded(stores: CompletionStores, caller: Principal, kind: CandidateKind, typed: string) {
  return stores.candidates.candidates(caller.team, caller.principal, kind, typed, COMPLETION_LIMITS.scanned);
}
