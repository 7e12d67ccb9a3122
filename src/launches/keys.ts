// Body digests and workflow IDs of launches. Pure functions.
import { digestOf } from '../domain/canonical.ts';
import { IDEMPOTENCY_KEY } from '../tools/contract.ts';

/** Fields that steer a call or shape its reply but are not part of what the launch does. */
export const NON_BODY_FIELDS = ['idempotency_key', 'wait_ms', 'detail'] as const;

/** SHA-256 of the canonical JSON of {tool, input} after defaults, without the key, wait_ms and detail. */
export function bodyDigest(tool: string, input: Record<string, unknown>): string {
  const body: Record<string, unknown> = { ...input };
  for (const field of NON_BODY_FIELDS) delete body[field];
  return digestOf({ tool, input: body });
}

/**
 * The top-level fields in which two launch bodies differ, by name only (never their values): a
 * field present in one and absent in the other differs too. The fields that are not part of a body
 * are never named.
 */
export function differingFields(first: Record<string, unknown>, second: Record<string, unknown>): string[] {
  const skip = new Set<string>(NON_BODY_FIELDS);
  const fieldDigest = (body: Record<string, unknown>, name: string) =>
    Object.hasOwn(body, name) && body[name] !== undefined ? digestOf(body[name]) : null;
  return [...new Set([...Object.keys(first), ...Object.keys(second)])]
    .filter((name) => !skip.has(name) && fieldDigest(first, name) !== fieldDigest(second, name))
    .sort();
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

/**
 * An analysis is named by what was asked, not by who: the digest of {tool,
 * input} (without the reply-shaping fields) and the provider's key, so the
 * same question from anyone in the team is the same analysis.
 */
export function analysisKey(tool: string, input: Record<string, unknown>, providerKey: string): string {
  const body: Record<string, unknown> = { ...input };
  for (const field of NON_BODY_FIELDS) delete body[field];
  return digestOf({ tool, input: body, provider: providerKey });
}

/** `analysis/<team>/<key>`. */
export function analysisWorkflowId(team: string, key: string): string {
  if (!ID_PART.test(team)) throw new Error(`team name ${JSON.stringify(team)} is not valid in a workflow ID`);
  return `analysis/${team}/${key}`;
}

/** The database key of an artifact under a profile and provider: `db:<artifact>:<profile>:<provider>`. */
export function databaseKey(artifact: string, profile: string, providerKey: string): string {
  return `db:${artifact}:${profile}:${providerKey}`;
}

/** `analysis-db/<team>/<artifact hex>/<profile>-<provider>`: one build per team, artifact, profile and provider. */
export function databaseWorkflowId(
  team: string,
  artifact: string,
  profile: string,
  providerKey: string,
): string {
  if (!ID_PART.test(team)) throw new Error(`team name ${JSON.stringify(team)} is not valid in a workflow ID`);
  return `analysis-db/${team}/${artifact.replace(/^sha256:/, '')}/${profile}-${providerKey}`;
}

/** What a workflow ID dossier makes names: its kind, its team and, for a launch, its principal. */
export interface WorkflowOwner {
  kind: 'launch' | 'analysis' | 'analysis-db';
  team: string;
  principal?: string;
}

/** The owner a workflow ID names (see the ID makers above); undefined for an ID dossier does not make. */
export function workflowOwner(id: string): WorkflowOwner | undefined {
  const [kind, team, principal] = id.split('/');
  if (!team || !ID_PART.test(team)) return undefined;
  if (kind === 'launch') return principal && ID_PART.test(principal) ? { kind, team, principal } : undefined;
  if (kind === 'analysis' || kind === 'analysis-db') return { kind, team };
  return undefined;
}
