// The MCP layer: a thin translation between JSON-RPC and the Gateway. Tool
// listings and annotations are derived from the contracts; no rules live here.
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  CompleteRequestSchema,
  ErrorCode,
  GetPromptRequestSchema,
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  ReadResourceRequestSchema,
  McpError,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import { PROMPTS, PROMPTS_BY_NAME, renderPrompt, type ApprovalRoute } from '../tools/prompts.ts';
import type { Gateway } from '../gateway/gateway.ts';
import { EVIDENCE_TEMPLATE } from '../gateway/completion.ts';
import type { Principal } from '../domain/types.ts';
import { toToolError, type ToolError } from '../domain/errors.ts';
import { CATALOG, TOOLS_BY_NAME } from '../tools/catalog.ts';
import {
  askHumanVia,
  canAskHuman,
  CallToolWithKeySchema,
  installTaskHandlers,
  TASK_CAPABILITIES,
  toCallToolResult,
  withProtocolKey,
} from './tasks.ts';
import { isLaunchTool, type ToolContract } from '../tools/contract.ts';
import { inputJsonSchema, outputJsonSchema } from '../tools/outputs.ts';
import { inRequestSpan } from '../metrics/tracing.ts';

export const SERVER_INFO = { name: 'dossier', version: '0.1.0' };

/** JSON-RPC code of a request refused for a limit (server-defined range); its data carries retry_after_ms. */
const RESOURCE_CONSTRAINT = -32029;

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

/** Failures of what the caller asked (its arguments, its key's first body, its role, the policy): -32602. */
const CALLERS_CATEGORIES: readonly string[] = ['input', 'conflict', 'auth', 'policy'];

/** A tool error as a JSON-RPC error of a non-tool request: its message, and the whole error as data. */
function toMcpError(error: ToolError): McpError {
  const code =
    error.code === 'resource_constraint'
      ? RESOURCE_CONSTRAINT
      : CALLERS_CATEGORIES.includes(error.category)
        ? ErrorCode.InvalidParams
        : ErrorCode.InternalError;
  const retry = error.details.retry_after_ms;
  return new ReplyError(code, error.message, {
    ...error,
    ...(retry !== undefined ? { retry_after_ms: retry } : {}),
  });
}

const LAUNCH_CONTRACT =
  ' Has effects: pass an idempotency_key; a retry with the same key and arguments attaches to the first launch and never runs it twice, another body with that key is refused.' +
  ' The complete result is retained as Evidence (evidence_id); a result too large for one reply comes as a summary plus a continuation to page with inspect_analysis_view.';

function describe(contract: ToolContract): string {
  return isLaunchTool(contract) ? contract.description + LAUNCH_CONTRACT : contract.description;
}

let toolList: Tool[] | undefined;
export function listTools(): Tool[] {
  toolList ??= CATALOG.map((c) => ({
    name: c.name,
    title: c.title,
    description: describe(c),
    inputSchema: inputJsonSchema(c) as Tool['inputSchema'],
    outputSchema: outputJsonSchema(c) as Tool['outputSchema'],
    // Every launch may run as an MCP task (tasks/get, tasks/result); other tools answer at once.
    ...(isLaunchTool(c) ? { execution: { taskSupport: 'optional' as const } } : {}),
    annotations: {
      title: c.title,
      readOnlyHint: c.effect.readOnly,
      destructiveHint: c.effect.destructive,
      // With the key required, repeating a launch call has no further effect (docs/idempotency.md).
      idempotentHint: isLaunchTool(c) ? true : c.effect.idempotent,
      openWorldHint: c.effect.openWorld,
    },
  }));
  return toolList;
}

/**
 * One MCP server per session. `resolveCaller` maps the request's auth info to
 * a principal: HTTP passes the bearer token's principal, stdio a fixed one.
 */
export function createMcpServer(
  gateway: Gateway,
  resolveCaller: (authExtra: Record<string, unknown> | undefined) => Principal | undefined,
): Server {
  const server = new Server(SERVER_INFO, {
    capabilities: {
      // tools.idempotency: the protocol-level key of SEP-3182 (a draft), accepted as params.idempotencyKey.
      tools: { listChanged: false, idempotency: {} } as { listChanged: boolean },
      experimental: { 'tools.idempotency': { field: 'idempotencyKey', status: 'SEP-3182 draft' } },
      ...TASK_CAPABILITIES,
      // The six prompts are fixed for the life of the gateway: nothing ever changes the list.
      prompts: { listChanged: false },
      completions: {},
      resources: {},
      logging: {},
    },
    instructions:
      'dossier runs reverse-engineering tools on a shared cluster. Tools with effects need an idempotency_key: retry with the same key after any failure to reach the same launch. Results are retained as Evidence and referenced by evidence_id.',
  });
  /** The caller of a request, counted against its rate; over it, an error whose data says when to retry. */
  const admit = async (authExtra: Record<string, unknown> | undefined): Promise<Principal> => {
    const caller = resolveCaller(authExtra);
    if (!caller) throw new ReplyError(ErrorCode.InvalidRequest, 'unauthenticated');
    const limited = await gateway.throttle(caller);
    if (limited)
      throw new ReplyError(RESOURCE_CONSTRAINT, limited.message, { code: 'resource_constraint', ...limited });
    return caller;
  };
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: listTools() }));
  server.setRequestHandler(
    ListPromptsRequestSchema,
    async (_request, extra) => (
      await admit(extra.authInfo?.extra),
      {
        prompts: PROMPTS.map((p) => ({
          name: p.name,
          title: p.title,
          description: p.description,
          arguments: p.arguments.map((a) => ({
            name: a.name,
            description: a.description,
            required: a.required,
          })),
        })),
      }
    ),
  );
  server.setRequestHandler(GetPromptRequestSchema, async (request, extra) => {
    await admit(extra.authInfo?.extra);
    const spec = PROMPTS_BY_NAME.get(request.params.name);
    if (!spec)
      throw new ReplyError(
        ErrorCode.InvalidParams,
        `There is no prompt named "${request.params.name}"; prompts/list shows them.`,
      );
    try {
      const policy = gateway.approvalPolicy;
      const approval: ApprovalRoute =
        policy?.mode !== 'elicit'
          ? 'off'
          : canAskHuman(server)
            ? 'elicitation'
            : policy.withoutElicitation === 'require'
              ? 'policy-require'
              : 'policy-operators';
      const text = renderPrompt(spec, request.params.arguments ?? {}, { approval });
      return {
        description: spec.description,
        messages: [{ role: 'user' as const, content: { type: 'text' as const, text } }],
      };
    } catch (err) {
      throw new ReplyError(ErrorCode.InvalidParams, `Prompt ${spec.name}: ${(err as Error).message}`);
    }
  });
  // Retained Evidence is also readable as resources: dossier://evidence/<evidence_id> (the summary view).
  server.setRequestHandler(ListResourcesRequestSchema, async (request, extra) => {
    const caller = resolveCaller(extra.authInfo?.extra);
    if (!caller) throw new ReplyError(ErrorCode.InvalidRequest, 'unauthenticated');
    const page = await gateway.callTool(caller, 'list_evidence', {
      cursor: request.params?.cursor,
      limit: 50,
    });
    if (!page.ok) throw toMcpError(page.error);
    const items = page.value.evidence as { evidence_id: string; tool: string; created_at: string }[];
    return {
      resources: items.map((e) => ({
        uri: `dossier://evidence/${e.evidence_id}`,
        name: e.evidence_id,
        title: `${e.tool} at ${e.created_at}`,
        description: `Evidence retained by ${e.tool}; page its collections with inspect_analysis_view.`,
        mimeType: 'application/json',
      })),
      ...(page.value.next_cursor ? { nextCursor: page.value.next_cursor as string } : {}),
    };
  });
  server.setRequestHandler(ListResourceTemplatesRequestSchema, async (_request, extra) => {
    await admit(extra.authInfo?.extra);
    return {
      resourceTemplates: [
        {
          uriTemplate: EVIDENCE_TEMPLATE,
          name: 'evidence',
          title: 'Retained Evidence',
          description:
            "The summary view of one of your team's Evidence records; page its collections with inspect_analysis_view.",
          mimeType: 'application/json',
        },
      ],
    };
  });
  server.setRequestHandler(ReadResourceRequestSchema, async (request, extra) => {
    const caller = resolveCaller(extra.authInfo?.extra);
    if (!caller) throw new ReplyError(ErrorCode.InvalidRequest, 'unauthenticated');
    const id = /^dossier:\/\/evidence\/(ev_[0-9a-f]{64})$/.exec(request.params.uri)?.[1];
    if (!id)
      throw new ReplyError(
        ErrorCode.InvalidParams,
        `Unknown resource ${request.params.uri}; resources/list shows them.`,
      );
    const view = await gateway.callTool(caller, 'inspect_analysis_view', {
      evidence_id: id,
      view: { kind: 'summary' },
    });
    if (!view.ok) throw toMcpError(view.error);
    return {
      contents: [{ uri: request.params.uri, mimeType: 'application/json', text: JSON.stringify(view.value) }],
    };
  });
  server.setRequestHandler(CompleteRequestSchema, async (request, extra) => {
    const caller = await admit(extra.authInfo?.extra);
    const { ref, argument } = request.params;
    if (ref.type === 'ref/resource')
      return { completion: await gateway.completeResource(caller, ref.uri, argument.name, argument.value) };
    if (ref.type !== 'ref/prompt') return { completion: { values: [], total: 0, hasMore: false } };
    const context = request.params.context?.arguments ?? {};
    return {
      completion: await gateway.completePrompt(caller, ref.name, argument.name, argument.value, context),
    };
  });
  server.setRequestHandler(CallToolWithKeySchema, async (request, extra) => {
    const caller = resolveCaller(extra.authInfo?.extra);
    if (!caller) throw new Error('unauthenticated request reached the MCP server');
    const tool = TOOLS_BY_NAME.has(request.params.name) ? request.params.name : 'unknown';
    // The trace's root: the workflow start, the workflow and its activities hang below it.
    const answer = async () => {
      const { name, idempotencyKey, task } = request.params;
      const contract = TOOLS_BY_NAME.get(name);
      let args: Record<string, unknown>;
      try {
        args = withProtocolKey(
          request.params.arguments,
          idempotencyKey,
          !!contract && isLaunchTool(contract),
        );
      } catch (err) {
        if (task) throw toMcpError(toToolError(err));
        return toCallToolResult({ ok: false, error: toToolError(err) });
      }
      const askHuman = askHumanVia(server, extra.sendRequest as never);
      if (task) {
        // A task-augmented call: claim (or attach to) the launch, answer with its task at once.
        try {
          return { task: await gateway.createTask(caller, name, args, task.ttl, { askHuman }) };
        } catch (err) {
          throw toMcpError(toToolError(err));
        }
      }
      const progressToken = request.params._meta?.progressToken;
      const onProgress =
        progressToken === undefined
          ? undefined
          : async (elapsedMs: number, facts: Record<string, unknown> | null) => {
              await extra.sendNotification({
                method: 'notifications/progress',
                params: {
                  progressToken,
                  progress: elapsedMs,
                  message: facts ? `running: ${JSON.stringify(facts)}` : 'running',
                },
              });
            };
      return toCallToolResult(
        await gateway.callTool(caller, name, args, { onProgress, askHuman, signal: extra.signal }),
      );
    };
    return inRequestSpan(
      `tools/call ${tool}`,
      { 'mcp.method.name': 'tools/call', 'dossier.tool': tool, 'dossier.team': caller.team },
      async (span) => {
        const reply = await answer();
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
  });
  installTaskHandlers(server, gateway, admit, (err) => {
    throw toMcpError(toToolError(err));
  });
  return server;
}
