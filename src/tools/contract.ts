// One contract object per tool: the single source from which MCP registration,
// annotations, input validation, workflow routing, search attributes and
// docs/tools.md are derived. A tool without an effect audit does not load.
import { z } from 'zod';
import type { Capability } from '../domain/types.ts';
import type { Toolset } from './toolsets.ts';

/** What calling the tool does to the world outside the gateway. */
export interface EffectAudit {
  /** false: the tool changes something outside dossier; it becomes a keyed launch. */
  idempotent: boolean;
  readOnly: boolean;
  destructive: boolean;
  /** Talks to things beyond dossier's own store (processes, devices, files). */
  openWorld: boolean;
  /** Plain words for the auditor: what the effect is. */
  effects: string[];
}

export interface NamedBound {
  default: number;
  max: number;
  /** The least value taken (0 when absent). */
  min?: number;
  unit: string;
}

export interface CollectionSpec {
  description: string;
  /** Fields that `where` exact filters may use. */
  filterable: string[];
}

/** A tool's input once its schema has parsed it, whatever the tool. */
export type ToolInput = z.output<z.ZodObject>;

export interface ToolContract<Input extends z.ZodObject = z.ZodObject> {
  name: string;
  title: string;
  description: string;
  input: Input;
  effect: EffectAudit;
  /** Where the work runs: a worker capability for launches and analyses, the gateway for ledger tools. */
  runsOn: Capability | 'gateway';
  /** The toolset that lists it (src/tools/toolsets.ts): a connection lists only the toolsets it chose. */
  toolset: Toolset;
  limits: Record<string, NamedBound>;
  collections: Record<string, CollectionSpec>;
  /** The collection an oversized result's continuation pages first (default: the largest). */
  primaryCollection?: string;
  /**
   * "process": the launch runs a program a human may want to see first; under
   * DOSSIER_CAPTURE_APPROVAL=elicit it is approved before its key is claimed.
   */
  approval?: 'process';
  /**
   * Upper bound of the effect's run time for these inputs, so the activity's
   * timeout can be derived. A method, so a contract of any input schema is a
   * ToolContract without a cast.
   */
  maxRunMs?(input: z.infer<Input>): number;
  /** For an analysis: false when it reads no analysis database (a rule scan); default true. */
  needsDatabase?: boolean;
}

/** A tool with effects: a keyed launch, run at most once per key. */
export function isLaunchTool(contract: ToolContract): boolean {
  return !contract.effect.idempotent;
}

/** A read-only tool that runs on a worker: an analysis, answered once per input for the whole team. */
export function isAnalysisTool(contract: ToolContract): boolean {
  return contract.effect.idempotent && contract.runsOn !== 'gateway';
}

export const IDEMPOTENCY_KEY = /^[A-Za-z0-9._:-]{1,128}$/;
export const WAIT_MS = { default: 20_000, max: 110_000 } as const;

export const idempotencyKeySchema = z
  .string({ error: 'idempotency_key is required: 1-128 characters of A-Z a-z 0-9 . _ : -' })
  .regex(IDEMPOTENCY_KEY, {
    error:
      'idempotency_key must be 1-128 characters of A-Z a-z 0-9 . _ : - (choose one key per intended effect)',
  })
  .describe(
    'Your name for this one intended effect. Retrying with the same key and arguments never runs it twice; another call needs another key.',
  );

const waitMs = (past: string) =>
  z
    .number()
    .int()
    .min(0)
    .max(WAIT_MS.max)
    .default(WAIT_MS.default)
    .describe(`How long to wait (ms); then status "running": ${past}.`);

/**
 * How much of a result a launch or analysis reply carries. Omitted, the reply
 * fits the first-reply budget (whole tools/call result on the wire); complete
 * asks for up to the reply budget; either way a result that does not fit comes
 * as its summary plus a continuation.
 */
export const detailSchema = z
  .enum(['complete', 'summary'])
  .optional()
  .describe(
    'Omitted: the whole result if the reply fits the first-reply budget (8 KB), else summary + continuation; complete: up to the reply budget (40 KB); summary: summary only.',
  );

/** A launch's time bound when its contract names none. */
export const DEFAULT_MAX_RUN_MS = 60_000;

export const waitMsSchema = waitMs('await_launch, or call again with the same key');

/** An analysis has no key: asking the same question again attaches to the one running. */
export const analysisWaitMsSchema = waitMs('asking the same again attaches to it');

const callSchemas = new Map<string, z.ZodObject>();

/**
 * The schema a call is validated against: launches add the key and wait_ms,
 * analyses wait_ms, and both `detail` where the contract does not place it
 * itself (every worker's reply is delivered within a budget). Unknown fields
 * are refused.
 */
export function callSchema(contract: ToolContract): z.ZodObject {
  let schema = callSchemas.get(contract.name);
  if (!schema) {
    const detail = 'detail' in contract.input.shape ? {} : { detail: detailSchema };
    schema = isLaunchTool(contract)
      ? contract.input
          .extend({ ...detail, idempotency_key: idempotencyKeySchema, wait_ms: waitMsSchema })
          .strict()
      : isAnalysisTool(contract)
        ? contract.input.extend({ ...detail, wait_ms: analysisWaitMsSchema }).strict()
        : contract.input.strict();
    callSchemas.set(contract.name, schema);
  }
  return schema;
}

export function defineTool<Input extends z.ZodObject>(contract: ToolContract<Input>): ToolContract<Input> {
  if (!contract.effect) throw new Error(`tool ${contract.name} has no effect audit`);
  if (!/^[a-z][a-z0-9_]{1,63}$/.test(contract.name))
    throw new Error(`tool name ${contract.name} is not snake_case`);
  if (!contract.effect.idempotent && contract.runsOn === 'gateway') {
    throw new Error(`tool ${contract.name} has effects and so must run on a worker capability`);
  }
  return contract;
}

/** A named bound as a zod integer with its default and ceiling (in the schema, not repeated in words). */
export function bounded(bound: NamedBound, description: string) {
  return z
    .number()
    .int()
    .min(bound.min ?? 0)
    .max(bound.max)
    .default(bound.default)
    .describe(saysUnit(description, bound.unit) ? description : `${description} (${bound.unit})`);
}

/** Whether a description already names its bound's unit ("Bytes kept of each match"): said once. */
function saysUnit(description: string, unit: string): boolean {
  return description.toLowerCase().includes(unit.replace(/ \([^)]*\)$/, '').toLowerCase());
}

/** The page size of every list tool (list_launches, list_evidence, list_unknowns, list_artifacts). */
export const LIST_LIMIT: NamedBound = { default: 50, max: 200, unit: 'items' };

export const listCursorSchema = z
  .string()
  .max(1_024)
  .optional()
  .describe('next_cursor from the previous page; omit for the first.');

export const listLimitSchema = z.number().int().min(1).max(LIST_LIMIT.max).default(LIST_LIMIT.default);

/** An optional investigation that groups Evidence, launches and unknowns. */
export const investigationSchema = z
  .string()
  .regex(/^[A-Za-z0-9._:-]{1,128}$/, { error: 'investigation is 1-128 characters of A-Z a-z 0-9 . _ : -' })
  .describe('Optional investigation this belongs to, for grouping Evidence.');
