// What a team's names are for the functions of one artifact: its own
// annotations first; where it has none, the annotation of the function a diff
// found identical in an earlier build (propagated, marked with its source, and
// followed back through earlier diffs); for functions a diff found changed,
// the earlier build's annotation as a suggestion. Nothing is written: what is
// carried is worked out when the team reads.
import type { Annotation } from '../domain/annotations.ts';
import type { Store } from '../store/store.ts';

/** How many earlier builds a propagated annotation is followed back through. */
export const CARRY_DEPTH = 4;

/** Where a propagated or suggested annotation is written: its artifact, function and revision. */
export interface CarriedFrom {
  artifact: string;
  address: string;
  revision: number;
  by: string;
}

export interface Effective {
  annotation: Annotation;
  /** Set when the annotation is another build's, carried here through a diff's identical match. */
  propagated_from: CarriedFrom | null;
}

export interface Suggestion {
  annotation: Annotation;
  from: CarriedFrom;
  similarity: number;
  confidence: number;
}

type Stores = Pick<Store, 'annotations' | 'functions'>;

const fromOf = (e: Effective): CarriedFrom =>
  e.propagated_from ?? {
    artifact: e.annotation.artifact,
    address: e.annotation.item,
    revision: e.annotation.revision,
    by: e.annotation.updated_by,
  };

/** The team's effective function annotations on `artifact` at these addresses. */
export async function effectiveAnnotations(
  stores: Stores,
  team: string,
  artifact: string,
  addresses: string[],
  depth = CARRY_DEPTH,
): Promise<Map<string, Effective>> {
  const out = new Map<string, Effective>();
  if (!addresses.length) return out;
  const own = await stores.annotations.getMany(team, artifact, 'function', addresses);
  for (const [address, annotation] of own) out.set(address, { annotation, propagated_from: null });
  const missing = addresses.filter((a) => !own.has(a));
  if (!missing.length || depth <= 0) return out;
  const links = (await stores.functions.linksOf(team, artifact, missing)).filter(
    (l) => l.match_class === 'identical' && l.base !== artifact,
  );
  const byBase = new Map<string, string[]>();
  for (const l of links) byBase.set(l.base, [...(byBase.get(l.base) ?? []), l.base_address]);
  const resolved = new Map<string, Map<string, Effective>>();
  for (const [base, at] of byBase)
    resolved.set(base, await effectiveAnnotations(stores, team, base, at, depth - 1));
  // Newest diff first: the first earlier build that has something to say wins.
  for (const l of links) {
    if (out.has(l.address)) continue;
    const found = resolved.get(l.base)?.get(l.base_address);
    if (found) out.set(l.address, { annotation: found.annotation, propagated_from: fromOf(found) });
  }
  return out;
}

/** Annotations of earlier builds on the functions a diff matched as changed, for these addresses. */
export async function suggestedAnnotations(
  stores: Stores,
  team: string,
  artifact: string,
  addresses: string[],
): Promise<Map<string, Suggestion[]>> {
  const out = new Map<string, Suggestion[]>();
  const links = (await stores.functions.linksOf(team, artifact, addresses)).filter(
    (l) => l.match_class === 'changed' && l.base !== artifact,
  );
  const byBase = new Map<string, string[]>();
  for (const l of links) byBase.set(l.base, [...(byBase.get(l.base) ?? []), l.base_address]);
  for (const [base, at] of byBase) {
    const found = await effectiveAnnotations(stores, team, base, at);
    for (const l of links.filter((x) => x.base === base)) {
      const e = found.get(l.base_address);
      if (!e) continue;
      const list = out.get(l.address) ?? [];
      list.push({
        annotation: e.annotation,
        from: fromOf(e),
        similarity: l.similarity,
        confidence: l.confidence,
      });
      out.set(l.address, list);
    }
  }
  return out;
}
