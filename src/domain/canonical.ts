// RFC 8785 (JSON Canonicalization Scheme) and the digests built on it.
// Numbers serialize as ECMAScript does (which is what RFC 8785 prescribes),
// object keys sort by UTF-16 code units, and no whitespace is emitted.
import { createHash, hash } from 'node:crypto';

export function canonicalJson(value: unknown): string {
  if (value === null) return 'null';
  switch (typeof value) {
    case 'boolean':
      return value ? 'true' : 'false';
    case 'number':
      if (!Number.isFinite(value)) throw new TypeError('canonical JSON cannot encode a non-finite number');
      return JSON.stringify(value);
    case 'string':
      return JSON.stringify(value);
    case 'object': {
      if (Array.isArray(value))
        return `[${value.map((v) => canonicalJson(v === undefined ? null : v)).join(',')}]`;
      const obj = value as Record<string, unknown>;
      const keys = Object.keys(obj)
        .filter((k) => obj[k] !== undefined)
        .sort(compareUtf16);
      return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(obj[k])}`).join(',')}}`;
    }
    default:
      throw new TypeError(`canonical JSON cannot encode a ${typeof value}`);
  }
}

function compareUtf16(a: string, b: string): number {
  // The default sort compares UTF-16 code units, which is what RFC 8785 §3.2.3 asks for.
  return a < b ? -1 : a > b ? 1 : 0;
}

export function sha256Hex(data: string | Uint8Array): string {
  // The one-shot form: a third of the time of a Hash object for a short input (a token, a key).
  return hash('sha256', data, 'hex');
}

/** An incremental SHA-256, for content too large to concatenate first. */
sha256Hex.stream = () => {
  const hash = createHash('sha256');
  return {
    update(data: string | Uint8Array) {
      hash.update(data);
    },
    digest: () => hash.digest('hex'),
  };
};

export function digestOf(value: unknown): string {
  return sha256Hex(canonicalJson(value));
}
