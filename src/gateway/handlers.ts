// The gateway's half of the tool registry: every contract that runs on the
// gateway is bound here to its handler, typed by the contract's own input.
// Launch contracts need no entry: every launch goes through the launch service,
// and its effect is bound on the worker (src/activities/effects.ts).
import type { z } from 'zod';
import type { Principal } from '../domain/types.ts';
import { awaitLaunch, cancelLaunch, getLaunch, listLaunches, whoami } from '../tools/launches.ts';
import {
  getEvidence,
  importEvidenceBundle,
  inspectAnalysisView,
  listArtifacts,
  listEvidence,
  getUnknown,
  listUnknowns,
  recordUnknown,
  registerArtifact,
  updateUnknown,
} from '../tools/ledger.ts';
import type { ToolContract, ToolInput } from '../tools/contract.ts';
import {
  findIdenticalFunctions,
  getAnnotation,
  listAnnotationEvents,
  listAnnotations,
  listCarriedAnnotations,
  revertAnnotation,
  setAnnotation,
} from '../tools/knowledge.ts';
import { getDevice, listDevices, registerDevice, retireDevice } from '../tools/devices.ts';
import { enableToolsets, listToolsets } from '../tools/toolsetTools.ts';
import { describeToolsets, enableToolsets as enable, type ToolsetChoice } from './toolsets.ts';
import { registerRules } from '../tools/rules.ts';
import { registerRuleBundle } from './rules.ts';
import type { LaunchReply, LaunchService, WaitOptions } from './launchService.ts';
import type { DeviceRegistry } from './devices.ts';
import type { Detail, Ledger } from './ledger.ts';
import { fitList } from './lists.ts';
import { TOOLS_BY_NAME } from '../tools/catalog.ts';
import { DossierError } from '../domain/errors.ts';

/** A tool filter names a tool of this gateway: a misspelt one would list nothing, silently. */
function knownTool<T extends { tool?: string }>(input: T): T {
  if (input.tool !== undefined && !TOOLS_BY_NAME.has(input.tool))
    throw new DossierError(
      'invalid_params',
      `No tool is named "${input.tool}".`,
      'Filter by a tool name from tools/list (e.g. capture_process_scenario), or omit tool.',
      { tool: input.tool },
    );
  return input;
}

export interface HandlerContext {
  caller: Principal;
  launches: LaunchService;
  ledger: Ledger;
  devices: DeviceRegistry;
  namespace: string;
  uiUrl: string;
  /** Waiting as the call asked (progress notifications included). */
  wait(waitMs: number): WaitOptions;
  /** The toolsets this connection lists, and whether it may list more. */
  toolsets: ToolsetChoice;
  /** A launch reply with its result delivered within its budget (ledger.ts, deliver). */
  deliver(reply: LaunchReply, detail: Detail): Promise<Record<string, unknown>>;
}

type Reply = Promise<Record<string, unknown>>;

export interface GatewayBinding {
  contract: ToolContract;
  /** A method: bound by `handler` below to a function of the contract's own parsed input. */
  handle(input: ToolInput, ctx: HandlerContext): Reply;
}

/** Binds a contract to its handler; the handler sees the contract's parsed input, typed. */
export function handler<I extends z.ZodObject>(
  contract: ToolContract<I>,
  handle: (input: z.output<I>, ctx: HandlerContext) => Reply,
): GatewayBinding {
  return { contract, handle };
}

export const GATEWAY_HANDLERS: readonly GatewayBinding[] = [
  handler(getLaunch, async (i, c) => c.deliver(await c.launches.get(c.caller, i.idempotency_key), 'summary')),
  handler(awaitLaunch, async (i, c) =>
    c.deliver(await c.launches.await(c.caller, i.idempotency_key, c.wait(i.wait_ms)), 'summary'),
  ),
  handler(cancelLaunch, async (i, c) => ({
    ...(await c.launches.cancel(c.caller, i.idempotency_key, c.wait(10_000))),
  })),
  handler(listLaunches, async (i, c) =>
    fitList('launches', await c.launches.list(c.caller, knownTool(i)), c.ledger.replyBudgetBytes),
  ),
  handler(inspectAnalysisView, (i, c) => c.ledger.inspect(c.caller, i.evidence_id, i.view)),
  handler(getEvidence, (i, c) => c.ledger.get(c.caller, i.evidence_id)),
  handler(listEvidence, ({ workflow_id: workflowId, ...rest }, c) =>
    c.ledger.list(c.caller, { ...knownTool(rest), workflowId }),
  ),
  handler(recordUnknown, (i, c) => c.ledger.recordUnknown(c.caller, i)),
  handler(updateUnknown, (i, c) => c.ledger.updateUnknown(c.caller, i)),
  handler(getUnknown, (i, c) => c.ledger.getUnknown(c.caller, i)),
  handler(listUnknowns, (i, c) => c.ledger.listUnknowns(c.caller, i)),
  handler(importEvidenceBundle, (i, c) => c.ledger.intake.importBundle(c.caller, i.path)),
  handler(registerArtifact, (i, c) =>
    i.path !== undefined
      ? c.ledger.intake.registerArtifact(c.caller, i.path, i.name)
      : c.ledger.intake.registerExtracted(c.caller, i.evidence_id!, i.entry!, i.name),
  ),
  handler(listArtifacts, (i, c) => c.ledger.intake.listArtifacts(c.caller, i)),
  handler(registerRules, (i, c) => registerRuleBundle(c.ledger.intake, c.caller, i)),
  handler(setAnnotation, (i, c) => c.ledger.knowledge.set(c.caller, i)),
  handler(getAnnotation, (i, c) => c.ledger.knowledge.get(c.caller, i)),
  handler(revertAnnotation, (i, c) => c.ledger.knowledge.revert(c.caller, i)),
  handler(listAnnotations, (i, c) => c.ledger.knowledge.list(c.caller, i)),
  handler(listAnnotationEvents, (i, c) => c.ledger.knowledge.events(c.caller, i)),
  handler(listCarriedAnnotations, (i, c) => c.ledger.knowledge.carried(c.caller, i)),
  handler(findIdenticalFunctions, (i, c) => c.ledger.knowledge.identical(c.caller, i)),
  handler(registerDevice, (i, c) => c.devices.register(c.caller, i)),
  handler(listDevices, async (i, c) =>
    fitList('devices', await c.devices.list(c.caller, i), c.ledger.replyBudgetBytes),
  ),
  handler(getDevice, (i, c) => c.devices.get(c.caller, i.device)),
  handler(retireDevice, (i, c) => c.devices.retire(c.caller, i.device)),
  handler(whoami, async (_i, c) => ({
    principal: c.caller.principal,
    team: c.caller.team,
    role: c.caller.role,
    toolsets: [...c.toolsets.listed],
    namespace: c.namespace,
    ui_url: c.uiUrl,
    inbox: c.ledger.intake.inboxFolder(c.caller) ?? null,
  })),
  handler(listToolsets, async (_i, c) => describeToolsets(c.toolsets)),
  handler(enableToolsets, (i, c) => enable(c.toolsets, i.toolsets)),
];
