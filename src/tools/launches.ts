// The gateway-local launch tools: read, wait for, cancel and list launches.
import { z } from 'zod';
import {
  defineTool,
  idempotencyKeySchema,
  LIST_LIMIT,
  listCursorSchema,
  listLimitSchema,
  waitMsSchema,
} from './contract.ts';

const READ = { idempotent: true, readOnly: true, destructive: false, openWorld: false, effects: [] };

const keyOnly = z.strictObject({
  idempotency_key: idempotencyKeySchema.describe('The key you launched with.'),
});

export const getLaunch = defineTool({
  name: 'get_launch',
  title: 'Get a launch',
  description:
    'Status, progress and outcome of one of your launches, by its idempotency_key. Never starts anything.',
  input: keyOnly,
  effect: READ,
  runsOn: 'gateway',
  toolset: 'core',
  limits: {},
  collections: {},
});

export const awaitLaunch = defineTool({
  name: 'await_launch',
  title: 'Wait for a launch',
  description: 'Wait up to wait_ms for one of your launches to finish, then answer as get_launch does.',
  input: z.strictObject({
    idempotency_key: idempotencyKeySchema.describe('The key you launched with.'),
    wait_ms: waitMsSchema,
  }),
  effect: READ,
  runsOn: 'gateway',
  toolset: 'core',
  limits: {},
  collections: {},
});

export const cancelLaunch = defineTool({
  name: 'cancel_launch',
  title: 'Cancel a launch',
  description:
    'Cancel one of your running launches: its processes are ended and the outcome is retained as cancelled. A finished launch is left as it is.',
  input: keyOnly,
  effect: {
    idempotent: true,
    readOnly: false,
    destructive: true,
    openWorld: true,
    effects: ['ends the process group of a running launch'],
  },
  runsOn: 'gateway',
  toolset: 'core',
  limits: {},
  collections: {},
});

export const listLaunches = defineTool({
  name: 'list_launches',
  title: 'List launches',
  description:
    "Your team's launches, newest first, filtered by status and tool; pass next_cursor to page on.",
  input: z.strictObject({
    status: z.enum(['running', 'succeeded', 'failed', 'interrupted', 'cancelled']).optional(),
    tool: z.string().max(64).optional(),
    cursor: listCursorSchema,
    limit: listLimitSchema,
  }),
  effect: READ,
  runsOn: 'gateway',
  toolset: 'core',
  limits: { limit: LIST_LIMIT },
  collections: {},
});

export const whoami = defineTool({
  name: 'whoami',
  title: 'Who am I',
  description:
    "Your principal, team and role, this connection's toolsets, the cluster's launch UI, and your team's inbox folder (for register_artifact).",
  input: z.strictObject({}),
  effect: READ,
  runsOn: 'gateway',
  toolset: 'core',
  limits: {},
  collections: {},
});
