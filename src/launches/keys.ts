// Idempotency keys, body digests and workflow IDs (brief §2). Pure functions.
import { z } from 'zod';
import { digestOf } from '../domain/canonical.ts';

export const IDEMPOTENCY_KEY = /^[A-Za-z0-9._:-]{1,128}$/;
export const WAIT_MS = { default: 20_000, max: 110_000 } as const;

export const idempotencyKeySchema = z
  .string({ error: 'idempotency_key is required: 1-128 characters of A-Z a-z 0-9 . _ : -' })
  .regex(IDEMPOTENCY_KEY, {
    error:
      'idempotency_key must be 1-128 characters of A-Z a-z 0-9 . _ : - (choose one key per intended effect)',
  })
  .describe(
    'Required. Your name for this one intended effect (1-128 of A-Z a-z 0-9 . _ : -). Retrying with the same key and body never runs it twice; reuse it only for the same call.',
  );

export const waitMsSchema = z
  .number()
  .int()
  .min(0)
  .max(WAIT_MS.max)
  .default(WAIT_MS.default)
  .describe(
    `How long this call waits for the launch to finish, in ms (default ${WAIT_MS.default}, at most ${WAIT_MS.max}); past it the reply is status "running" and await_launch continues.`,
  );

/** Fields that steer a call but are not part of what the launch does. */
export const NON_BODY_FIELDS = ['idempotency_key', 'wait_ms'] as const;

/** SHA-256 of the canonical JSON of {tool, input} after defaults, without the key and wait_ms. */
export function bodyDigest(tool: string, input: Record<string, unknown>): string {
  const body: Record<string, unknown> = { ...input };
  for (const field of NON_BODY_FIELDS) delete body[field];
  return digestOf({ tool, input: body });
}

const ID_PART = /^[a-z0-9][a-z0-9._-]{0,62}$/;

/** `launch/<team>/<principal>/<key>`: readable in the Temporal UI and unambiguous (no part holds a slash). */
export function launchWorkflowId(team: string, principal: string, key: string): string {
  if (!ID_PART.test(team)) throw new Error(`team name ${JSON.stringify(team)} is not valid in a workflow ID`);
  if (!ID_PART.test(principal))
    throw new Error(`principal name ${JSON.stringify(principal)} is not valid in a workflow ID`);
  if (!IDEMPOTENCY_KEY.test(key)) throw new Error(`idempotency key ${JSON.stringify(key)} is not valid`);
  return `launch/${team}/${principal}/${key}`;
}
