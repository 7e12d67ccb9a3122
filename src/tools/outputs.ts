// The JSON Schemas tools/list publishes, made portable and small: every agent
// session pays for them in context. Input schemas come from the contracts'
// call schemas with every bound and default; output schemas only where they
// tell an agent something (the launch reply), compact, with nothing a
// single-type dialect cannot express.
import { z } from 'zod';
import { callSchema, isLaunchTool, type ToolContract } from './contract.ts';

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
  /** While it runs (pending or started): what to do next to follow it. */
  next: z.string().optional(),
});

/**
 * The launch reply as published: every field optional (a refused call answers
 * `{error}` alone) and open to more, so each reply shape validates against it:
 * running, finished with its result complete or summarized, failed, refused.
 */
const LAUNCH_OUTPUT = {
  type: 'object',
  properties: {
    status: { type: 'string', enum: ['succeeded', 'failed', 'running', 'interrupted', 'cancelled'] },
    launch: { type: 'object' },
    evidence_id: { type: 'string' },
    summary: { type: 'object' },
    result: { type: 'object' },
    continuation: { type: 'object', description: 'a view for inspect_analysis_view' },
    error: { type: 'object' },
  },
} as const;

/**
 * The published output schema of a tool: the launch reply for launches, none
 * for the rest (MCP makes it optional; a generic `{error}` envelope would tell
 * an agent nothing its description does not, at ~800 B a tool).
 */
export function outputJsonSchema(contract: ToolContract): Record<string, unknown> | undefined {
  return isLaunchTool(contract) ? LAUNCH_OUTPUT : undefined;
}

/** The call schema as tools/list publishes it: every bound and default, in portable JSON Schema. */
export function inputJsonSchema(contract: ToolContract): Record<string, unknown> {
  const schema = z.toJSONSchema(callSchema(contract), { io: 'input', unrepresentable: 'any' });
  return portable(schema) as Record<string, unknown>;
}

/** Keywords whose value is one schema, a list of schemas, or a map of them. */
const ONE = ['items', 'additionalProperties', 'not', 'propertyNames', 'contains'];
const LIST = ['anyOf', 'oneOf', 'allOf', 'prefixItems'];
const MAP = ['properties', 'patternProperties', '$defs'];

const isEmpty = (v: unknown) => typeof v === 'object' && v !== null && Object.keys(v).length === 0;

/**
 * A JSON Schema that dialects with one type per schema accept, without what
 * says nothing: no `$schema` (2020-12 is MCP's default), no schema-less
 * `additionalProperties: {}` (the default anyway), a type list becomes anyOf
 * branches of one type each.
 */
export function portable(node: unknown): unknown {
  if (typeof node !== 'object' || node === null || Array.isArray(node)) return node;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(node)) {
    if (key === '$schema') continue;
    if (key === 'additionalProperties' && isEmpty(value)) continue;
    // {type: "string"} alone: every key of a JSON object is a string already.
    if (key === 'propertyNames' && JSON.stringify(value) === '{"type":"string"}') continue;
    if (ONE.includes(key)) out[key] = portable(value);
    else if (LIST.includes(key) && Array.isArray(value)) out[key] = value.map(portable);
    else if (MAP.includes(key) && typeof value === 'object' && value !== null)
      out[key] = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, portable(v)]));
    else out[key] = value;
  }
  if (Array.isArray(out.type)) {
    const { type, ...rest } = out;
    return { ...rest, anyOf: (type as string[]).map((t) => ({ type: t })) };
  }
  return out;
}
