// One contract object per tool: the single source from which MCP registration,
// annotations, input validation, workflow routing, search attributes and
// docs/tools.md are derived. A tool without an effect audit does not load.
import { z } from 'zod';
import type { Capability } from '../config.ts';

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
  unit: string;
}

export interface CollectionSpec {
  description: string;
  /** Fields that `where` exact filters may use. */
  filterable: string[];
}

export interface ToolContract<Input extends z.ZodObject = z.ZodObject> {
  name: string;
  title: string;
  description: string;
  input: Input;
  effect: EffectAudit;
  /** Where the work runs: a worker capability for launches and analyses, the gateway for ledger tools. */
  runsOn: Capability | 'gateway';
  limits: Record<string, NamedBound>;
  collections: Record<string, CollectionSpec>;
  /** Upper bound of the effect's run time for these inputs, so the activity's timeout can be derived. */
  maxRunMs?: (input: z.infer<Input>) => number;
}

export function isLaunchTool(contract: ToolContract): boolean {
  return !contract.effect.idempotent;
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

/** A named bound as a zod integer with its default and ceiling, described for agents. */
export function bounded(bound: NamedBound, description: string) {
  return z
    .number()
    .int()
    .min(0)
    .max(bound.max)
    .default(bound.default)
    .describe(`${description} (${bound.unit}; default ${bound.default}, at most ${bound.max})`);
}

/** The page size of every list tool (list_launches, list_evidence, list_unknowns, list_artifacts). */
export const LIST_LIMIT: NamedBound = { default: 50, max: 200, unit: 'items' };

export const listCursorSchema = z
  .string()
  .max(1_024)
  .optional()
  .describe('next_cursor from the previous page; omit for the first.');

export const listLimitSchema = z.number().int().min(1).max(LIST_LIMIT.max).default(LIST_LIMIT.default);
