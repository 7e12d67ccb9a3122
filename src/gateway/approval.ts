// The approval gate of process launches (seed 000's prepare_bounded_process_capture):
// before a capture claims its key, a human sees exactly what will run and says
// yes. The transport asks (MCP form elicitation); where the client cannot be
// asked, the cluster's policy decides. A retry of a key already claimed is
// never asked again: it attaches to what was approved.
import { DossierError } from '../domain/errors.ts';
import type { Principal } from '../domain/types.ts';
import type { ToolContract } from '../tools/contract.ts';
import type { Config } from '../config.ts';

/** What a human approves: the exact program, its arguments, limits and isolation. */
export interface ApprovalPlan {
  tool: string;
  idempotency_key: string;
  executable: string;
  args: string[];
  env_names: string[];
  stdin_bytes: number | null;
  timeout_ms: number;
  limits: Record<string, unknown>;
  isolation: string;
  network: boolean;
  tracing: string | null;
}

/**
 * How the transport asks a human; absent when the client cannot be asked. `bodyDigest` is the
 * digest of the call's body, which an answer given on another request must have been asked for.
 */
export type AskHuman = (
  plan: ApprovalPlan,
  bodyDigest: string,
) => Promise<'approved' | 'declined' | 'unanswered'>;

/**
 * Thrown by an AskHuman that cannot hold the call open for the answer (the stateless era): the
 * transport answers input_required with the form, and the client's retry carries the answer.
 * Nothing was claimed.
 */
export class ApprovalRequired extends Error {
  constructor(
    readonly plan: ApprovalPlan,
    readonly bodyDigest: string,
  ) {
    super(`approval of ${plan.tool} ${plan.idempotency_key} is asked of the client`);
  }
}

export function planOf(contract: ToolContract, input: Record<string, unknown>): ApprovalPlan {
  return {
    tool: contract.name,
    idempotency_key: String(input.idempotency_key),
    executable: String(input.executable),
    args: (input.args as string[] | undefined) ?? [],
    env_names: Object.keys((input.env as Record<string, string> | undefined) ?? {}).sort(),
    stdin_bytes: typeof input.stdin === 'string' ? Buffer.byteLength(input.stdin) : null,
    timeout_ms: Number(input.timeout_ms),
    limits: (input.limits as Record<string, unknown> | undefined) ?? {},
    isolation: String(input.isolation ?? 'sandbox'),
    network: input.network === true,
    tracing:
      contract.name === 'observe_native_calls'
        ? 'ltrace'
        : input.trace_syscalls === true || input.trace_filter !== undefined
          ? 'strace'
          : null,
  };
}

/** The plan as the human reads it in the approval form. */
export function describePlan(plan: ApprovalPlan): string {
  const quoted = [plan.executable, ...plan.args].map((a) => JSON.stringify(a)).join(' ');
  return [
    `An agent asks dossier to run a program (${plan.tool}, key ${plan.idempotency_key}):`,
    `  ${quoted}`,
    `environment: ${plan.env_names.length ? plan.env_names.join(', ') : '(empty)'}; stdin: ${plan.stdin_bytes === null ? 'none' : `${plan.stdin_bytes} bytes`}`,
    `limits: timeout ${plan.timeout_ms} ms, ${Object.entries(plan.limits)
      .map(([k, v]) => `${k} ${String(v)}`)
      .join(', ')}`,
    `isolation: ${plan.isolation}${plan.network ? ', with network' : ', no network'}${plan.tracing ? `, traced with ${plan.tracing}` : ''}`,
    'Approve to run it once; decline and nothing runs.',
  ].join('\n');
}

/** The form that asks a human to approve `plan` (MCP form elicitation, either protocol revision). */
export function approvalForm(plan: ApprovalPlan) {
  return {
    mode: 'form' as const,
    message: describePlan(plan),
    requestedSchema: {
      type: 'object' as const,
      properties: {
        approve: {
          type: 'boolean' as const,
          title: 'Run it',
          description: `Run ${plan.executable} once, as shown`,
        },
      },
      required: ['approve'],
    },
  };
}

/**
 * Decides whether a process launch may claim its key: asks the human when it
 * can, applies the policy when it cannot. Throws policy_denied on a refusal.
 */
export async function approveLaunch(
  policy: Config['approval'],
  caller: Principal,
  contract: ToolContract,
  input: Record<string, unknown>,
  bodyDigest: string,
  ask: AskHuman | undefined,
): Promise<'approved' | 'policy'> {
  const plan = planOf(contract, input);
  if (!ask) {
    if (policy.withoutElicitation === 'require') {
      throw new DossierError(
        'policy_denied',
        `This cluster runs a process launch only after a human approves it, and your client cannot be asked (it does not support MCP form elicitation); nothing ran and key ${plan.idempotency_key} was not claimed.`,
        'Use a client that supports elicitation, or ask an admin to set DOSSIER_APPROVAL_WITHOUT_ELICITATION=operators.',
        { reason: 'approval_unavailable' },
      );
    }
    return 'policy';
  }
  const answer = await ask(plan, bodyDigest);
  if (answer === 'unanswered') {
    throw new DossierError(
      'policy_denied',
      `No answer came to the approval form for ${plan.executable} (the client failed or the human did not answer in time); nothing ran and key ${plan.idempotency_key} was not claimed.`,
      'Call again with the same key when a human can answer.',
      { reason: 'approval_unanswered' },
    );
  }
  if (answer !== 'approved') {
    throw new DossierError(
      'policy_denied',
      `The human declined to run ${plan.executable}; nothing ran and key ${plan.idempotency_key} was not claimed.`,
      'Change the plan (program, arguments, limits) and ask again; the same key may be used, since nothing was claimed.',
      { reason: 'approval_declined', approver_of: caller.principal },
    );
  }
  return 'approved';
}
