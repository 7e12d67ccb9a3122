// What an argument a tool does not take was most likely meant to be: the agent's next call is right.

/**
 * For arguments a tool does not take, the fields it does take that they most look like
 * (`device_id` → `device`): one containing the other, or at most two edits apart.
 */
export function meant(unknown: readonly PropertyKey[], fields: readonly string[]): string {
  // A handful is all a reply names (a call may carry thousands of unknown keys).
  const guesses = unknown.slice(0, 5).flatMap((key) => {
    const k = String(key).toLowerCase();
    const contains = (long: string, short: string) => short.length >= 3 && long.includes(short);
    const near = fields.find((f) => contains(k, f) || contains(f, k) || editDistance(k, f) <= 2);
    return near ? [`"${String(key)}" → "${near}"`] : [];
  });
  return guesses.length ? ` (did you mean ${guesses.join(', ')}?)` : '';
}

/** Levenshtein distance, for the short names of a tool's fields. */
function editDistance(a: string, b: string): number {
  if (Math.abs(a.length - b.length) > 2 || a.length > 64 || b.length > 64) return 3;
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++)
      next[j] = Math.min(row[j]! + 1, next[j - 1]! + 1, row[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    row = next;
  }
  return row[b.length]!;
}
