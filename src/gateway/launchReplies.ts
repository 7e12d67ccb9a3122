// What a launch reply says about a launch record: its status in the brief's
// five words, and where it is in its life (`launch.phase`), so a launch that
// was claimed but never started says so and says what happens next.
import type { z } from 'zod';
import { DossierError } from '../domain/errors.ts';
import { isFinished, type LaunchRecord, type LaunchStatus } from '../domain/types.ts';
import { bodyDigest, differingFields } from '../launches/keys.ts';
import type { launchReplySchema } from '../tools/outputs.ts';

export type LaunchReply = z.output<typeof launchReplySchema>;

/** How often each gateway tries to start the launches it claimed while Temporal did not answer. */
export const START_RETRY_EVERY_MS = 5_000;
/** A launch not started this long after it was called is recorded as never started, not started late. */
export const START_LATE_MS = 15 * 60_000;

/**
 * `pending`: the key is claimed, its workflow is not started (Temporal did not answer);
 * `started`: its workflow runs; `finished`: its outcome is recorded.
 */
export type LaunchPhase = 'pending' | 'started' | 'finished';

export function launchPhase(record: Pick<LaunchRecord, 'status'>): LaunchPhase {
  if (record.status === 'pending') return 'pending';
  return isFinished(record.status) ? 'finished' : 'started';
}

/** The time after which a pending launch is recorded failed, never started. */
export function startBy(record: Pick<LaunchRecord, 'createdAt'>): string {
  return new Date(Date.parse(record.createdAt) + START_LATE_MS).toISOString();
}

/** What a pending launch is and what happens to it, in one sentence each (replies, task status). */
export function pendingNote(record: Pick<LaunchRecord, 'createdAt'>): { message: string; next: string } {
  return {
    message:
      'Claimed but not started yet: its workflow could not be started because Temporal did not answer, so nothing of it has run. ' +
      `The gateway tries to start it every ${START_RETRY_EVERY_MS / 1000} s until Temporal answers; ` +
      `if Temporal is still unreachable at ${startBy(record)}, it is recorded failed and never runs.`,
    next: 'Nothing to resend: call await_launch (or get_launch) with this idempotency_key to follow it; it attaches once it starts.',
  };
}

/**
 * What a started, still running launch's caller does next: the launch goes on whatever the call
 * does, and the same key attaches to it, so this is the one line a `running` reply adds.
 */
export const RUNNING_NEXT =
  'It goes on without you: call again with the same idempotency_key and arguments, or await_launch {idempotency_key}, whenever you want its outcome (each call waits up to wait_ms, at most 110000, and attaches; nothing runs twice).';

/** A launch record as every launch tool replies with it. */
export function launchReply(
  record: LaunchRecord,
  attached: boolean,
  ui: { uiUrl: string; namespace: string },
  follow = true,
): LaunchReply {
  const status: LaunchStatus = record.status === 'pending' ? 'running' : record.status;
  const phase = launchPhase(record);
  const reply: LaunchReply = {
    status,
    launch: {
      idempotency_key: record.key,
      workflow_id: record.workflowId,
      run_id: record.runId,
      tool: record.tool,
      principal: record.principal,
      attached,
      phase,
      started_at: record.createdAt,
      ui_url: uiUrl(record, ui),
    },
  };
  if (phase === 'pending') {
    reply.launch.start_by = startBy(record);
    Object.assign(reply, pendingNote(record));
  }
  if (record.finishedAt) reply.launch.finished_at = record.finishedAt;
  if (record.evidenceId) reply.evidence_id = record.evidenceId;
  if (record.summary) reply.summary = record.summary;
  if (record.error) reply.error = record.error;
  if (status === 'running' && record.progress) reply.progress = record.progress;
  if (phase === 'started' && follow) reply.next = RUNNING_NEXT;
  return reply;
}

function uiUrl(record: LaunchRecord, ui: { uiUrl: string; namespace: string }): string {
  const base = `${ui.uiUrl}/namespaces/${encodeURIComponent(ui.namespace)}/workflows/${encodeURIComponent(record.workflowId)}`;
  return record.runId ? `${base}/${record.runId}/history` : base;
}

/**
 * A key that comes back with another body: nothing is launched. Says which top-level fields
 * differ (names only: keys are the principal's own, yet values are never echoed) and whether the
 * tool does, compared with the first body as the launch record keeps it. A record whose kept
 * body is not the one its digest was taken of cannot be compared field by field: it says so.
 */
export function keyReused(
  first: LaunchRecord,
  tool: string,
  body: Record<string, unknown>,
  digest: string,
): DossierError {
  const kept = first.input as Record<string, unknown> | null;
  const comparable =
    kept !== null && typeof kept === 'object' && bodyDigest(first.tool, kept) === first.bodyDigest;
  const fields = comparable ? differingFields(kept, body) : null;
  const toolDiffers = first.tool !== tool;
  const what = [
    ...(toolDiffers ? [`tool ${first.tool}`] : []),
    fields === null
      ? 'arguments that cannot be compared field by field'
      : fields.length
        ? `different ${fields.length === 1 ? 'field' : 'fields'} ${fields.join(', ')}`
        : [],
  ].flat();
  return new DossierError(
    'idempotency_key_reused',
    `idempotency_key "${first.key}" was already used at ${first.createdAt} for ${what.join(' and ')}; nothing was launched.`,
    'To reach the first launch, retry with exactly its arguments. For a new effect, choose a new idempotency_key.',
    {
      idempotency_key: first.key,
      first_tool: first.tool,
      first_body_digest: first.bodyDigest,
      this_tool: tool,
      this_body_digest: digest,
      tool_differs: toolDiffers,
      differing_fields: fields,
      ...(fields === null
        ? {
            differing_fields_unknown:
              'The first launch’s arguments were not kept in a form its body digest can be checked against, so which fields differ is unknown.',
          }
        : {}),
      first_launched_at: first.createdAt,
      workflow_id: first.workflowId,
    },
  );
}
