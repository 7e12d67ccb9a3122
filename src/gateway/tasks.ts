// MCP tasks (2025-11-25) on top of keyed launches: a task-augmented call
// creates (or attaches to) the launch and returns at once; the task's state is
// the launch's, read from the store; its result is exactly the reply the call
// would have given. Every task belongs to the principal who asked for it.
import { DossierError } from '../domain/errors.ts';
import { isFinished, type LaunchRecord, type Principal } from '../domain/types.ts';
import type { LaunchStore } from '../store/launches.ts';
import { expired, type TaskRecord, type TaskStore } from '../store/tasks.ts';
import { TOOLS_BY_NAME } from '../tools/catalog.ts';
import { isLaunchTool } from '../tools/contract.ts';
import type { CallResult } from './callResult.ts';
import type { LaunchService } from './launchService.ts';
import { launchPhase, pendingNote } from './launchReplies.ts';

export type TaskStatus = 'working' | 'input_required' | 'completed' | 'failed' | 'cancelled';

/** A task as MCP shows it. */
export interface TaskView {
  taskId: string;
  status: TaskStatus;
  statusMessage?: string;
  createdAt: string;
  lastUpdatedAt: string;
  ttl: number | null;
  pollInterval: number;
}

export const TASK_LIMITS = {
  /** ttl a client may ask for (ms); the default keeps a task as long as a week. */
  ttl: { default: 7 * 24 * 3_600_000, min: 60_000, max: 30 * 24 * 3_600_000 },
  pollIntervalMs: 1_000,
  listPage: 50,
};

const STATUS: Record<LaunchRecord['status'], TaskStatus> = {
  pending: 'working',
  running: 'working',
  succeeded: 'completed',
  failed: 'failed',
  interrupted: 'failed',
  cancelled: 'cancelled',
};

export function taskView(task: TaskRecord, launch: LaunchRecord): TaskView {
  const error = launch.error as { code?: string; message?: string } | null;
  const phase = (launch.progress as { phase?: string } | null)?.phase;
  const statusMessage = error?.message
    ? `${launch.status}: ${error.message}`
    : isFinished(launch.status)
      ? launch.status
      : launchPhase(launch) === 'pending'
        ? `pending: ${pendingNote(launch).message}`
        : phase
          ? `running: ${phase}`
          : undefined;
  return {
    taskId: task.task_id,
    status: STATUS[launch.status],
    ...(statusMessage ? { statusMessage } : {}),
    createdAt: task.created_at,
    // A task made for a launch that was already under way was updated no earlier than it was made.
    lastUpdatedAt: [task.created_at, launch.finishedAt ?? launch.createdAt].sort().at(-1)!,
    ttl: task.ttl_ms,
    pollInterval: task.poll_interval_ms,
  };
}

/** How the task service calls a tool as the gateway does (validation, approval, delivery). */
type CallTool = (caller: Principal, name: string, args: Record<string, unknown>) => Promise<CallResult>;

export class TaskService {
  constructor(
    private readonly deps: {
      tasks: TaskStore;
      launches: LaunchStore;
      launchService: LaunchService;
      callTool: CallTool;
    },
  ) {}

  /** A task-augmented tools/call: the launch is claimed (or attached to) and its task returned at once. */
  async create(
    caller: Principal,
    name: string,
    args: Record<string, unknown>,
    requestedTtl: number | undefined,
    call: CallTool = this.deps.callTool,
  ): Promise<TaskView> {
    const contract = TOOLS_BY_NAME.get(name);
    if (!contract || !isLaunchTool(contract)) {
      throw new DossierError(
        'invalid_params',
        `${name} does not run as a task (its execution.taskSupport is "forbidden"): call it without the task field.`,
        'Only launch tools (those that take an idempotency_key) run as tasks; tools/list shows execution.taskSupport.',
        { tool: name },
      );
    }
    const started = await call(caller, name, { ...args, wait_ms: 0 });
    if (!started.ok) throw DossierError.from(started.error);
    const workflowId = (started.value.launch as { workflow_id: string }).workflow_id;
    const ttl = Math.min(
      TASK_LIMITS.ttl.max,
      Math.max(TASK_LIMITS.ttl.min, requestedTtl ?? TASK_LIMITS.ttl.default),
    );
    const task = await this.deps.tasks.forLaunch({
      team: caller.team,
      principal: caller.principal,
      workflow_id: workflowId,
      tool: name,
      idempotency_key: String(args.idempotency_key),
      ttl_ms: ttl,
      poll_interval_ms: TASK_LIMITS.pollIntervalMs,
    });
    return taskView(task, (await this.deps.launches.byWorkflowId(workflowId))!);
  }

  async get(caller: Principal, taskId: string): Promise<TaskView> {
    const { task, launch } = await this.find(caller, taskId);
    return taskView(task, launch);
  }

  /** Waits until the task is terminal, then answers exactly what the call would have. */
  async result(caller: Principal, taskId: string, signal?: AbortSignal): Promise<CallResult> {
    for (;;) {
      const { task, launch } = await this.find(caller, taskId);
      if (isFinished(launch.status)) {
        // The same call again: a retry of a finished key, answered from the store with its delivery.
        return this.deps.callTool(caller, task.tool, {
          ...(launch.input as Record<string, unknown>),
          idempotency_key: task.idempotency_key,
          wait_ms: 0,
        });
      }
      if (signal?.aborted) throw new DossierError('cancelled', 'The request was cancelled.', 'Ask again.');
      await this.deps.launchService.await(caller, task.idempotency_key, { waitMs: 100_000 });
    }
  }

  async list(
    caller: Principal,
    cursor: string | undefined,
  ): Promise<{ tasks: TaskView[]; nextCursor?: string }> {
    const page = await this.deps.tasks.list(caller.team, caller.principal, {
      cursor,
      limit: TASK_LIMITS.listPage,
    });
    const tasks: TaskView[] = [];
    for (const task of page.items) {
      if (expired(task, Date.now())) continue;
      const launch = await this.deps.launches.byWorkflowId(task.workflow_id);
      if (launch) tasks.push(taskView(task, launch));
    }
    return { tasks, ...(page.nextCursor ? { nextCursor: page.nextCursor } : {}) };
  }

  /** Cancels the task's launch (cancel_launch in the caller's name); a terminal task is refused. */
  async cancel(caller: Principal, taskId: string): Promise<TaskView> {
    const { task, launch } = await this.find(caller, taskId);
    if (isFinished(launch.status)) {
      throw new DossierError(
        'invalid_params',
        `Task ${taskId} is already ${STATUS[launch.status]}; a terminal task cannot be cancelled.`,
        'tasks/result returns its outcome.',
        { task_id: taskId, status: STATUS[launch.status] },
      );
    }
    await this.deps.launchService.cancel(caller, task.idempotency_key, { waitMs: 10_000 });
    return this.get(caller, taskId);
  }

  private async find(caller: Principal, taskId: string) {
    const task = await this.deps.tasks.get(caller.team, caller.principal, taskId);
    const launch = task ? await this.deps.launches.byWorkflowId(task.workflow_id) : undefined;
    if (!task || !launch) {
      throw new DossierError(
        'not_found',
        `You have no task ${taskId} (tasks belong to the principal who created them, and expire after their ttl).`,
        'tasks/list shows your tasks.',
        { task_id: taskId },
      );
    }
    return { task, launch };
  }
}
