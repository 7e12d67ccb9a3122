// How completion compares what a user typed with a candidate: Unicode NFKC,
// then lower case; and that folded text as an ordered index key (hex of its
// UTF-8), so a prefix is a range in any SQL collation.

export const fold = (s: string) => s.normalize('NFKC').toLowerCase();

export const foldKey = (s: string) => Buffer.from(fold(s), 'utf8').toString('hex');

/** The [low, high) range of fold keys that start with `typed`'s. */
export function prefixRange(typed: string): [string, string] {
  const low = foldKey(typed);
  // Hex digits are 0-9a-f: "g" sorts after every one of them in every collation.
  return [low, `${low}g`];
}
