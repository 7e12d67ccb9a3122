// Starting a launch's workflow: the request it runs with, the start options
// that find it in the audit (memo, search attributes), and what a failure to
// start means (Temporal unreachable: pending, or refused).
import type { Client } from '@temporalio/client';
import { DossierError } from '../domain/errors.ts';
import type { Config } from '../config.ts';
import type { LaunchRecord } from '../domain/types.ts';
import type { LaunchRequest } from '../launches/protocol.ts';
import type { DeviceStore } from '../store/devices.ts';
import { capabilityQueue } from '../temporal/queues.ts';
import { auditAttributes, launchTargets, SEARCH_ATTRIBUTES } from '../temporal/searchAttributes.ts';
import { RUN_ONCE, startOrAttachWorkflow } from '../temporal/start.ts';
import { DEFAULT_MAX_RUN_MS, type ToolContract } from '../tools/contract.ts';
import { grpcCode } from './waiting.ts';

/** gRPC statuses that mean Temporal could not be reached (try again later). */
const GRPC_UNREACHABLE = new Set([4, 14]); // DEADLINE_EXCEEDED, UNAVAILABLE

/**
 * What the launch's effect runs with, from its claimed record. Only a local dispatch is the
 * workflow's to know; a standalone one has no workflow, and its worker knows it from its own setting.
 */
export function launchRequest(
  record: LaunchRecord,
  contract: ToolContract,
  dispatch: Config['launchDispatch'] | undefined,
): LaunchRequest {
  const input = record.input as Record<string, unknown>;
  return {
    workflowId: record.workflowId,
    tool: record.tool,
    capability: contract.runsOn,
    input,
    principal: record.principal,
    team: record.team,
    key: record.key,
    bodyDigest: record.bodyDigest,
    investigation: record.investigation,
    maxRunMs: contract.maxRunMs?.(input) ?? DEFAULT_MAX_RUN_MS,
    ...(dispatch === 'local' ? { dispatch } : {}),
  };
}

/**
 * Starts the launch's workflow, or finds the run its key already has (closed already, with
 * REJECT_DUPLICATE: this key's one run exists, and the call attaches to it); gives up on Temporal
 * at `deadline` with provider_unavailable. Answers the run's id.
 */
export async function startLaunchWorkflow(
  client: Client,
  record: LaunchRecord,
  contract: ToolContract,
  how: {
    deadline: number;
    device: Awaited<ReturnType<typeof deviceAttributes>>;
    eagerStart?: boolean;
    dispatch?: Config['launchDispatch'];
  },
): Promise<string> {
  const request = launchRequest(record, contract, how.dispatch);
  try {
    const { runId } = await client.connection.withDeadline(how.deadline, () =>
      startOrAttachWorkflow(client, 'launchWorkflow', {
        // On its capability's queue, which every worker polls for workflows: the worker that serves
        // the capability is handed the effect with the workflow task that schedules it.
        taskQueue: capabilityQueue(contract.runsOn),
        workflowId: record.workflowId,
        args: [request],
        ...RUN_ONCE,
        ...(how.eagerStart ? { requestEagerStart: true } : {}),
        memo: {
          tool: record.tool,
          principal: record.principal,
          team: record.team,
          key: record.key,
          body_digest: record.bodyDigest,
        },
        typedSearchAttributes: [
          ...auditAttributes({ ...record, targets: launchTargets(request.input) }),
          ...how.device,
        ],
      }),
    );
    return runId;
  } catch (err) {
    throw unavailable(err);
  }
}

/** A device operation is found in the audit by its device and the device's kind. */
export async function deviceAttributes(devices: DeviceStore | undefined, record: LaunchRecord) {
  const id = (record.input as { device?: unknown }).device;
  if (typeof id !== 'string' || !devices) return [];
  const device = await devices.get(record.team, id);
  return [
    { key: SEARCH_ATTRIBUTES.device, value: id },
    ...(device ? [{ key: SEARCH_ATTRIBUTES.deviceKind, value: device.kind }] : []),
  ];
}

export function unavailable(err: unknown, what: 'start' | 'cancel' = 'start'): DossierError {
  const wrapped = new DossierError(
    'provider_unavailable',
    `Temporal could not ${what} the launch: ${(err as Error).message}`,
    what === 'start'
      ? 'Nothing more is needed: the gateway starts the launch once Temporal is back (within 15 minutes; later it is recorded as never started). Retrying the same call with the same idempotency_key is safe and attaches to it.'
      : 'Retry cancel_launch once Temporal is reachable.',
  );
  return Object.assign(wrapped, { cause: err });
}

/** Temporal could not be reached (no answer, or none in time), as opposed to answering with a refusal. */
export function unreachable(err: unknown): boolean {
  const code = grpcCode(err);
  return code === undefined || GRPC_UNREACHABLE.has(code);
}
