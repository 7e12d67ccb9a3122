// The timeline of a launch whose first dispatch was lost with its worker: the
// history Temporal keeps for such a launch (the effect activity scheduled,
// picked up, timed out on its heartbeat, scheduled again, completed) becomes
// an interruption and a re-dispatch on the timeline, in time order.
import proto from '@temporalio/proto';
import { describe, expect, it } from 'vitest';
import type { LaunchRecord } from '../domain/types.ts';
import { launchTimeline } from './timeline.ts';

const E = proto.temporal.api.enums.v1.EventType;
const at = (s: number) => ({ seconds: 1_780_000_000 + s, nanos: 0 });
const iso = (s: number) => new Date((1_780_000_000 + s) * 1000).toISOString();
const effect = { activityType: { name: 'runEffect' }, taskQueue: { name: 'dossier-process' } };

const history = [
  { eventId: 1, eventType: E.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, eventTime: at(1) },
  {
    eventId: 5,
    eventType: E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
    eventTime: at(2),
    activityTaskScheduledEventAttributes: effect,
  },
  {
    eventId: 6,
    eventType: E.EVENT_TYPE_ACTIVITY_TASK_STARTED,
    eventTime: at(3),
    activityTaskStartedEventAttributes: { scheduledEventId: 5, identity: 'worker-a', attempt: 1 },
  },
  {
    eventId: 7,
    eventType: E.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT,
    eventTime: at(14),
    activityTaskTimedOutEventAttributes: {
      scheduledEventId: 5,
      failure: { message: 'activity Heartbeat timeout' },
    },
  },
  {
    eventId: 11,
    eventType: E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
    eventTime: at(15),
    activityTaskScheduledEventAttributes: { activityType: { name: 'readJournal' } },
  },
  {
    eventId: 15,
    eventType: E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
    eventTime: at(16),
    activityTaskScheduledEventAttributes: effect,
  },
  {
    eventId: 16,
    eventType: E.EVENT_TYPE_ACTIVITY_TASK_STARTED,
    eventTime: at(17),
    activityTaskStartedEventAttributes: { scheduledEventId: 15, identity: 'worker-b', attempt: 1 },
  },
  {
    eventId: 17,
    eventType: E.EVENT_TYPE_ACTIVITY_TASK_COMPLETED,
    eventTime: at(20),
    activityTaskCompletedEventAttributes: { scheduledEventId: 15 },
  },
] as unknown as proto.temporal.api.history.v1.IHistoryEvent[];

const record = {
  key: 'k1',
  tool: 'capture_process_scenario',
  status: 'succeeded',
  workflowId: 'wf',
  runId: 'run',
  evidenceId: 'ev_1',
  error: null,
  createdAt: iso(0),
  startedAt: iso(18),
  finishedAt: iso(19),
} as unknown as LaunchRecord;

describe('launchTimeline', () => {
  it('marks the lost dispatch as interrupted and the next as a re-dispatch, in time order', () => {
    const t = launchTimeline(record, history, iso(19), []);
    expect(t).toMatchObject({ dispatches: 2, interruptions: 1, status: 'succeeded' });
    expect(t.moments.map((m) => [m.kind, m.dispatch ?? null])).toEqual([
      ['claimed', null],
      ['workflow_started', null],
      ['dispatched', 1],
      ['picked_up', 1],
      ['interrupted', 1],
      ['redispatched', 2],
      ['picked_up', 2],
      ['effect_began', null],
      ['finished', null],
      ['retained', null],
      ['effect_returned', 2],
    ]);
    expect(t.moments.find((m) => m.kind === 'interrupted')!.detail).toBe('activity Heartbeat timeout');
  });

  it('a launch not started yet is its claim alone', () => {
    const pending = {
      ...record,
      status: 'pending',
      runId: null,
      startedAt: null,
      finishedAt: null,
      evidenceId: null,
    };
    const t = launchTimeline(pending as LaunchRecord, [], null, []);
    expect(t).toMatchObject({ status: 'running', dispatches: 0, interruptions: 0 });
    expect(t.moments.map((m) => m.kind)).toEqual(['claimed']);
  });
});
