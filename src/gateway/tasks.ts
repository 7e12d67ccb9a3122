// MCP tasks (2025-11-25) on top of keyed launches: a task-augmented call
// creates (or attaches to) the launch and returns at once; the task's state is
// the launch's, read from the store; its result is exactly the reply the call
// would have given. Every task belongs to the principal who asked for it.
import { DossierError } from '../domain/errors.ts';
import { isFinished, type LaunchRecord, type Principal } from '../domain/types.ts';
import type { LaunchStore } from '../store/launches.ts';
import { expired, type TaskRecord, type TaskStore } from '../store/tasks.ts';
import type { TaskApproval, TaskApprovalStore } from '../store/taskApprovals.ts';
import type { ApprovalPlan, AskHuman } from './approval.ts';
import { TOOLS_BY_NAME } from '../tools/catalog.ts';
import { isLaunchTool } from '../tools/contract.ts';
import type { CallResult } from './callResult.ts';
import type { LaunchService } from './launchService.ts';
import { refuseViewer } from './roles.ts';
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
  /** Questions one principal may leave unanswered at once (each holds its call's arguments). */
  openQuestions: 256,
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
type CallTool = (
  caller: Principal,
  name: string,
  args: Record<string, unknown>,
  opts?: { askHuman?: AskHuman },
) => Promise<CallResult>;

/**
 * What a task id stands for: a launch, or a question to a human before one (an approval task of
 * the stateless era, `approval`; its `launch` once approved and claimed).
 */
type Held =
  | { task: TaskRecord; launch: LaunchRecord; approval?: TaskApproval }
  | { task: TaskRecord; launch?: undefined; approval: TaskApproval };

export class TaskService {
  constructor(
    private readonly deps: {
      tasks: TaskStore;
      approvals: TaskApprovalStore;
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
    return this.adopt(caller, name, args, requestedTtl);
  }

  /**
   * The task of a launch this call already claimed (or attached to): the stateless era's server
   * decides to make one when a launch outlives its wait. The same task on every later request.
   */
  async adopt(
    caller: Principal,
    name: string,
    args: Record<string, unknown>,
    requestedTtl?: number,
  ): Promise<TaskView> {
    const key = String(args.idempotency_key);
    const launch = await this.deps.launches.get(caller.team, caller.principal, key);
    if (!launch) throw new DossierError('internal', `No launch holds key ${key}.`, 'Call again.');
    const ttl = Math.min(
      TASK_LIMITS.ttl.max,
      Math.max(TASK_LIMITS.ttl.min, requestedTtl ?? TASK_LIMITS.ttl.default),
    );
    const task = await this.deps.tasks.forLaunch({
      team: caller.team,
      principal: caller.principal,
      workflow_id: launch.workflowId,
      tool: name,
      idempotency_key: key,
      ttl_ms: ttl,
      poll_interval_ms: TASK_LIMITS.pollIntervalMs,
    });
    return taskView(task, (await this.deps.launches.byWorkflowId(launch.workflowId))!);
  }

  /**
   * A task with its launch, and once the launch has finished, exactly the reply the call would
   * have given (a retry of a finished key, answered from the store).
   */
  async detail(
    caller: Principal,
    taskId: string,
  ): Promise<{ view: TaskView; launch?: LaunchRecord; approval?: TaskApproval; result?: CallResult }> {
    const held = await this.state(caller, taskId);
    const { task, launch, approval } = held;
    if (!launch) {
      // A question that was answered no (or refused otherwise): the call's reply is its error.
      const reply = approval.answer === 'refused' ? approval.reply : undefined;
      return { ...held, ...(reply ? { result: { ok: false as const, error: reply } } : {}) };
    }
    if (!isFinished(launch.status)) return held;
    const result = await this.deps.callTool(caller, task.tool, {
      ...(launch.input as Record<string, unknown>),
      idempotency_key: task.idempotency_key,
      wait_ms: 0,
    });
    return { ...held, result };
  }

  async get(caller: Principal, taskId: string): Promise<TaskView> {
    return (await this.state(caller, taskId)).view;
  }

  /** A task of the caller's, as MCP shows it, with the launch (or the question) behind it. */
  async state(caller: Principal, taskId: string): Promise<Held & { view: TaskView }> {
    const held = await this.find(caller, taskId);
    return { ...held, view: held.launch ? taskView(held.task, held.launch) : approvalView(held.approval) };
  }

  /**
   * A task that asks the caller's human before its launch is claimed (the stateless era, for a
   * client that declared the tasks extension): the same task for the same call while it waits.
   */
  async ask(
    caller: Principal,
    name: string,
    args: Record<string, unknown>,
    question: { plan: ApprovalPlan; bodyDigest: string },
  ): Promise<TaskView> {
    const approval = await this.deps.approvals.ask(
      {
        team: caller.team,
        principal: caller.principal,
        tool: name,
        idempotency_key: String(args.idempotency_key),
        body_digest: question.bodyDigest,
        arguments: args,
        plan: question.plan as unknown as Record<string, unknown>,
        ttl_ms: TASK_LIMITS.ttl.default,
        poll_interval_ms: TASK_LIMITS.pollIntervalMs,
      },
      TASK_LIMITS.openQuestions,
    );
    if (approval === 'full') {
      throw new DossierError(
        'resource_constraint',
        `You have ${TASK_LIMITS.openQuestions} approval questions waiting for an answer; nothing was asked or claimed.`,
        'Answer or cancel some (tasks/update, tasks/cancel), or let them expire, then call again.',
        { limit: TASK_LIMITS.openQuestions },
      );
    }
    return approvalView(approval);
  }

  /**
   * The human's answer to a task's question (tasks/update): recorded once, then the launch is
   * claimed as the call would have claimed it. A task that asks nothing ignores it.
   */
  async answer(caller: Principal, taskId: string, human: 'approved' | 'declined' | undefined) {
    // A viewer token of the principal that asked may read the task, not spend its question.
    refuseViewer(caller, 'answer an approval question (tasks/update)', {
      role: caller.role,
      task_id: taskId,
    });
    const { approval } = await this.find(caller, taskId);
    if (!approval || approval.answer !== null || !human) return;
    if (!(await this.deps.approvals.answer(taskId, human === 'approved' ? 'approved' : 'refused'))) return;
    await this.claimAnswered(caller, approval, human);
  }

  /** Claims the launch of an answered question; a refusal (declined, key reused) becomes its reply. */
  private async claimAnswered(caller: Principal, a: TaskApproval, human: 'approved' | 'declined') {
    const reply = await this.deps.callTool(
      caller,
      a.tool,
      { ...a.arguments, wait_ms: 0 },
      { askHuman: async () => human },
    );
    if (!reply.ok) await this.deps.approvals.refuse(a.task_id, reply.error);
  }

  /** Waits until the task is terminal, then answers exactly what the call would have. */
  async result(caller: Principal, taskId: string, signal?: AbortSignal): Promise<CallResult> {
    for (;;) {
      const { launch, result } = await this.detail(caller, taskId);
      if (result) return result;
      if (signal?.aborted) throw new DossierError('cancelled', 'The request was cancelled.', 'Ask again.');
      if (launch) await this.deps.launchService.await(caller, launch.key, { waitMs: 100_000 });
      else await new Promise((resolve) => setTimeout(resolve, TASK_LIMITS.pollIntervalMs));
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
    // As cancel_launch: a viewer token of the principal that made the task may not end it.
    refuseViewer(caller, 'cancel a task (tasks/cancel), which ends its launch', {
      role: caller.role,
      task_id: taskId,
    });
    const { task, launch, approval } = await this.find(caller, taskId);
    if (!launch) {
      // A question not yet answered is withdrawn: nothing was claimed, nothing runs.
      if (approval.answer === null) await this.deps.approvals.answer(taskId, 'cancelled');
      return this.get(caller, taskId);
    }
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

  private async find(caller: Principal, taskId: string): Promise<Held> {
    const task = await this.deps.tasks.get(caller.team, caller.principal, taskId);
    const launch = task ? await this.deps.launches.byWorkflowId(task.workflow_id) : undefined;
    if (task && launch) return { task, launch };
    const approval = await this.approvalOf(caller, taskId);
    if (approval) return approval;
    throw new DossierError(
      'not_found',
      `You have no task ${taskId} (tasks belong to the principal who created them, and expire after their ttl).`,
      'Use the taskId the tools/call that made the task answered with; in a session (the handshake era), tasks/list shows your tasks.',
      { task_id: taskId },
    );
  }

  /** An approval task, with its launch once approved (claimed again here if a gateway died in between). */
  private async approvalOf(caller: Principal, taskId: string): Promise<Held | undefined> {
    let approval = await this.deps.approvals.get(caller.team, caller.principal, taskId);
    if (!approval || expiredApproval(approval, Date.now())) return undefined;
    const launchOf = () => this.deps.launches.get(caller.team, caller.principal, approval!.idempotency_key);
    let launch = approval.answer === 'approved' ? await launchOf() : undefined;
    if (approval.answer === 'approved' && launch?.bodyDigest !== approval.body_digest) {
      await this.claimAnswered(caller, approval, 'approved');
      approval = (await this.deps.approvals.get(caller.team, caller.principal, taskId))!;
      launch = await launchOf();
      if (launch?.bodyDigest !== approval.body_digest) launch = undefined;
    }
    const task: TaskRecord = {
      task_id: approval.task_id,
      team: approval.team,
      principal: approval.principal,
      workflow_id: launch?.workflowId ?? '',
      tool: approval.tool,
      idempotency_key: approval.idempotency_key,
      ttl_ms: approval.ttl_ms,
      poll_interval_ms: approval.poll_interval_ms,
      created_at: approval.created_at,
    };
    return launch ? { task, launch, approval } : { task, approval };
  }
}

/** A task that waits for (or got) its human's answer, before any launch. */
function approvalView(a: TaskApproval): TaskView {
  const status: TaskStatus =
    a.answer === null ? 'input_required' : a.answer === 'cancelled' ? 'cancelled' : 'failed';
  const statusMessage =
    a.answer === null
      ? `waiting for a human to approve running ${String(a.plan.executable)}; nothing is claimed until then`
      : a.answer === 'cancelled'
        ? 'cancelled before it was approved; nothing ran'
        : `not run: ${a.reply?.message ?? a.answer}`;
  return {
    taskId: a.task_id,
    status,
    statusMessage,
    createdAt: a.created_at,
    lastUpdatedAt: a.answered_at ?? a.created_at,
    ttl: a.ttl_ms,
    pollInterval: a.poll_interval_ms,
  };
}

function expiredApproval(a: TaskApproval, at: number): boolean {
  return a.ttl_ms !== null && Date.parse(a.created_at) + a.ttl_ms < at;
}
