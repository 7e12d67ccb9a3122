// Completion of prompt arguments: live, team-scoped candidates,
// matched by case-insensitive prefix after Unicode normalization, deduplicated,
// sorted by code point, at most 100 values with total and hasMore, at most
// 10,000 candidates scanned. A completion grants nothing, and any internal
// error answers an empty list.
import type { CandidateStore } from '../store/candidates.ts';
import type { Principal } from '../domain/types.ts';
import { CATALOG } from '../tools/catalog.ts';
import { PROMPTS_BY_NAME } from '../tools/prompts.ts';

export const COMPLETION_LIMITS = { values: 100, scanned: 10_000, valueChars: 4_096 };

export interface Completion {
  values: string[];
  total: number;
  hasMore: boolean;
}

const EMPTY: Completion = { values: [], total: 0, hasMore: false };
const fold = (s: string) => s.normalize('NFKC').toLowerCase();
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

export async function completePromptArgument(
  store: CandidateStore,
  caller: Principal,
  prompt: string,
  argument: string,
  typed: string,
): Promise<Completion> {
  try {
    const kind = PROMPTS_BY_NAME.get(prompt)?.arguments.find((a) => a.name === argument)?.completes;
    if (!kind || typed.length > COMPLETION_LIMITS.valueChars) return EMPTY;
    const candidates =
      kind === 'tool'
        ? CATALOG.map((c) => c.name)
        : await store.candidates(caller.team, caller.principal, kind, COMPLETION_LIMITS.scanned);
    return complete(candidates, typed);
  } catch {
    return EMPTY;
  }
}
