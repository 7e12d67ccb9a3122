// JSON that comes from outside (request bodies, bundles) is parsed only when it
// nests no deeper than a bound. JSON.parse itself copes with any depth, but
// everything that walks the value afterwards (schema checks, canonical JSON,
// digests) recurses, and a value 100,000 levels deep overflows the stack.

/** Nesting a JSON value from outside may have by default, and at most (DOSSIER_MAX_JSON_DEPTH). */
export const JSON_DEPTH = { default: 64, min: 16, max: 128 } as const;

/** The text nests arrays and objects deeper than the bound: it was not parsed. */
export class JsonTooDeep extends Error {
  constructor(readonly limit: number) {
    super(`the JSON nests arrays and objects deeper than ${limit} levels`);
    this.name = 'JsonTooDeep';
  }
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_ARRAY = 0x5b;
const OPEN_OBJECT = 0x7b;
const CLOSE_ARRAY = 0x5d;
const CLOSE_OBJECT = 0x7d;

/**
 * Whether `text` opens more than `limit` arrays and objects inside one another, read in one pass
 * that skips strings (and the escapes in them). Malformed text is left for JSON.parse to refuse.
 */
export function nestsDeeperThan(text: string, limit: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
    } else if (c === QUOTE) inString = true;
    else if (c === OPEN_ARRAY || c === OPEN_OBJECT) {
      if (++depth > limit) return true;
    } else if (c === CLOSE_ARRAY || c === CLOSE_OBJECT) depth--;
  }
  return false;
}

/** JSON.parse of text from outside: JsonTooDeep past `maxDepth` (checked first), SyntaxError when not JSON. */
export function parseBoundedJson(text: string, maxDepth: number): unknown {
  if (nestsDeeperThan(text, maxDepth)) throw new JsonTooDeep(maxDepth);
  return JSON.parse(text);
}
