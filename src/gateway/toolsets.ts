// What list_toolsets and enable_toolsets answer. A connection lists the
// toolsets its URL, its token or the server chose; a session (the handshake
// era) may list more as it goes. Listing is a context budget only: every tool
// is callable by name whatever is listed, and roles apply as always.
import { CATALOG } from '../tools/catalog.ts';
import { listTools } from '../tools/listing.ts';
import { normalizeToolsets, TOOLSET_NAMES, TOOLSETS, type Toolset } from '../tools/toolsets.ts';

/** The toolsets of one connection, as the transport keeps them. */
export interface ToolsetChoice {
  /** What tools/list shows now, in canonical order. */
  readonly listed: readonly Toolset[];
  /**
   * Lists more in this session and tells its client (notifications/tools/list_changed).
   * Absent where there is no session to change (the stateless era).
   */
  enable?(toolsets: readonly Toolset[]): Promise<void>;
}

/** A choice nothing can change: the stateless era, or a caller outside MCP. */
export const fixedChoice = (listed: readonly Toolset[]): ToolsetChoice => ({ listed });

const line = (name: string) => {
  const c = CATALOG.find((t) => t.name === name)!;
  return `${c.name}: ${c.title}`;
};

const toolsOf = (set: Toolset) => CATALOG.filter((c) => c.toolset === set).map((c) => line(c.name));

/** The endpoint path that lists `toolsets` on every connection made to it. */
const urlFor = (toolsets: readonly Toolset[]) =>
  `/mcp?toolsets=${toolsets.length === TOOLSET_NAMES.length ? 'all' : toolsets.filter((t) => t !== 'core').join(',') || 'core'}`;

/** list_toolsets: every toolset with one line per tool, and which this connection lists. */
export function describeToolsets(choice: ToolsetChoice) {
  const listed = new Set(choice.listed);
  return {
    listed: [...choice.listed],
    toolsets: TOOLSET_NAMES.map((name) => ({
      name,
      listed: listed.has(name),
      about: TOOLSETS[name],
      tools: toolsOf(name),
    })),
    reach:
      `Any tool is callable by name, listed or not. ${choice.enable ? 'enable_toolsets lists more in this session; ' : ''}` +
      'the endpoint /mcp?toolsets=a,b (or all) chooses per connection.',
  };
}

/** enable_toolsets: lists more in a session; without one, says how to reach them and gives their tools. */
export async function enableToolsets(choice: ToolsetChoice, requested: readonly string[]) {
  const wanted = requested.includes('all') ? [...TOOLSET_NAMES] : normalizeToolsets(requested);
  const before = new Set(choice.listed);
  const added = wanted.filter((t) => !before.has(t));
  const all = normalizeToolsets([...choice.listed, ...wanted]);
  if (choice.enable) {
    if (added.length) await choice.enable(all);
    return {
      enabled: added,
      listed: all,
      tools_added: added.flatMap(toolsOf),
      note: added.length
        ? 'tools/list now shows them (notifications/tools/list_changed was sent).'
        : 'Already listed: nothing changed.',
    };
  }
  // No session (MCP 2026-07-28): every request chooses its list by its URL, token or the server.
  return {
    enabled: [],
    listed: [...choice.listed],
    url: urlFor(all),
    note: `This connection has no session, so its list cannot change. Call these tools by name (they are below), or connect to ${urlFor(all)} to list them.`,
    tools: listTools(added),
  };
}
