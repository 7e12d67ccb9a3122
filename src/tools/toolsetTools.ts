// The two tools that show and choose toolsets (toolsets.ts): in core, always listed.
import { z } from 'zod';
import { defineTool, type EffectAudit } from './contract.ts';
import { TOOLSET_NAMES } from './toolsets.ts';

const META: EffectAudit = {
  idempotent: true,
  // It changes what this session lists, nothing of the world.
  readOnly: true,
  destructive: false,
  openWorld: false,
  effects: [],
};

export const listToolsets = defineTool({
  name: 'list_toolsets',
  title: 'List toolsets',
  description:
    'The toolsets, one line per tool, and which ones this connection lists. Any tool is callable by name, listed or not.',
  input: z.strictObject({}),
  effect: META,
  runsOn: 'gateway',
  toolset: 'core',
  limits: {},
  collections: {},
});

export const enableToolsets = defineTool({
  name: 'enable_toolsets',
  title: 'Enable toolsets',
  description:
    "Add toolsets to this session's tools/list (a tools list_changed notification follows). Without a session (MCP 2026-07-28) the reply carries their tools to call by name and the /mcp?toolsets= URL that lists them.",
  input: z.strictObject({
    toolsets: z
      .array(z.enum(['all', ...TOOLSET_NAMES]))
      .min(1)
      .max(TOOLSET_NAMES.length + 1),
  }),
  effect: META,
  runsOn: 'gateway',
  toolset: 'core',
  limits: {},
  collections: {},
});
