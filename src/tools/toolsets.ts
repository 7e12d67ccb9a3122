// Toolsets: the catalog in groups a connection chooses from, so that tools/list
// carries what a session needs rather than every tool (every agent session pays
// for its tool list in context before its first question). Listing is a context
// budget, not authorization: every tool stays callable by name, roles apply.

/** Every toolset, in canonical order, with what it is for. */
export const TOOLSETS = {
  core: 'whoami, artifacts, launches, Evidence, residual unknowns and toolsets (always listed)',
  analysis: 'static analysis of a registered binary (angr)',
  capture: 'run a program in the sandbox and retain its output, files, system or library calls',
  extraction: 'unpack archives, filesystem images and firmware, and scan them with YARA rules',
  devices: 'register shared devices (SSH, adb, emulated) and act on them',
  bundles: 'export and import Evidence bundles',
  knowledge:
    'the team’s annotations (names, comments, types; history, revert), identical functions across artifacts, diffs between builds and what they carry forward',
} as const;

export type Toolset = keyof typeof TOOLSETS;
export const TOOLSET_NAMES = Object.keys(TOOLSETS) as Toolset[];

/** What a connection lists when neither its URL nor its token chooses (DOSSIER_TOOLSETS): a typical analysis. */
export const DEFAULT_TOOLSETS = 'core,analysis';

const isToolset = (name: string): name is Toolset => Object.hasOwn(TOOLSETS, name);

/** Toolsets in their canonical order, core always among them; names not known are dropped. */
export function normalizeToolsets(names: Iterable<string>): Toolset[] {
  const chosen = new Set<string>(['core', ...names]);
  return TOOLSET_NAMES.filter((t) => chosen.has(t));
}

/**
 * "analysis,devices" or "all" as toolsets (core always among them); throws
 * naming what is known when a name is not. Used for DOSSIER_TOOLSETS, a
 * token's --toolsets and the endpoint's ?toolsets=.
 */
export function parseToolsets(value: string): Toolset[] {
  const names = value
    .split(',')
    .map((s) => s.trim().toLowerCase())
    .filter(Boolean);
  if (names.length === 0) throw new Error(`expected toolsets: ${TOOLSET_NAMES.join(', ')}, or all`);
  if (names.includes('all')) return [...TOOLSET_NAMES];
  const unknown = names.filter((n) => !isToolset(n));
  if (unknown.length)
    throw new Error(
      `unknown toolset${unknown.length > 1 ? 's' : ''} ${unknown.map((n) => JSON.stringify(n)).join(', ')}: expected ${TOOLSET_NAMES.join(', ')}, or all`,
    );
  return normalizeToolsets(names);
}

/** What is wrong with a toolsets value, or undefined when parseToolsets takes it. */
export function toolsetsProblem(value: string): string | undefined {
  try {
    parseToolsets(value);
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}
