// Which functions an answer names, by address, so a reader's overlay can put
// the team's names in their place: the functions a decompiled text names, the
// functions that reference each string.
import type { AnalysisDatabase } from './database.ts';

const hex = (n: number) => `0x${n.toString(16)}`;

/** The functions that own references into each string: the first REFERENCED_BY, by address. */
export function ownersByString(db: AnalysisDatabase) {
  const owners = new Map<number, { address: string; name: string | null }[]>();
  for (const o of db.stringOwners()) {
    const list = owners.get(o.string_id) ?? [];
    if (list.length < REFERENCED_BY) list.push({ address: hex(o.address), name: o.name });
    owners.set(o.string_id, list);
  }
  return owners;
}
export const REFERENCED_BY = 16;

/** At most this many distinct functions are recorded per text. */
export const NAMED_FUNCTIONS = 512;

export function functionsNamedIn(db: AnalysisDatabase, text: string): { name: string; address: string }[] {
  const out: { name: string; address: string }[] = [];
  for (const token of new Set(text.match(/[A-Za-z_][A-Za-z0-9_]*/g) ?? [])) {
    if (out.length >= NAMED_FUNCTIONS) break;
    const found = db.functionsNamed(token);
    // A name two functions share is left as it is: the text does not say which one it means.
    if (found.length === 1) out.push({ name: token, address: hex(found[0]!.address) });
  }
  return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/** The database's functions, each with its identity (null in a database built before identities). */
export function withIdentities(db: AnalysisDatabase) {
  const identities = new Map(db.identities().map((i) => [i.address, i.identity]));
  return db.functions().map((f) => ({ ...f, identity: identities.get(f.address) ?? null }));
}
