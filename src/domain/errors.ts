// The closed set of tool error codes. Every expected failure is a
// DossierError; anything else is a bug and surfaces as `internal`.

export const ERROR_CODES = {
  invalid_params: { category: 'input', retryable: false },
  idempotency_key_reused: { category: 'conflict', retryable: false },
  not_found: { category: 'input', retryable: false },
  unauthorized: { category: 'auth', retryable: false },
  forbidden: { category: 'auth', retryable: false },
  policy_denied: { category: 'policy', retryable: false },
  // A limit the input passed fails again on retry; a busy moment (a rate, no free slot) says so itself.
  resource_constraint: { category: 'limit', retryable: false },
  provider_unavailable: { category: 'provider', retryable: true },
  provider_timeout: { category: 'provider', retryable: true },
  device_unavailable: { category: 'provider', retryable: true },
  cancelled: { category: 'lifecycle', retryable: false },
  interrupted: { category: 'lifecycle', retryable: false },
  revision_conflict: { category: 'conflict', retryable: true },
  unsupported_target: { category: 'input', retryable: false },
  integrity_error: { category: 'integrity', retryable: false },
  internal: { category: 'internal', retryable: false },
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;
export type ErrorCategory = (typeof ERROR_CODES)[ErrorCode]['category'];

/** The one wire shape of a tool error. */
export interface ToolError {
  code: ErrorCode;
  category: ErrorCategory;
  message: string;
  retryable: boolean;
  remediation: string;
  details: Record<string, unknown>;
}

export class DossierError extends Error {
  readonly code: ErrorCode;
  readonly remediation: string;
  readonly details: Record<string, unknown>;
  readonly retryable: boolean;

  constructor(
    code: ErrorCode,
    message: string,
    remediation: string,
    details: Record<string, unknown> = {},
    retryable?: boolean,
  ) {
    super(message);
    this.name = 'DossierError';
    this.code = code;
    this.remediation = remediation;
    this.details = details;
    this.retryable = retryable ?? ERROR_CODES[code].retryable;
  }

  /** A tool error (from a reply) as a throwable error again, unchanged. */
  static from(error: ToolError): DossierError {
    return new DossierError(error.code, error.message, error.remediation, error.details, error.retryable);
  }

  toToolError(): ToolError {
    return {
      code: this.code,
      category: ERROR_CODES[this.code].category,
      message: this.message,
      retryable: this.retryable,
      remediation: this.remediation,
      details: this.details,
    };
  }
}

/** Where unexpected failures are reported with their reference; the reply carries only the reference. */
let reportInternal: (reference: string, err: unknown) => void = (reference, err) =>
  console.error(`[dossier] internal error ${reference}:`, err);

export function onInternalError(report: (reference: string, err: unknown) => void) {
  reportInternal = report;
}

/**
 * Shapes any thrown value as a tool error. Unknown failures are `internal`:
 * the reply says so with a reference, and never carries the failure's own
 * text (database messages, host paths); the server log has it under that reference.
 */
export function toToolError(err: unknown): ToolError {
  if (err instanceof DossierError) return err.toToolError();
  const reference = `int_${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
  reportInternal(reference, err);
  return new DossierError(
    'internal',
    `Internal error (reference ${reference}): dossier failed unexpectedly; nothing about your input was at fault.`,
    'This is a bug in dossier, not in your call. Retry once; if it persists, report the reference to the operator (it is in the server log).',
    { reference },
  ).toToolError();
}

const NUL_ALLOWED = new Set(['stdin']);
/** Values one call's arguments may hold; past it the call is refused before anything else looks at them. */
export const MAX_ARGUMENT_VALUES = 200_000;

/**
 * Refuses what no tool's arguments may hold: a NUL character in any string
 * (PostgreSQL cannot store one, and no path, name, argument or environment
 * value may hold one), except in fields that carry bytes for a program
 * (`stdin`); and a key named `__proto__`, which validation would drop without
 * a word (assigned to a plain object it sets the prototype, not a field).
 * Walks iteratively, in time linear in the values, and names the path only on a hit.
 */
export function screenArguments(value: unknown): void {
  const stack: { value: unknown; parent: number; key: string }[] = [{ value, parent: -1, key: '' }];
  const seen: { parent: number; key: string }[] = [];
  const pathOf = (at: number) => {
    const parts: string[] = [];
    for (let i = at; i > 0; i = seen[i]!.parent) parts.push(seen[i]!.key);
    return parts.reverse().join('.');
  };
  const refuse = (
    where: string,
    what: string,
    remedy = 'Remove the NUL (\\u0000): no name, path, argument, key or filter value may hold one. Nothing was run.',
  ) => new DossierError('invalid_params', `${where || '(argument)'} ${what}`, remedy, { path: where });
  while (stack.length) {
    const node = stack.pop()!;
    const at = seen.push({ parent: node.parent, key: node.key }) - 1;
    if (seen.length > MAX_ARGUMENT_VALUES) {
      throw new DossierError(
        'invalid_params',
        `The arguments hold more than ${MAX_ARGUMENT_VALUES} values.`,
        'Send fewer values; every tool input is far smaller than this.',
      );
    }
    const v = node.value;
    if (typeof v === 'string') {
      if (v.includes('\u0000')) throw refuse(pathOf(at), 'contains a NUL character.');
    } else if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push({ value: v[i], parent: at, key: String(i) });
    } else if (v && typeof v === 'object') {
      for (const [k, child] of Object.entries(v)) {
        if (k.includes('\u0000')) throw refuse(pathOf(at), 'has a key with a NUL character.');
        if (k === '__proto__')
          throw refuse(
            pathOf(at),
            'has a key named __proto__, which no input takes.',
            'Rename or remove that key: a name, a variable, an environment variable or a filter field may not be called __proto__. Nothing was run.',
          );
        if (!NUL_ALLOWED.has(k)) stack.push({ value: child, parent: at, key: k });
      }
    }
  }
}

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && Object.hasOwn(ERROR_CODES, value);
}

/** A digest that is no artifact of the caller's team, nor a file one of its extractions wrote. */
export function artifactNotFound(digest: string): DossierError {
  return new DossierError(
    'not_found',
    `No artifact ${digest} is registered for your team, and none of your team's extractions wrote a file with that digest.`,
    'Register it first: register_artifact {path}, or {evidence_id, entry} for an entry of an extraction, or POST /artifacts (npx dossier upload); then pass the digest it returns. An extraction entry row\'s artifact value ("sha256:…") can be passed as it is.',
    { artifact: digest },
  );
}
