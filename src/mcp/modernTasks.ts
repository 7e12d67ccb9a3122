// Tasks in the stateless era: the `io.modelcontextprotocol/tasks` extension
// (SEP-2663) over the same launches and task rows as the handshake era's tasks.
// The server decides: a launch that outlives its call's wait becomes a task for
// a client that declared the extension. `tasks/get` carries the result inline
// once the launch has finished; `tasks/cancel` is cancel_launch in the caller's
// name; there is no tasks/list and no tasks/result. Every answer comes from the
// store, so any replica answers for any task, and only to its owner.
import {
  MissingRequiredClientCapabilityError,
  type Server,
  type ServerContext,
} from '@modelcontextprotocol/server';
import { z } from 'zod';
import { isFinished, type LaunchRecord, type Principal } from '../domain/types.ts';
import type { Gateway } from '../gateway/gateway.ts';
import type { TaskView } from '../gateway/tasks.ts';
import { toCallToolResult } from './tasks.ts';
import { asRpcError } from './surface.ts';
import { DossierError } from '../domain/errors.ts';

export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';

/** Whether this request's client declared the tasks extension (in its `_meta` capabilities). */
export function declaresTasks(server: Server): boolean {
  const extensions = (server.getClientCapabilities() as { extensions?: Record<string, unknown> } | undefined)
    ?.extensions;
  return !!extensions && typeof extensions === 'object' && TASKS_EXTENSION in extensions;
}

/** A launch's state as the extension names it: a tool that ran and reported an error still completed. */
function modernStatus(launch: LaunchRecord): 'working' | 'completed' | 'cancelled' {
  if (!isFinished(launch.status)) return 'working';
  return launch.status === 'cancelled' ? 'cancelled' : 'completed';
}

/** The task fields of the extension's wire shape (`ttlMs`, `pollIntervalMs`; never the v1 names). */
function taskFields(view: TaskView, launch: LaunchRecord) {
  return {
    taskId: view.taskId,
    status: modernStatus(launch),
    ...(view.statusMessage ? { statusMessage: view.statusMessage } : {}),
    createdAt: view.createdAt,
    lastUpdatedAt: view.lastUpdatedAt,
    ttlMs: view.ttl,
    pollIntervalMs: view.pollInterval,
  };
}

/** The CreateTaskResult answering a tools/call whose launch outlived its wait. */
export async function createTaskResult(
  gateway: Gateway,
  caller: Principal,
  name: string,
  args: Record<string, unknown>,
) {
  const view = await gateway.tasks.adopt(caller, name, args);
  const { launch } = await gateway.tasks.state(caller, view.taskId);
  return { resultType: 'task' as const, ...taskFields(view, launch) };
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
      const { view, launch, result } = await gateway.tasks.detail(await caller(ctx), params.taskId);
      const fields = taskFields(view, launch);
      if (!result || fields.status !== 'completed') return fields as never;
      if (result.ok) return { ...fields, result: toCallToolResult(result) } as never;
      // The finished launch's reply could not be delivered (a limit, the store): the JSON-RPC error, inline.
      const { code, message, data } = asRpcError(DossierError.from(result.error));
      return { ...fields, status: 'failed', error: { code, message, data } } as never;
    }),
  );
  server.setRequestHandler('tasks/update', { params: TaskUpdate }, (params, ctx) =>
    answering(async () => {
      negotiated();
      // Input the task does not wait for is ignored: nothing of a dossier task waits for input.
      await gateway.tasks.get(await caller(ctx), params.taskId);
      return {} as never;
    }),
  );
  server.setRequestHandler('tasks/cancel', { params: TaskRef }, (params, ctx) =>
    answering(async () => {
      negotiated();
      const who = await caller(ctx);
      const { launch } = await gateway.tasks.state(who, params.taskId);
      // Idempotent: a terminal task answers the same empty ack.
      if (!isFinished(launch.status)) await gateway.tasks.cancel(who, params.taskId);
      return {} as never;
    }),
  );
}
