import { describe, expect, it } from 'vitest';
import type { LaunchRecord } from '../domain/types.ts';
import type { TaskRecord } from '../store/tasks.ts';
import { taskView } from './tasks.ts';

const task = (created_at: string) =>
  ({ task_id: 'tsk_1', created_at, ttl_ms: 60_000, poll_interval_ms: 1_000 }) as TaskRecord;
const launch = (createdAt: string, finishedAt: string | null, status: LaunchRecord['status']) =>
  ({ createdAt, finishedAt, status, error: null, progress: null }) as unknown as LaunchRecord;

describe('taskView', () => {
  it('never says a task was updated before it was made (a task for a launch already under way)', () => {
    const view = taskView(
      task('2026-12-01T10:00:05.000Z'),
      launch('2026-12-01T10:00:00.000Z', null, 'running'),
    );
    expect(view.lastUpdatedAt).toBe('2026-12-01T10:00:05.000Z');
    const done = taskView(
      task('2026-12-01T10:00:05.000Z'),
      launch('2026-12-01T10:00:00.000Z', '2026-12-01T10:00:09.000Z', 'succeeded'),
    );
    expect(done).toMatchObject({ status: 'completed', lastUpdatedAt: '2026-12-01T10:00:09.000Z' });
  });
});
