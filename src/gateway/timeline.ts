// A launch's life as one ordered list of moments, for the launch timeline View
// (src/views): when its key was claimed, when its workflow started, each
// dispatch of its effect (a re-dispatch when a worker was lost before the
// effect began), when the effect began (the journal), interruptions, the
// outcome, and when its Evidence was retained. Read from the caller's own
// launch record, that record's workflow history and the team's Evidence: never
// anything another principal or team could not already read.
import proto from '@temporalio/proto';
import type { LaunchRecord } from '../domain/types.ts';

const E = proto.temporal.api.enums.v1.EventType;
type HistoryEvent = proto.temporal.api.history.v1.IHistoryEvent;

export interface TimelineMoment {
  at: string;
  kind:
    | 'claimed'
    | 'workflow_started'
    | 'dispatched'
    | 'redispatched'
    | 'picked_up'
    | 'effect_began'
    | 'interrupted'
    | 'cancel_requested'
    | 'effect_returned'
    | 'finished'
    | 'retained';
  label: string;
  /** The dispatch of the effect this moment belongs to (1 for the first). */
  dispatch?: number;
  detail?: string;
}

export interface LaunchTimeline {
  idempotency_key: string;
  tool: string;
  status: string;
  workflow_id: string;
  run_id: string | null;
  dispatches: number;
  interruptions: number;
  moments: TimelineMoment[];
  /** What the timeline could not show, and why. */
  limitations: string[];
}

const EFFECT_ACTIVITY = 'runEffect';

function iso(ts: proto.google.protobuf.ITimestamp | null | undefined): string | null {
  if (!ts?.seconds) return null;
  const s = ts.seconds as unknown as { toNumber?: () => number };
  const seconds = typeof s === 'object' && s.toNumber ? s.toNumber() : Number(ts.seconds);
  return new Date(seconds * 1000 + Math.floor((ts.nanos ?? 0) / 1e6)).toISOString();
}

const idOf = (id: unknown) => String((id as { toString(): string } | null | undefined) ?? '');

/** The moments a workflow history adds: its start and every dispatch of the effect activity. */
export function historyMoments(events: readonly HistoryEvent[]): TimelineMoment[] {
  const moments: TimelineMoment[] = [];
  const dispatchOf = new Map<string, number>(); // scheduled event id → dispatch number
  let dispatches = 0;
  for (const event of events) {
    const at = iso(event.eventTime);
    if (!at) continue;
    const type = event.eventType;
    if (type === E.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED) {
      moments.push({ at, kind: 'workflow_started', label: 'Workflow started' });
    } else if (type === E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED) {
      const attrs = event.activityTaskScheduledEventAttributes;
      if (attrs?.activityType?.name !== EFFECT_ACTIVITY) continue;
      dispatchOf.set(idOf(event.eventId), ++dispatches);
      const queue = attrs.taskQueue?.name ?? '';
      moments.push(
        dispatches === 1
          ? { at, kind: 'dispatched', label: 'Effect dispatched', dispatch: 1, detail: queue }
          : {
              at,
              kind: 'redispatched',
              label: `Re-dispatched (dispatch ${dispatches})`,
              dispatch: dispatches,
              detail: 'the journal proved the effect had not begun',
            },
      );
    } else {
      const moment = activityMoment(event, at, dispatchOf);
      if (moment) moments.push(moment);
    }
  }
  return moments;
}

function activityMoment(
  event: HistoryEvent,
  at: string,
  dispatchOf: Map<string, number>,
): TimelineMoment | null {
  const type = event.eventType;
  const attrs =
    event.activityTaskStartedEventAttributes ??
    event.activityTaskCompletedEventAttributes ??
    event.activityTaskFailedEventAttributes ??
    event.activityTaskTimedOutEventAttributes ??
    event.activityTaskCancelRequestedEventAttributes ??
    event.activityTaskCanceledEventAttributes;
  const dispatch = dispatchOf.get(idOf(attrs?.scheduledEventId));
  if (dispatch === undefined) return null;
  if (type === E.EVENT_TYPE_ACTIVITY_TASK_STARTED) {
    const identity = event.activityTaskStartedEventAttributes?.identity ?? '';
    return { at, kind: 'picked_up', label: 'Picked up by a worker', dispatch, detail: identity };
  }
  if (type === E.EVENT_TYPE_ACTIVITY_TASK_COMPLETED)
    return { at, kind: 'effect_returned', label: 'Effect returned', dispatch };
  if (type === E.EVENT_TYPE_ACTIVITY_TASK_FAILED || type === E.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT) {
    const failure =
      event.activityTaskFailedEventAttributes?.failure ?? event.activityTaskTimedOutEventAttributes?.failure;
    return {
      at,
      kind: 'interrupted',
      label: type === E.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT ? 'Interrupted: worker lost' : 'Interrupted',
      dispatch,
      detail: (failure?.cause?.message || failure?.message || '').slice(0, 300),
    };
  }
  if (type === E.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED)
    return { at, kind: 'cancel_requested', label: 'Cancel requested', dispatch };
  return null;
}

/** The whole timeline of one launch: its record's moments merged with its history's, in time order. */
export function launchTimeline(
  record: LaunchRecord,
  events: readonly HistoryEvent[],
  retainedAt: string | null,
  limitations: string[],
): LaunchTimeline {
  const moments: TimelineMoment[] = [
    { at: record.createdAt, kind: 'claimed', label: 'Key claimed', detail: record.key },
    ...historyMoments(events),
  ];
  if (record.startedAt)
    moments.push({
      at: record.startedAt,
      kind: 'effect_began',
      label: 'Effect began (journal)',
      detail: 'from here on the launch is never dispatched again',
    });
  if (record.finishedAt) {
    const error = record.error as { code?: string; message?: string } | null;
    moments.push({
      at: record.finishedAt,
      kind: 'finished',
      label: `Finished: ${record.status}`,
      ...(error ? { detail: `${error.code ?? 'error'}: ${error.message ?? ''}`.slice(0, 300) } : {}),
    });
  }
  if (retainedAt && record.evidenceId)
    moments.push({ at: retainedAt, kind: 'retained', label: 'Evidence retained', detail: record.evidenceId });
  moments.sort((a, b) => a.at.localeCompare(b.at));
  return {
    idempotency_key: record.key,
    tool: record.tool,
    status: record.status === 'pending' ? 'running' : record.status,
    workflow_id: record.workflowId,
    run_id: record.runId,
    dispatches: moments.filter((m) => m.kind === 'dispatched' || m.kind === 'redispatched').length,
    interruptions: moments.filter((m) => m.kind === 'interrupted').length,
    moments,
    limitations,
  };
}
