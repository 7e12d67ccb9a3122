// The closed set of tool error codes. Every expected failure is a
// DossierError; anything else is a bug and surfaces as `internal`.

export const ERROR_CODES = {
  invalid_params: { category: 'input', retryable: false },
  idempotency_key_reused: { category: 'conflict', retryable: false },
  not_found: { category: 'input', retryable: false },
  unauthorized: { category: 'auth', retryable: false },
  forbidden: { category: 'auth', retryable: false },
  policy_denied: { category: 'policy', retryable: false },
  resource_constraint: { category: 'limit', retryable: true },
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

/** Shapes any thrown value as a tool error; unknown failures are `internal` and say so. */
export function toToolError(err: unknown): ToolError {
  if (err instanceof DossierError) return err.toToolError();
  const message = err instanceof Error ? err.message : String(err);
  return new DossierError(
    'internal',
    `Internal error: ${message}`,
    'This is a bug in dossier, not in your call. Retry once; if it persists, report it with the launch or request details.',
  ).toToolError();
}

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && Object.hasOwn(ERROR_CODES, value);
}
