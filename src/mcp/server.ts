// The handshake era (2025-11-25 and older) on the MCP SDK's v1 Server: one
// server per session, a thin translation of its requests to the era-neutral
// surface (surface.ts) and the gateway. No rules live here.
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  CompleteRequestSchema,
  GetPromptRequestSchema,
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  ReadResourceRequestSchema,
  McpError,
  type ServerNotification,
  type ServerRequest,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import type { z } from 'zod';
import type { Gateway } from '../gateway/gateway.ts';
import type { Principal } from '../domain/types.ts';
import { toToolError } from '../domain/errors.ts';
import { TOOLS_BY_NAME } from '../tools/catalog.ts';
import {
  askHumanVia,
  canAskHuman,
  CallToolWithKeySchema,
  installTaskHandlers,
  TASK_CAPABILITIES,
  toCallToolResult,
  withProtocolKey,
} from './tasks.ts';
import { isLaunchTool } from '../tools/contract.ts';
import { inRequestSpan } from '../metrics/tracing.ts';
import type { ToolsetChoice } from '../gateway/toolsets.ts';
import type { Toolset } from '../tools/toolsets.ts';
import {
  admit,
  approvalRoute,
  asRpcError,
  complete,
  getPrompt,
  INSTRUCTIONS,
  listPrompts,
  listResources,
  listTools,
  readResource,
  RESOURCE_TEMPLATES,
  SERVER_INFO,
} from './surface.ts';
import {
  callAppTool,
  clientHasUi,
  isAppTool,
  readView,
  UI_EXTENSION,
  viewResources,
  withViews,
} from '../views/apps.ts';
import { malformedAsInvalidParams } from './malformed.ts';

/**
 * An MCP error sent with its own message: the SDK's McpError prefixes "MCP error N: " to it, and
 * its clients prefix that again when they read it ("MCP error -32602: MCP error -32602: …").
 */
class ReplyError extends McpError {
  constructor(code: number, message: string, data?: unknown) {
    super(code, message, data);
    this.message = message;
  }
}

/** Runs a request's answer; whatever it throws goes out as the JSON-RPC error surface.ts makes of it. */
async function answering<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    const e = asRpcError(err);
    throw new ReplyError(e.code, e.message, e.data);
  }
}

/** The toolsets one session lists: chosen at initialize, more enabled as it goes. */
export interface SessionToolsets {
  listed: readonly Toolset[];
  /** Records a new list where other replicas read it (the session's row in the store). */
  record?(listed: readonly Toolset[]): Promise<void>;
}

/** Maps a request's auth info to its principal (undefined: not authenticated). */
type ResolveCaller = (authExtra: Record<string, unknown> | undefined) => Principal | undefined;
type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;
type CallRequest = z.infer<typeof CallToolWithKeySchema>;

/** What one session's server answers with: the gateway, its caller, its list. */
interface SessionParts {
  server: Server;
  gateway: Gateway;
  resolveCaller: ResolveCaller;
  toolsets: SessionToolsets;
}

/**
 * One MCP server per session. `resolveCaller` maps the request's auth info to
 * a principal: HTTP passes the bearer token's principal, stdio a fixed one.
 * `toolsets` is the session's list, which enable_toolsets grows.
 */
export function createMcpServer(
  gateway: Gateway,
  resolveCaller: ResolveCaller,
  toolsets: SessionToolsets,
): Server {
  const server = new Server(SERVER_INFO, {
    capabilities: {
      // tools.idempotency: the protocol-level key of SEP-3182 (a draft), accepted as params.idempotencyKey.
      // tools.listChanged: enable_toolsets grows a session's list and says so.
      tools: { listChanged: true, idempotency: {} } as { listChanged: boolean },
      experimental: { 'tools.idempotency': { field: 'idempotencyKey', status: 'SEP-3182 draft' } },
      ...TASK_CAPABILITIES,
      // The six prompts are fixed for the life of the gateway: nothing ever changes the list.
      prompts: { listChanged: false },
      completions: {},
      resources: {},
      logging: {},
      extensions: { [UI_EXTENSION]: {} },
    },
    instructions: INSTRUCTIONS,
  });
  const parts: SessionParts = { server, gateway, resolveCaller, toolsets };
  installListHandlers(parts);
  installResourceHandlers(parts);
  server.setRequestHandler(CallToolWithKeySchema, (request, extra) => callToolTraced(parts, request, extra));
  installTaskHandlers(
    server,
    gateway,
    (authExtra) => admit(gateway, resolveCaller(authExtra)),
    (err) => {
      const e = asRpcError(err);
      throw new ReplyError(e.code, e.message, e.data);
    },
  );
  malformedAsInvalidParams(server, (code, message, data) => new ReplyError(code, message, data));
  return server;
}

// Clients of the MCP Apps extension also see the Views (src/views); others, exactly the list as it was.
const hasUi = (server: Server) => clientHasUi(server.getClientCapabilities());

/** The caller, admitted (authenticated and counted against its rate). */
const admitted = ({ gateway, resolveCaller }: SessionParts, extra: Extra) =>
  admit(gateway, resolveCaller(extra.authInfo?.extra));

/** tools/list, prompts/list and prompts/get, completion/complete. */
function installListHandlers(parts: SessionParts) {
  const { server, gateway, toolsets } = parts;
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: withViews(listTools(toolsets.listed), hasUi(server)) as Tool[],
  }));
  server.setRequestHandler(ListPromptsRequestSchema, (_request, extra) =>
    answering(async () => (await admitted(parts, extra), { prompts: listPrompts() })),
  );
  server.setRequestHandler(GetPromptRequestSchema, (request, extra) =>
    answering(async () => {
      await admitted(parts, extra);
      const route = approvalRoute(gateway, canAskHuman(server));
      return getPrompt(request.params.name, request.params.arguments ?? {}, route);
    }),
  );
  server.setRequestHandler(CompleteRequestSchema, (request, extra) =>
    answering(async () => complete(gateway, await admitted(parts, extra), request.params)),
  );
}

/** resources/list, resources/templates/list, resources/read (the Views' among them for UI clients). */
function installResourceHandlers(parts: SessionParts) {
  const { server, gateway, resolveCaller } = parts;
  // Listing and reading resources count once against the rate: through the tool call each makes.
  const unthrottled = (extra: Extra) => {
    const p = resolveCaller(extra.authInfo?.extra);
    if (!p) throw new ReplyError(-32600, 'unauthenticated');
    return p;
  };
  server.setRequestHandler(ListResourcesRequestSchema, (request, extra) =>
    answering(async () => {
      const page = await listResources(gateway, unthrottled(extra), request.params?.cursor);
      return hasUi(server) && !request.params?.cursor
        ? { ...page, resources: [...viewResources(), ...page.resources] }
        : page;
    }),
  );
  server.setRequestHandler(ListResourceTemplatesRequestSchema, (_request, extra) =>
    answering(async () => (await admitted(parts, extra), { resourceTemplates: RESOURCE_TEMPLATES })),
  );
  server.setRequestHandler(ReadResourceRequestSchema, (request, extra) =>
    answering(async () => {
      const caller = unthrottled(extra);
      return readView(request.params.uri) ?? readResource(gateway, caller, request.params.uri);
    }),
  );
}

/** tools/call inside its trace's root span: the workflow start, the workflow and its activities hang below it. */
function callToolTraced(parts: SessionParts, request: CallRequest, extra: Extra) {
  const caller = parts.resolveCaller(extra.authInfo?.extra);
  if (!caller) throw new Error('unauthenticated request reached the MCP server');
  const tool = TOOLS_BY_NAME.has(request.params.name) ? request.params.name : 'unknown';
  return inRequestSpan(
    `tools/call ${tool}`,
    { 'mcp.method.name': 'tools/call', 'dossier.tool': tool, 'dossier.team': caller.team },
    async (span) => {
      const reply = await callTool(parts, caller, request, extra);
      const outcome =
        'task' in reply
          ? 'task'
          : (reply.structuredContent as { error?: { code?: string }; status?: string });
      span.setAttribute(
        'dossier.outcome',
        typeof outcome === 'string' ? outcome : (outcome.error?.code ?? outcome.status ?? 'ok'),
      );
      return reply;
    },
  );
}

/** One tool call: a View's tool, a task-augmented call (answered with its task), or a call answered whole. */
async function callTool(parts: SessionParts, caller: Principal, request: CallRequest, extra: Extra) {
  const { server, gateway, toolsets } = parts;
  const { name, idempotencyKey, task } = request.params;
  const contract = TOOLS_BY_NAME.get(name);
  let args: Record<string, unknown>;
  try {
    args = withProtocolKey(request.params.arguments, idempotencyKey, !!contract && isLaunchTool(contract));
  } catch (err) {
    if (task) return answering(() => Promise.reject(err));
    return toCallToolResult({ ok: false, error: toToolError(err) });
  }
  if (isAppTool(name) && hasUi(server)) return toCallToolResult(await callAppTool(gateway, caller, args));
  const askHuman = askHumanVia(server, extra.sendRequest as never);
  if (task) {
    // A task-augmented call: claim (or attach to) the launch, answer with its task at once.
    return answering(async () => ({
      task: await gateway.createTask(caller, name, args, task.ttl, { askHuman }),
    }));
  }
  return toCallToolResult(
    await gateway.callTool(caller, name, args, {
      onProgress: progressReporter(request, extra),
      askHuman,
      signal: extra.signal,
      toolsets: toolsetChoice(toolsets, extra),
    }),
  );
}

/** Sends notifications/progress while a call runs, when the client gave a progress token. */
function progressReporter(request: CallRequest, extra: Extra) {
  const progressToken = request.params._meta?.progressToken;
  if (progressToken === undefined) return undefined;
  return async (elapsedMs: number, facts: Record<string, unknown> | null) => {
    await extra.sendNotification({
      method: 'notifications/progress',
      params: {
        progressToken,
        progress: elapsedMs,
        message: facts ? `running: ${JSON.stringify(facts)}` : 'running',
      },
    });
  };
}

/** Enabling toolsets changes this session's list, and the client hears of it on this call's stream. */
function toolsetChoice(toolsets: SessionToolsets, extra: Extra): ToolsetChoice {
  return {
    get listed() {
      return toolsets.listed;
    },
    async enable(listed) {
      await toolsets.record?.(listed);
      toolsets.listed = listed;
      await extra.sendNotification({ method: 'notifications/tools/list_changed' });
    },
  };
}
