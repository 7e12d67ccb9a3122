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
  /** How the connection came: over stdio there is no URL to choose by, only the server's setting. */
  readonly transport?: 'http' | 'stdio';
}

/** A choice nothing can change: the stateless era, or a caller outside MCP. */
export const fixedChoice = (listed: readonly Toolset[], transport?: 'http' | 'stdio'): ToolsetChoice => ({
  listed,
  ...(transport ? { transport } : {}),
});

/** What lists `toolsets` on a connection made anew: its URL over HTTP, the setting over stdio. */
const reachFor = (choice: ToolsetChoice, toolsets: readonly Toolset[]) =>
  choice.transport === 'stdio'
    ? `start \`dossier mcp --stdio\` with DOSSIER_TOOLSETS=${toolsets.length === TOOLSET_NAMES.length ? 'all' : toolsets.join(',')}`
    : `connect to ${urlFor(toolsets)}`;

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
      (choice.transport === 'stdio'
        ? 'DOSSIER_TOOLSETS=a,b (or all) chooses for a stdio server.'
        : 'the endpoint /mcp?toolsets=a,b (or all) chooses per connection.'),
  };
}

/** enable_toolsets: lists more in a session; without one, says how to reach them and gives their tools. */
export async function enableToolsets(choice: ToolsetChoice, requested: readonly string[]) {
  const wanted = requested.includes('all') ? [...TOOLSET_NAMES] : normalizeToolsets(requested);
  const before = new Set(choice.listed);
  // In the order asked: where one reply cannot carry every definition, the first asked come first.
  const asked = requested.includes('all')
    ? []
    : requested.filter((t): t is Toolset => wanted.includes(t as Toolset));
  const added = [...new Set([...asked, ...wanted])].filter((t) => !before.has(t));
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
  // The definitions come with the reply, whole toolsets while they fit DEFINITIONS_BYTES; the rest
  // are named, for a next call or the URL.
  const given: Toolset[] = [];
  const left: Toolset[] = [];
  let bytes = 0;
  for (const set of added) {
    const size = Buffer.byteLength(JSON.stringify(listTools([set])));
    if (left.length === 0 && bytes + size <= DEFINITIONS_BYTES) {
      given.push(set);
      bytes += size;
    } else left.push(set);
  }
  const reach = reachFor(choice, all);
  const base = `This connection has no session, so its list cannot change. Call these tools by name (their definitions are below), or ${reach} to list them.`;
  return {
    enabled: [],
    listed: [...choice.listed],
    ...(choice.transport === 'stdio' ? {} : { url: urlFor(all) }),
    note: !left.length
      ? base
      : given.length
        ? `${base} The definitions of ${left.join(', ')} did not fit in this reply as well: ask enable_toolsets for ${left.length > 1 ? 'them, a few at a time' : 'it'} next.`
        : `This connection has no session, so its list cannot change, and the definitions of ${left.join(', ')} are more than one reply carries: ${reach} to list them.`,
    tools: listTools(given),
    ...(left.length ? { not_included: left.map((set) => ({ toolset: set, tools: toolsOf(set) })) } : {}),
  };
}

/**
 * How many bytes of tool definitions one stateless enable_toolsets reply carries at most: every
 * toolset's fit (the largest, devices, is about 17 KB), all of them (about 75 KB) do not.
 */
const DEFINITIONS_BYTES = 24_000;
