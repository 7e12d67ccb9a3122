// What dossier answers over MCP whatever the protocol revision: the tool,
// prompt and resource lists, a prompt, an Evidence resource, a completion, and
// every failure as one JSON-RPC error. The two adapters translate these to
// their SDK (server.ts: the handshake era on the SDK's v1; modern.ts: the
// stateless 2026-07-28 era on its v2) and hold no rule of their own.
import { toToolError, type ToolError } from '../domain/errors.ts';
import { PRODUCT } from '../domain/product.ts';
import type { Principal } from '../domain/types.ts';
import { EVIDENCE_TEMPLATE } from '../gateway/completion.ts';
import type { Gateway } from '../gateway/gateway.ts';
import { PROMPTS, PROMPTS_BY_NAME, renderPrompt, type ApprovalRoute } from '../tools/prompts.ts';

export const SERVER_INFO = PRODUCT;

export const INSTRUCTIONS =
  'dossier runs reverse-engineering tools on a shared cluster. Tools with effects need an idempotency_key: retry with the same key after any failure to reach the same launch. Results are retained as Evidence and referenced by evidence_id; a large one comes as a summary plus a continuation for inspect_analysis_view. tools/list shows the toolsets this connection chose: list_toolsets shows every tool, enable_toolsets lists more, and any tool is callable by name.';

/** JSON-RPC error codes dossier answers with. */
export const RPC = {
  invalidRequest: -32600,
  methodNotFound: -32601,
  invalidParams: -32602,
  internal: -32603,
  /** A request refused for a limit (server-defined range); its data carries retry_after_ms. */
  resourceConstraint: -32029,
} as const;

/** A failure of a non-tool request, as the JSON-RPC error it is answered with. */
export class RpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
  }
}

/** Failures of what the caller asked (its arguments, its key's first body, its role, the policy): -32602. */
const CALLERS_CATEGORIES: readonly string[] = ['input', 'conflict', 'auth', 'policy'];

/** A tool error as the JSON-RPC error of a non-tool request: its message, and the whole error as data. */
export function toRpcError(error: ToolError): RpcError {
  const code =
    error.code === 'resource_constraint'
      ? RPC.resourceConstraint
      : CALLERS_CATEGORIES.includes(error.category)
        ? RPC.invalidParams
        : RPC.internal;
  const retry = error.details.retry_after_ms;
  return new RpcError(code, error.message, {
    ...error,
    ...(retry !== undefined ? { retry_after_ms: retry } : {}),
  });
}

/** Anything thrown while answering, as the JSON-RPC error to send (never a stack or a store's own text). */
export function asRpcError(err: unknown): RpcError {
  return err instanceof RpcError ? err : toRpcError(toToolError(err));
}

/** The caller of a request, counted against its rate; over it, an error whose data says when to retry. */
export async function admit(gateway: Gateway, caller: Principal | undefined): Promise<Principal> {
  if (!caller) throw new RpcError(RPC.invalidRequest, 'unauthenticated');
  const limited = await gateway.throttle(caller);
  if (limited)
    throw new RpcError(RPC.resourceConstraint, limited.message, { code: 'resource_constraint', ...limited });
  return caller;
}

export { listTools, type ListedTool } from '../tools/listing.ts';

export function listPrompts() {
  return PROMPTS.map((p) => ({
    name: p.name,
    title: p.title,
    description: p.description,
    arguments: p.arguments.map((a) => ({ name: a.name, description: a.description, required: a.required })),
  }));
}

/** How a capture will be approved for this client: its human when it can be asked, else the policy. */
export function approvalRoute(gateway: Gateway, canAskHuman: boolean): ApprovalRoute {
  const policy = gateway.approvalPolicy;
  if (policy?.mode !== 'elicit') return 'off';
  if (canAskHuman) return 'elicitation';
  return policy.withoutElicitation === 'require' ? 'policy-require' : 'policy-operators';
}

export function getPrompt(name: string, args: Record<string, string>, approval: ApprovalRoute) {
  const spec = PROMPTS_BY_NAME.get(name);
  if (!spec)
    throw new RpcError(RPC.invalidParams, `There is no prompt named "${name}"; prompts/list shows them.`, {
      name,
    });
  try {
    return {
      description: spec.description,
      messages: [
        {
          role: 'user' as const,
          content: { type: 'text' as const, text: renderPrompt(spec, args, { approval }) },
        },
      ],
    };
  } catch (err) {
    throw new RpcError(RPC.invalidParams, `Prompt ${spec.name}: ${(err as Error).message}`);
  }
}

/** The team's Evidence as resources (dossier://evidence/<evidence_id>, the summary view). */
export async function listResources(gateway: Gateway, caller: Principal, cursor: string | undefined) {
  const page = await gateway.callTool(caller, 'list_evidence', { cursor, limit: 50 });
  if (!page.ok) throw toRpcError(page.error);
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
}

export const RESOURCE_TEMPLATES = [
  {
    uriTemplate: EVIDENCE_TEMPLATE,
    name: 'evidence',
    title: 'Retained Evidence',
    description:
      "The summary view of one of your team's Evidence records; page its collections with inspect_analysis_view.",
    mimeType: 'application/json',
  },
];

/** One Evidence record's summary view; an unknown URI is invalid params naming the URI. */
export async function readResource(gateway: Gateway, caller: Principal, uri: string) {
  const id = /^dossier:\/\/evidence\/(ev_[0-9a-f]{64})$/.exec(uri)?.[1];
  if (!id)
    throw new RpcError(RPC.invalidParams, `Unknown resource ${uri}; resources/list shows them.`, { uri });
  const view = await gateway.callTool(caller, 'inspect_analysis_view', {
    evidence_id: id,
    view: { kind: 'summary' },
  });
  if (!view.ok) {
    const error = toRpcError(view.error);
    throw new RpcError(error.code, error.message, { ...(error.data as object), uri });
  }
  return { contents: [{ uri, mimeType: 'application/json', text: JSON.stringify(view.value) }] };
}

/** completion/complete: prompt arguments and the Evidence template's id, from the team's live state. */
export async function complete(
  gateway: Gateway,
  caller: Principal,
  params: {
    ref: { type: string; name?: string; uri?: string };
    argument: { name: string; value: string };
    context?: { arguments?: Record<string, string> };
  },
) {
  const { ref, argument } = params;
  if (ref.type === 'ref/resource')
    return { completion: await gateway.completeResource(caller, ref.uri!, argument.name, argument.value) };
  if (ref.type !== 'ref/prompt') return { completion: { values: [], total: 0, hasMore: false } };
  return {
    completion: await gateway.completePrompt(
      caller,
      ref.name!,
      argument.name,
      argument.value,
      params.context?.arguments ?? {},
    ),
  };
}
