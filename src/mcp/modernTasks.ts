// Tasks in the stateless era: the `io.modelcontextprotocol/tasks` extension
// (SEP-2663) over the same launches and task rows as the handshake era's tasks.
// The server decides: a launch that outlives its call's wait becomes a task for
// a client that declared the extension. `tasks/get` carries the result inline
// once the launch has finished; `tasks/cancel` is cancel_launch in the caller's
// name; there is no tasks/list and no tasks/result. Every answer comes from the
// store, so any replica answers for any task, and only to its owner. A capture
// that needs approval, for a client that can be asked, is a task that asks
// (input_required) until tasks/update carries the human's answer; nothing is
// claimed before.
import {
  inputRequired,
  MissingRequiredClientCapabilityError,
  type Server,
  type ServerContext,
} from '@modelcontextprotocol/server';
import { approvalForm, type ApprovalPlan, type ApprovalRequired } from '../gateway/approval.ts';
import { z } from 'zod';
import { isFinished, type LaunchRecord, type Principal } from '../domain/types.ts';
import type { Gateway } from '../gateway/gateway.ts';
import type { TaskView } from '../gateway/tasks.ts';
import { toCallToolResult } from './tasks.ts';
import { asRpcError } from './surface.ts';
import { DossierError } from '../domain/errors.ts';

export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';

/** The key of the approval form among a launch's input requests (MRTR and tasks alike). */
export const APPROVAL_INPUT = 'approval';

/** Whether this request's client declared the tasks extension (in its `_meta` capabilities). */
export function declaresTasks(server: Server): boolean {
  const extensions = (server.getClientCapabilities() as { extensions?: Record<string, unknown> } | undefined)
    ?.extensions;
  return !!extensions && typeof extensions === 'object' && TASKS_EXTENSION in extensions;
}

/**
 * A task's state as the extension names it: a tool that ran and reported an error still completed,
 * and so did a call whose human said no (its result says so); a question still open is input_required.
 */
function modernStatus(view: TaskView, launch: LaunchRecord | undefined) {
  if (!launch) return view.status === 'failed' ? 'completed' : view.status;
  if (!isFinished(launch.status)) return 'working';
  return launch.status === 'cancelled' ? 'cancelled' : 'completed';
}

/** The task fields of the extension's wire shape (`ttlMs`, `pollIntervalMs`; never the v1 names). */
function taskFields(view: TaskView, launch: LaunchRecord | undefined) {
  return {
    taskId: view.taskId,
    status: modernStatus(view, launch),
    ...(view.statusMessage ? { statusMessage: view.statusMessage } : {}),
    createdAt: view.createdAt,
    lastUpdatedAt: view.lastUpdatedAt,
    ttlMs: view.ttl,
    pollIntervalMs: view.pollInterval,
  };
}

/** The CreateTaskResult of a task made for this call (a launch that outlived its wait, or a question). */
async function created(gateway: Gateway, caller: Principal, view: TaskView) {
  const { launch } = await gateway.tasks.state(caller, view.taskId);
  return { resultType: 'task' as const, ...taskFields(view, launch) };
}

/** The CreateTaskResult answering a tools/call whose launch outlived its wait. */
export async function createTaskResult(
  gateway: Gateway,
  caller: Principal,
  name: string,
  args: Record<string, unknown>,
) {
  return created(gateway, caller, await gateway.tasks.adopt(caller, name, args));
}

/** The CreateTaskResult of a capture that asks its human first: the task waits for tasks/update. */
export async function askingTaskResult(
  gateway: Gateway,
  caller: Principal,
  name: string,
  args: Record<string, unknown>,
  question: ApprovalRequired,
) {
  return created(gateway, caller, await gateway.tasks.ask(caller, name, args, question));
}

const TaskRef = z.object({ taskId: z.string().min(1).max(256) }).passthrough();
const TaskUpdate = TaskRef.extend({ inputResponses: z.record(z.string(), z.unknown()).optional() });

/** Registers tasks/get, tasks/update and tasks/cancel, each refused to a client without the extension. */
export function installModernTasks(
  server: Server,
  gateway: Gateway,
  caller: (ctx: ServerContext) => Promise<Principal>,
  answering: <T>(fn: () => Promise<T>) => Promise<T>,
) {
  const negotiated = () => {
    if (!declaresTasks(server)) {
      throw new MissingRequiredClientCapabilityError(
        { requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } } as never },
        `tasks/* needs the ${TASKS_EXTENSION} extension in your request's clientCapabilities.extensions.`,
      );
    }
  };
  server.setRequestHandler('tasks/get', { params: TaskRef }, (params, ctx) =>
    answering(async () => {
      negotiated();
      const { view, launch, approval, result } = await gateway.tasks.detail(await caller(ctx), params.taskId);
      const fields = taskFields(view, launch);
      if (fields.status === 'input_required' && approval) {
        // The question, as the stateless era asks it; tasks/update carries the answer.
        const form = approvalForm(approval.plan as unknown as ApprovalPlan);
        return { ...fields, inputRequests: { [APPROVAL_INPUT]: inputRequired.elicit(form) } } as never;
      }
      if (!result || fields.status !== 'completed') return fields as never;
      // A refused question's reply, or the finished launch's: the call's own result, inline.
      if (result.ok || !launch) return { ...fields, result: toCallToolResult(result) } as never;
      // The finished launch's reply could not be delivered (a limit, the store): the JSON-RPC error, inline.
      const { code, message, data } = asRpcError(DossierError.from(result.error));
      return { ...fields, status: 'failed', error: { code, message, data } } as never;
    }),
  );
  server.setRequestHandler('tasks/update', { params: TaskUpdate }, (params, ctx) =>
    answering(async () => {
      negotiated();
      // Only the approval is asked of a task; an answer it does not wait for is ignored.
      // The SDK lifts inputResponses out of the params it validates, as for any retried request.
      const responses = ctx.mcpReq.inputResponses ?? params.inputResponses;
      const response = responses?.[APPROVAL_INPUT] as
        { action?: string; content?: { approve?: unknown } } | undefined;
      const human =
        response === undefined
          ? undefined
          : response.action === 'accept' && response.content?.approve === true
            ? 'approved'
            : 'declined';
      await gateway.tasks.answer(await caller(ctx), params.taskId, human);
      return {} as never;
    }),
  );
  server.setRequestHandler('tasks/cancel', { params: TaskRef }, (params, ctx) =>
    answering(async () => {
      negotiated();
      const who = await caller(ctx);
      const { launch } = await gateway.tasks.state(who, params.taskId);
      // Idempotent: a terminal task answers the same empty ack.
      if (!launch || !isFinished(launch.status)) await gateway.tasks.cancel(who, params.taskId);
      return {} as never;
    }),
  );
}
