// The application behind the MCP layer: validates a call against its contract,
// authorizes it, and routes it to launches or to the store. Transport-free, so
// HTTP, stdio and tests drive exactly the same code.
import type { Readable } from 'node:stream';
import { z } from 'zod';
import { DossierError, toToolError, type ToolError } from './domain/errors.ts';
import { replyBytes, type Ledger } from './evidence/ledger.ts';
import type { Principal } from './evidence/types.ts';
import { idempotencyKeySchema, waitMsSchema } from './launches/keys.ts';
import type { LaunchService, WaitOptions } from './launches/service.ts';
import { RateLimiter } from './rateLimit.ts';
import { TOOLS_BY_NAME } from './tools/catalog.ts';
import { isLaunchTool, type ToolContract } from './tools/contract.ts';

export interface CallOptions {
  onProgress?: WaitOptions['onProgress'];
}

export type CallResult = { ok: true; value: Record<string, unknown> } | { ok: false; error: ToolError };

const callSchemas = new Map<string, z.ZodObject>();

/** The schema a call is validated against: launch tools add the key and wait_ms. Unknown fields are refused. */
export function callSchema(contract: ToolContract): z.ZodObject {
  let schema = callSchemas.get(contract.name);
  if (!schema) {
    schema = isLaunchTool(contract)
      ? contract.input.extend({ idempotency_key: idempotencyKeySchema, wait_ms: waitMsSchema }).strict()
      : contract.input.strict();
    callSchemas.set(contract.name, schema);
  }
  return schema;
}

export class Gateway {
  constructor(
    private readonly deps: {
      launches: LaunchService;
      ledger: Ledger;
      namespace: string;
      uiUrl: string;
      /** Calls a minute per principal (default: unlimited). */
      rateLimitPerMinute?: number;
    },
  ) {
    this.limiter = deps.rateLimitPerMinute ? new RateLimiter(deps.rateLimitPerMinute) : undefined;
  }

  private readonly limiter: RateLimiter | undefined;

  async callTool(
    caller: Principal,
    name: string,
    args: unknown,
    opts: CallOptions = {},
  ): Promise<CallResult> {
    try {
      const wait = this.limiter?.take(`${caller.team}/${caller.principal}`) ?? 0;
      if (wait > 0) {
        throw new DossierError(
          'resource_constraint',
          `Too many calls from ${caller.principal}: the limit is ${this.deps.rateLimitPerMinute} a minute.`,
          `Retry after ${wait} ms; retries of launches with the same idempotency_key are always safe.`,
          { retry_after_ms: wait, limit_per_minute: this.deps.rateLimitPerMinute },
        );
      }
      const value = await this.dispatch(caller, name, args ?? {}, opts);
      const bytes = replyBytes(value);
      if (bytes > this.deps.ledger.replyBudgetBytes) {
        // Never cut a reply: say so, and how to ask for less.
        throw new DossierError(
          'resource_constraint',
          `The reply of ${name} would be ${bytes} bytes, over the reply budget of ${this.deps.ledger.replyBudgetBytes}.`,
          'Ask for less: a smaller limit, a narrower filter, or detail "summary".',
          { bytes, budget: this.deps.ledger.replyBudgetBytes },
        );
      }
      return { ok: true, value };
    } catch (err) {
      return { ok: false, error: toToolError(err) };
    }
  }

  completePrompt(caller: Principal, prompt: string, argument: string, typed: string) {
    return this.deps.ledger.complete(caller, prompt, argument, typed);
  }

  /** POST /artifacts: an authenticated, size-capped upload into the artifact store. */
  async uploadArtifact(caller: Principal, body: Readable, name: string | undefined): Promise<CallResult> {
    try {
      if (caller.role === 'viewer') {
        throw new DossierError(
          'forbidden',
          'Your role (viewer) may not upload artifacts.',
          'Ask an admin for an operator token.',
        );
      }
      return { ok: true, value: await this.deps.ledger.uploadArtifact(caller, body, name) };
    } catch (err) {
      return { ok: false, error: toToolError(err) };
    }
  }

  /** Launch replies carry their result within the reply budget: complete when it fits, else summary + continuation. */
  private async deliver(caller: Principal, reply: Record<string, unknown>, detail: Detail = 'summary') {
    if (reply.status === 'running' || !reply.evidence_id) return reply;
    return this.deps.ledger.deliver(caller, reply, detail);
  }

  private async dispatch(caller: Principal, name: string, args: unknown, opts: CallOptions) {
    const contract = TOOLS_BY_NAME.get(name);
    if (!contract) {
      throw new DossierError(
        'not_found',
        `There is no tool named "${name}".`,
        'Call tools/list for the tools this gateway serves.',
        {
          tool: name,
        },
      );
    }
    const input = parseInput(contract, args);
    authorize(caller, contract);
    const wait = (waitMs: number): WaitOptions => ({ waitMs, onProgress: opts.onProgress });
    const { launches, ledger } = this.deps;
    if (isLaunchTool(contract)) {
      const reply = await launches.startOrAttach(caller, contract, input, wait(input.wait_ms as number));
      return this.deliver(caller, { ...reply }, input.detail as Detail | undefined);
    }
    const i = input as never;
    switch (name) {
      case 'get_launch':
        return this.deliver(caller, { ...(await launches.get(caller, input.idempotency_key as string)) });
      case 'await_launch':
        return this.deliver(caller, {
          ...(await launches.await(caller, input.idempotency_key as string, wait(input.wait_ms as number))),
        });
      case 'cancel_launch':
        return { ...(await launches.cancel(caller, input.idempotency_key as string, wait(10_000))) };
      case 'list_launches':
        return launches.list(caller, i);
      case 'inspect_analysis_view':
        return ledger.inspect(caller, input.evidence_id as string, input.view as never);
      case 'get_evidence':
        return ledger.get(caller, input.evidence_id as string);
      case 'list_evidence': {
        const { workflow_id: workflowId, ...rest } = input as { workflow_id?: string; limit: number };
        return ledger.list(caller, { ...rest, workflowId });
      }
      case 'record_unknown':
        return ledger.recordUnknown(caller, i);
      case 'update_unknown':
        return ledger.updateUnknown(caller, i);
      case 'list_unknowns':
        return ledger.listUnknowns(caller, i);
      case 'import_evidence_bundle':
        return ledger.importBundle(caller, input.path as string);
      case 'register_artifact':
        return ledger.registerArtifact(caller, input.path as string, input.name as string | undefined);
      case 'list_artifacts':
        return ledger.listArtifacts(caller, i);
      case 'whoami':
        return { ...caller, namespace: this.deps.namespace, ui_url: this.deps.uiUrl };
      default:
        throw new Error(`tool ${name} is in the catalog but has no handler`);
    }
  }
}

type Detail = 'complete' | 'summary';

function parseInput(contract: ToolContract, args: unknown): Record<string, unknown> {
  const parsed = callSchema(contract).safeParse(args);
  if (parsed.success) return parsed.data as Record<string, unknown>;
  const issues = parsed.error.issues.slice(0, 20).map((i) => ({
    path: i.path.join('.') || '(arguments)',
    message: i.message,
  }));
  throw new DossierError(
    'invalid_params',
    `Invalid arguments for ${contract.name}: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`,
    'Fix the named fields and call again; tools/list shows the input schema with every default and limit. Nothing was run.',
    { issues },
  );
}

function authorize(caller: Principal, contract: ToolContract) {
  const changesWorld = isLaunchTool(contract) || !contract.effect.readOnly;
  if (changesWorld && caller.role === 'viewer') {
    throw new DossierError(
      'forbidden',
      `Your role (viewer) may not call ${contract.name}, which changes the world.`,
      'Ask an admin for an operator token.',
      { role: caller.role, tool: contract.name },
    );
  }
}
