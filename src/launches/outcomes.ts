// Outcomes of launches that ended without a result of their own. Pure, so the
// workflow (deterministic sandbox) and the gateway build them the same way.
import { ApplicationFailure, TimeoutFailure } from '@temporalio/common';
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

/** No worker took the launch from `queue`, its capability's task queue. */
export function noWorkerOutcome(capability: string, queue: string): LaunchOutcome {
  return errorOutcome(
    'failed',
    'provider_unavailable',
    `No worker picked up this launch: none serves the "${capability}" capability (task queue ${queue}). Nothing was run.`,
    `Start a worker with DOSSIER_WORKER_CAPABILITIES including ${capability}, then launch again with a new idempotency_key.`,
    { capability },
  );
}

export function cancelledOutcome(): LaunchOutcome {
  return errorOutcome(
    'cancelled',
    'cancelled',
    'The launch was cancelled before it finished.',
    'Start a new launch with a new idempotency_key if the effect is still wanted.',
  );
}

/**
 * A dispatch that failed without an outcome of its own, from its failure's cause (a timeout: its
 * worker was lost; an application failure: the effect's own error in its details) and the journal.
 */
export function failureOutcome(cause: unknown, effectStarted: boolean): LaunchOutcome {
  if (effectStarted || cause instanceof TimeoutFailure) {
    return errorOutcome(
      'interrupted',
      'interrupted',
      effectStarted
        ? 'The worker running this launch stopped after the effect began; what it did is unknown and it was not re-run.'
        : 'No worker finished this launch in time; it was not re-run.',
      'Inspect the target for the partial effect, then start a new launch with a new idempotency_key if you still want it.',
      { timeout: cause instanceof TimeoutFailure ? cause.timeoutType : undefined },
    );
  }
  const app = cause instanceof ApplicationFailure ? cause : undefined;
  const detail = (app?.details?.[0] ?? undefined) as Record<string, unknown> | undefined;
  if (detail) return { status: 'failed', evidenceId: null, summary: null, error: detail };
  return errorOutcome(
    'failed',
    'internal',
    `The launch failed: ${(cause as Error)?.message ?? String(cause)}`,
    'Check the workflow history in the Temporal UI; start a new launch with a new key once fixed.',
  );
}
