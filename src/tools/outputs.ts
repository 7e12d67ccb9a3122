// Output schemas. A reply is either the tool's result or `{error}` in the one
// error shape (src/domain/errors.ts), so every schema admits an optional `error`.
import { z } from 'zod';
import { ERROR_CODES } from '../domain/errors.ts';
import { callSchema, isLaunchTool, type ToolContract } from './contract.ts';

export const toolErrorSchema = z.object({
  code: z.enum(Object.keys(ERROR_CODES) as [string, ...string[]]),
  category: z.string(),
  message: z.string(),
  retryable: z.boolean(),
  remediation: z.string(),
  details: z.record(z.string(), z.unknown()),
});

/** What every launch reply carries (docs/idempotency.md); more fields are welcome. */
export const launchReplySchema = z.looseObject({
  status: z.enum(['succeeded', 'failed', 'running', 'interrupted', 'cancelled']),
  launch: z.looseObject({
    idempotency_key: z.string(),
    workflow_id: z.string(),
    run_id: z.string().nullable(),
    tool: z.string(),
    principal: z.string(),
    attached: z.boolean(),
    /**
     * Where the launch is: `pending` (its key is claimed but Temporal did not answer, so its
     * workflow is not started and nothing has run; the gateway starts it once Temporal answers),
     * `started` (its workflow runs), `finished` (its outcome is recorded).
     */
    phase: z.enum(['pending', 'started', 'finished']),
    /** Pending only: if it has not started by then, it is recorded failed and never runs. */
    start_by: z.string().optional(),
    started_at: z.string(),
    finished_at: z.string().optional(),
    ui_url: z.string(),
  }),
  evidence_id: z.string().optional(),
  summary: z.record(z.string(), z.unknown()).optional(),
  progress: z.record(z.string(), z.unknown()).optional(),
  error: z.record(z.string(), z.unknown()).optional(),
  /** Pending only: what the launch is and what happens to it. */
  message: z.string().optional(),
  /** Pending only: what to do meanwhile. */
  next: z.string().optional(),
});

/** A launch tool's output: its reply, or `{error}` when the call itself was refused. */
const launchOutputSchema = launchReplySchema.partial().extend({ error: toolErrorSchema.optional() });

const genericReplySchema = z.looseObject({ error: toolErrorSchema.optional() });

/** list_launches: a page of launch replies. */
const launchListSchema = z.looseObject({
  launches: z.array(launchReplySchema).optional(),
  next_cursor: z.string().nullable().optional(),
  error: toolErrorSchema.optional(),
});

const LAUNCH_REPLY_TOOLS = new Set(['get_launch', 'await_launch', 'cancel_launch']);

export function outputSchemaFor(contract: ToolContract) {
  if (contract.name === 'list_launches') return launchListSchema;
  return isLaunchTool(contract) || LAUNCH_REPLY_TOOLS.has(contract.name)
    ? launchOutputSchema
    : genericReplySchema;
}

export function inputJsonSchema(contract: ToolContract) {
  return z.toJSONSchema(callSchema(contract), { io: 'input', unrepresentable: 'any' });
}

export function outputJsonSchema(contract: ToolContract) {
  return z.toJSONSchema(outputSchemaFor(contract), { io: 'output', unrepresentable: 'any' });
}
