// Tools as tools/list shows them, derived from the contracts, for the toolsets
// a connection lists: always in the catalog's order, so the list is the same
// for the same toolsets every time, in either protocol era.
import { CATALOG } from './catalog.ts';
import { isLaunchTool, type ToolContract } from './contract.ts';
import { inputJsonSchema, outputJsonSchema } from './outputs.ts';
import { TOOLSET_NAMES, type Toolset } from './toolsets.ts';

/** What every launch adds to its description; the rest is in the idempotency_key's own description. */
const LAUNCH_CONTRACT =
  ' A launch: retrying with the same idempotency_key attaches to it, never runs it twice. Large results come as a summary plus a continuation for inspect_analysis_view.';

function describe(contract: ToolContract): string {
  return isLaunchTool(contract) ? contract.description + LAUNCH_CONTRACT : contract.description;
}

/** A tool as tools/list shows it. */
export interface ListedTool {
  name: string;
  title: string;
  description: string;
  inputSchema: Record<string, unknown>;
  outputSchema?: Record<string, unknown>;
  execution?: { taskSupport: 'optional' };
  annotations: Record<string, unknown>;
}

function listed(c: ToolContract): ListedTool {
  const outputSchema = outputJsonSchema(c);
  return {
    name: c.name,
    title: c.title,
    description: describe(c),
    inputSchema: inputJsonSchema(c),
    ...(outputSchema ? { outputSchema } : {}),
    // Every launch may run as an MCP task; other tools answer at once.
    ...(isLaunchTool(c) ? { execution: { taskSupport: 'optional' as const } } : {}),
    annotations: {
      readOnlyHint: c.effect.readOnly,
      destructiveHint: c.effect.destructive,
      // With the key required, repeating a launch call has no further effect (docs/idempotency.md).
      idempotentHint: isLaunchTool(c) ? true : c.effect.idempotent,
      openWorldHint: c.effect.openWorld,
    },
  };
}

let every: ListedTool[] | undefined;
const lists = new Map<string, ListedTool[]>();

/** The tools of `toolsets` (default: every toolset), derived from the contracts once, in the catalog's order. */
export function listTools(toolsets: readonly Toolset[] = TOOLSET_NAMES): ListedTool[] {
  every ??= CATALOG.map(listed);
  const key = toolsets.join(',');
  let list = lists.get(key);
  if (!list) {
    const chosen = new Set<string>(toolsets);
    list = every.filter((_, i) => chosen.has(CATALOG[i]!.toolset));
    lists.set(key, list);
  }
  return list;
}
