// Outcomes of launches that ended without a result of their own. Pure, so the
// workflow (deterministic sandbox) and the gateway build them the same way.
import { DossierError, type ErrorCode } from '../domain/errors.ts';
import type { FinishedStatus, LaunchOutcome } from '../domain/types.ts';

export function errorOutcome(
  status: FinishedStatus,
  code: ErrorCode,
  message: string,
  remediation: string,
  details: Record<string, unknown> = {},
): LaunchOutcome {
  const error = new DossierError(code, message, remediation, details).toToolError();
  return { status, evidenceId: null, summary: null, error: { ...error } };
}
