// MCP tasks (2025-11-25, experimental in the SDK) and the protocol-level
// idempotency key (SEP-3182, draft) as JSON-RPC: a thin translation to the
// gateway's task service. tasks/* requests are answered from the store, so any
// replica, after any restart, answers for any task; each only to its owner.
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  CallToolRequestSchema,
  CancelTaskRequestSchema,
  ElicitResultSchema,
  GetTaskPayloadRequestSchema,
  GetTaskRequestSchema,
  ListTasksRequestSchema,
  RELATED_TASK_META_KEY,
} from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { DossierError } from '../domain/errors.ts';
import type { Principal } from '../domain/types.ts';
import { approvalForm, type AskHuman } from '../gateway/approval.ts';
import type { Gateway } from '../gateway/gateway.ts';
import { toCallToolResult } from '../gateway/callResult.ts';

/** tools/call as dossier reads it: the SDK's request plus SEP-3182's optional `idempotencyKey`. */
export const CallToolWithKeySchema = CallToolRequestSchema.extend({
  params: CallToolRequestSchema.shape.params.extend({
    idempotencyKey: z.string().optional(),
  }),
});

/** What the server advertises for tasks and for the protocol-level key. */
export const TASK_CAPABILITIES = {
  tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } },
};

/** Where the gateway carries a stateless tools/call's params.idempotencyKey past the SDK (mcpEndpoint.ts). */
export const PROTOCOL_KEY_META = 'dev.dossier/idempotencyKey';

/**
 * The arguments a call carries once the protocol-level key is folded in: the
 * key may come in params (`idempotencyKey`) or in the arguments
 * (`idempotency_key`), with the same meaning; both, and different, is refused.
 */
export function withProtocolKey(
  args: Record<string, unknown> | undefined,
  protocolKey: unknown,
  isLaunch: boolean,
): Record<string, unknown> {
  const out = { ...(args ?? {}) };
  // null is no key; other tools are idempotent already.
  if (protocolKey === undefined || protocolKey === null || !isLaunch) return out;
  if (typeof protocolKey !== 'string')
    throw new DossierError(
      'invalid_params',
      `The request's idempotencyKey is ${Array.isArray(protocolKey) ? 'a list' : `a ${typeof protocolKey}`}, not a string.`,
      'Send params.idempotencyKey as a string (1-128 characters of A-Z a-z 0-9 . _ : -), or the key as the idempotency_key argument.',
      { idempotencyKey_type: Array.isArray(protocolKey) ? 'array' : typeof protocolKey },
    );
  if (out.idempotency_key !== undefined && out.idempotency_key !== protocolKey) {
    throw new DossierError(
      'invalid_params',
      `The request's idempotencyKey (${JSON.stringify(protocolKey)}) and the idempotency_key argument (${JSON.stringify(out.idempotency_key)}) differ.`,
      'Send the key once: in params.idempotencyKey or as the idempotency_key argument (or the same value in both).',
      { idempotencyKey: protocolKey, idempotency_key: out.idempotency_key },
    );
  }
  out.idempotency_key = protocolKey;
  return out;
}

/** A gateway answer as a tools/call result (the same for a direct call and for tasks/result). */
export { toCallToolResult } from '../gateway/callResult.ts';

/** Whether the client declared form elicitation (an empty capability is the form mode of earlier revisions). */
export function canAskHuman(server: Server): boolean {
  const elicitation = server.getClientCapabilities()?.elicitation as Record<string, unknown> | undefined;
  return !!elicitation && (Object.keys(elicitation).length === 0 || !!elicitation.form);
}

/** How long a human has to answer the approval form; past it nothing runs. */
export const APPROVAL_TIMEOUT_MS = 300_000;

/** Asks the client's human through form elicitation, when the client declared it can be asked. */
export function askHumanVia(
  server: Server,
  send: (request: never, schema: never, options: { timeout: number }) => Promise<unknown>,
): AskHuman | undefined {
  if (!canAskHuman(server)) return undefined;
  return async (plan) => {
    const answer = (await send(
      { method: 'elicitation/create', params: approvalForm(plan) } as never,
      ElicitResultSchema as never,
      { timeout: APPROVAL_TIMEOUT_MS },
    ).catch(() => ({ action: 'unanswered' }))) as { action: string; content?: { approve?: unknown } };
    if (answer.action === 'unanswered') return 'unanswered';
    return answer.action === 'accept' && answer.content?.approve === true ? 'approved' : 'declined';
  };
}

/** Registers tasks/get, tasks/result, tasks/list and tasks/cancel. */
export function installTaskHandlers(
  server: Server,
  gateway: Gateway,
  admit: (authExtra: Record<string, unknown> | undefined) => Promise<Principal>,
  fail: (err: unknown) => never,
) {
  const run = async <T>(fn: () => Promise<T>): Promise<T> => {
    try {
      return await fn();
    } catch (err) {
      return fail(err);
    }
  };
  server.setRequestHandler(GetTaskRequestSchema, async (request, extra) => {
    const caller = await admit(extra.authInfo?.extra);
    return run(() => gateway.tasks.get(caller, request.params.taskId));
  });
  server.setRequestHandler(GetTaskPayloadRequestSchema, async (request, extra) => {
    const caller = await admit(extra.authInfo?.extra);
    const result = await run(() => gateway.tasks.result(caller, request.params.taskId, extra.signal));
    return {
      ...toCallToolResult(result),
      _meta: { [RELATED_TASK_META_KEY]: { taskId: request.params.taskId } },
    };
  });
  server.setRequestHandler(ListTasksRequestSchema, async (request, extra) => {
    const caller = await admit(extra.authInfo?.extra);
    return run(() => gateway.tasks.list(caller, request.params?.cursor));
  });
  server.setRequestHandler(CancelTaskRequestSchema, async (request, extra) => {
    const caller = await admit(extra.authInfo?.extra);
    return run(() => gateway.tasks.cancel(caller, request.params.taskId));
  });
}
