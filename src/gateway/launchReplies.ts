// What a launch reply says about a launch record: its status in the brief's
// five words, and where it is in its life (`launch.phase`), so a launch that
// was claimed but never started says so and says what happens next.
import type { z } from 'zod';
import { isFinished, type LaunchRecord, type LaunchStatus } from '../domain/types.ts';
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

/** A launch record as every launch tool replies with it. */
export function launchReply(
  record: LaunchRecord,
  attached: boolean,
  ui: { uiUrl: string; namespace: string },
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
  return reply;
}

function uiUrl(record: LaunchRecord, ui: { uiUrl: string; namespace: string }): string {
  const base = `${ui.uiUrl}/namespaces/${encodeURIComponent(ui.namespace)}/workflows/${encodeURIComponent(record.workflowId)}`;
  return record.runId ? `${base}/${record.runId}/history` : base;
}
