// The stateless era (MCP 2026-07-28) on the MCP SDK's v2: no handshake, no
// session; every request carries its protocol version and client capabilities
// in `_meta`, stands alone, and may land on any gateway replica. The SDK's
// entry runs the validation ladder (envelope, MCP-Protocol-Version, Mcp-Method
// and Mcp-Name against the body, unsupported revisions), stamps `resultType`
// and cache hints, and verifies `requestState` before a handler sees it. What
// dossier answers is the era-neutral surface (surface.ts); the approval gate
// becomes an `input_required` result, and launches that outlive their wait
// become tasks of the `io.modelcontextprotocol/tasks` extension (modernTasks.ts).
import { hkdfSync } from 'node:crypto';
import {
  createMcpHandler,
  createRequestStateCodec,
  inputRequired,
  ProtocolError,
  Server,
  type McpHttpHandler,
  type RequestStateCodec,
  type ServerContext,
} from '@modelcontextprotocol/server';
import { toToolError } from '../domain/errors.ts';
import type { Principal } from '../domain/types.ts';
import { approvalForm, ApprovalRequired, type AskHuman } from '../gateway/approval.ts';
import type { Gateway } from '../gateway/gateway.ts';
import { inRequestSpan } from '../metrics/tracing.ts';
import { malformedAsInvalidParams } from './malformed.ts';
import { TOOLS_BY_NAME } from '../tools/catalog.ts';
import { isLaunchTool } from '../tools/contract.ts';
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
  APPROVAL_INPUT,
  askingTaskResult,
  createTaskResult,
  declaresTasks,
  installModernTasks,
  TASKS_EXTENSION,
} from './modernTasks.ts';
import { PROTOCOL_KEY_META, toCallToolResult, withProtocolKey } from './tasks.ts';
import {
  callAppTool,
  clientHasUi,
  isAppTool,
  readView,
  UI_EXTENSION,
  viewResources,
  withViews,
} from '../views/apps.ts';
import type { PayloadKey } from '../temporal/keys.ts';
import { fixedChoice, type ToolsetChoice } from '../gateway/toolsets.ts';
import type { Toolset } from '../tools/toolsets.ts';

/** The stateless revisions this endpoint serves; the handshake era is served by server.ts. */
export const MODERN_VERSIONS = ['2026-07-28'];

/** How long an approval form stays answerable: its requestState expires then (seconds). */
export const APPROVAL_STATE_SECONDS = 900;

/** What a sealed requestState of the approval gate carries: the call it was asked for. */
interface ApprovalState {
  tool: string;
  key: string;
  digest: string;
}

export interface ModernOptions {
  /** The cluster's payload keys: every replica derives the same requestState key from the first. */
  keys: PayloadKey[];
  /** Largest request body (the HTTP layer reads and caps it first). */
  maxRequestBytes: number;
  onerror?: (err: Error) => void;
}

/** The principal http.ts authenticated, handed to every request as its auth info. */
function principalOf(ctx: ServerContext): Principal | undefined {
  return ctx.http?.authInfo?.extra?.principal as Principal | undefined;
}

/** The toolsets http.ts chose for this request (its URL, the token, the server), fixed: no session to grow. */
function toolsetsOf(gateway: Gateway, ctx: ServerContext): ToolsetChoice {
  const extra = ctx.http?.authInfo?.extra;
  const chosen = extra?.toolsets as readonly Toolset[] | undefined;
  return fixedChoice(chosen ?? gateway.defaultToolsets, extra?.transport === 'stdio' ? 'stdio' : 'http');
}

const who = (p: Principal | undefined) => (p ? `${p.team}\0${p.principal}` : '');

/**
 * Stateless-era servers: one per request over HTTP, one per connection over stdio, all sealing
 * the approval gate's requestState with the same key. Each request's principal (and toolsets)
 * arrive as its auth info.
 */
export function modernServers(gateway: Gateway, keys: PayloadKey[]): () => Server {
  const stateCodec = createRequestStateCodec<ApprovalState>({
    key: new Uint8Array(hkdfSync('sha256', keys[0]!.secret, 'dossier', 'mcp:request-state', 32)),
    ttlSeconds: APPROVAL_STATE_SECONDS,
    // Sealed to the principal and the method: another principal's replay fails verification.
    bind: (ctx) => `${ctx.mcpReq.method}\0${who(principalOf(ctx))}`,
  });
  return () => modernServer(gateway, stateCodec);
}

/** The stateless era's HTTP handler: one v2 server per request, from the same factory for every request. */
export function createModernHandler(gateway: Gateway, opts: ModernOptions): McpHttpHandler {
  return createMcpHandler(modernServers(gateway, opts.keys), {
    legacy: 'reject',
    maxRequestBodySize: opts.maxRequestBytes,
    onerror: opts.onerror,
  });
}

/** Runs a request's answer; whatever it throws goes out as the JSON-RPC error surface.ts makes of it. */
async function answering<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof ProtocolError) throw err;
    const e = asRpcError(err);
    throw new ProtocolError(e.code, e.message, e.data);
  }
}

/** Lists depend only on the caller's authorization: private to it, and stable for a while. */
const PRIVATE = (ttlMs: number) => ({ ttlMs, cacheScope: 'private' as const });

function modernServer(gateway: Gateway, stateCodec: RequestStateCodec<ApprovalState>): Server {
  const server = new Server(SERVER_INFO, {
    capabilities: {
      // tools.idempotency: the protocol-level key of SEP-3182 (a draft), accepted as params.idempotencyKey.
      tools: { listChanged: false, idempotency: {} } as { listChanged: boolean },
      prompts: { listChanged: false },
      resources: {},
      completions: {},
      extensions: { [TASKS_EXTENSION]: {}, [UI_EXTENSION]: {} },
    },
    instructions: INSTRUCTIONS,
    supportedProtocolVersions: MODERN_VERSIONS,
    cacheHints: {
      'server/discover': PRIVATE(3_600_000),
      'tools/list': PRIVATE(3_600_000),
      'prompts/list': PRIVATE(3_600_000),
      'resources/templates/list': PRIVATE(3_600_000),
      // The team's Evidence grows with every launch; a record, once retained, never changes.
      'resources/list': PRIVATE(0),
      'resources/read': PRIVATE(3_600_000),
    },
    requestState: { verify: (state, ctx) => stateCodec.verify(state, ctx) },
  });
  const caller = (ctx: ServerContext) => admit(gateway, principalOf(ctx));

  // Clients of the MCP Apps extension also see the Views (src/views); others, exactly the list as it was.
  const ui = () => clientHasUi(server.getClientCapabilities());
  server.setRequestHandler('tools/list', (_request, ctx) =>
    answering(async () => ({ tools: withViews(listTools(toolsetsOf(gateway, ctx).listed), ui()) as never })),
  );
  server.setRequestHandler('prompts/list', (_request, ctx) =>
    answering(async () => (await caller(ctx), { prompts: listPrompts() })),
  );
  server.setRequestHandler('prompts/get', (request, ctx) =>
    answering(async () => {
      await caller(ctx);
      const route = approvalRoute(gateway, canAsk(server));
      return getPrompt(request.params.name, request.params.arguments ?? {}, route);
    }),
  );
  const authenticated = (ctx: ServerContext) => {
    const p = principalOf(ctx);
    if (!p) throw new ProtocolError(-32600, 'unauthenticated');
    return p;
  };
  server.setRequestHandler('resources/list', (request, ctx) =>
    answering(async () => {
      const page = await listResources(gateway, authenticated(ctx), request.params?.cursor);
      return ui() && !request.params?.cursor
        ? { ...page, resources: [...viewResources(), ...page.resources] }
        : page;
    }),
  );
  server.setRequestHandler('resources/templates/list', (_request, ctx) =>
    answering(async () => (await caller(ctx), { resourceTemplates: RESOURCE_TEMPLATES })),
  );
  server.setRequestHandler('resources/read', (request, ctx) =>
    answering(async () => {
      const caller = authenticated(ctx);
      return readView(request.params.uri) ?? readResource(gateway, caller, request.params.uri);
    }),
  );
  server.setRequestHandler('completion/complete', (request, ctx) =>
    answering(async () => (await complete(gateway, await caller(ctx), request.params)) as never),
  );
  server.setRequestHandler('tools/call', (request, ctx) =>
    callTool(gateway, server, stateCodec, request, ctx),
  );
  installModernTasks(server, gateway, (ctx) => caller(ctx), answering);
  malformedAsInvalidParams(server, (code, message, data) => new ProtocolError(code, message, data));
  return server;
}

type CallRequest = {
  params: { name: string; arguments?: Record<string, unknown>; _meta?: { progressToken?: string | number } };
};

async function callTool(
  gateway: Gateway,
  server: Server,
  stateCodec: RequestStateCodec<ApprovalState>,
  request: CallRequest,
  ctx: ServerContext,
) {
  const caller = principalOf(ctx);
  if (!caller) throw new ProtocolError(-32600, 'unauthenticated');
  const { name } = request.params;
  if (isAppTool(name) && clientHasUi(server.getClientCapabilities()))
    return toCallToolResult(await callAppTool(gateway, caller, request.params.arguments));
  const contract = TOOLS_BY_NAME.get(name);
  // In this era an unknown tool is a protocol error, as the revision asks; a tool's own failures are results.
  if (!contract)
    throw new ProtocolError(-32602, `There is no tool named "${name}"; tools/list shows them.`, {
      tool: name,
    });
  const tool = name;
  return inRequestSpan(
    `tools/call ${tool}`,
    { 'mcp.method.name': 'tools/call', 'dossier.tool': tool, 'dossier.team': caller.team },
    async (span) => {
      let args: Record<string, unknown>;
      try {
        const protocolKey = (request.params._meta as Record<string, unknown> | undefined)?.[
          PROTOCOL_KEY_META
        ];
        args = withProtocolKey(request.params.arguments, protocolKey, isLaunchTool(contract));
      } catch (err) {
        return toCallToolResult({ ok: false, error: toToolError(err) });
      }
      const progressToken = request.params._meta?.progressToken;
      const onProgress =
        progressToken === undefined
          ? undefined
          : async (elapsedMs: number, facts: Record<string, unknown> | null) => {
              await ctx.mcpReq.notify({
                method: 'notifications/progress',
                params: {
                  progressToken,
                  progress: elapsedMs,
                  message: facts ? `running: ${JSON.stringify(facts)}` : 'running',
                },
              });
            };
      try {
        const result = await gateway.callTool(caller, name, args, {
          onProgress,
          // A client that cannot show a form is not asked: the cluster's policy decides (approval.ts).
          askHuman: canAsk(server) ? answeredApproval(ctx) : undefined,
          signal: ctx.mcpReq.signal,
          toolsets: toolsetsOf(gateway, ctx),
        });
        span.setAttribute(
          'dossier.outcome',
          result.ok ? String(result.value.status ?? 'ok') : result.error.code,
        );
        // A launch that outlives its wait becomes a task for a client that declared the extension.
        if (
          result.ok &&
          result.value.status === 'running' &&
          isLaunchTool(contract) &&
          declaresTasks(server)
        ) {
          span.setAttribute('dossier.outcome', 'task');
          return (await createTaskResult(gateway, caller, name, args)) as never;
        }
        return toCallToolResult(result);
      } catch (err) {
        if (!(err instanceof ApprovalRequired)) throw err;
        span.setAttribute('dossier.outcome', 'input_required');
        // A client that declared tasks gets a task that asks, answered by tasks/update on any replica.
        if (declaresTasks(server)) return (await askingTaskResult(gateway, caller, name, args, err)) as never;
        return inputRequired({
          inputRequests: { [APPROVAL_INPUT]: inputRequired.elicit(approvalForm(err.plan)) },
          requestState: await stateCodec.mint(
            { tool: name, key: err.plan.idempotency_key, digest: err.bodyDigest },
            ctx,
          ),
        }) as never;
      }
    },
  );
}

function canAsk(server: Server): boolean {
  const elicitation = server.getClientCapabilities()?.elicitation as Record<string, unknown> | undefined;
  return !!elicitation && (Object.keys(elicitation).length === 0 || !!elicitation.form);
}

/**
 * The approval gate in the stateless era: the answer arrives with the retry, in `inputResponses`,
 * beside the requestState sealed for this principal, tool, key and body; until then the call is
 * answered input_required (ApprovalRequired) and nothing is claimed. A state sealed for another
 * call (other arguments, another key) answers nothing: the caller is asked about this plan.
 */
function answeredApproval(ctx: ServerContext): AskHuman | undefined {
  return async (plan, bodyDigest) => {
    const state = ctx.mcpReq.requestState<ApprovalState>();
    const response = ctx.mcpReq.inputResponses?.[APPROVAL_INPUT] as
      { action?: string; content?: { approve?: unknown } } | undefined;
    const forThisCall =
      typeof state === 'object' &&
      state !== null &&
      state.tool === plan.tool &&
      state.key === plan.idempotency_key &&
      state.digest === bodyDigest;
    if (!forThisCall || !response) throw new ApprovalRequired(plan, bodyDigest);
    return response.action === 'accept' && response.content?.approve === true ? 'approved' : 'declined';
  };
}
