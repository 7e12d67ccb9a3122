// What a role may do beyond reading: one refusal, whatever route the change comes by (a tool,
// an HTTP route beside MCP, a task's cancel or its approval).
import { DossierError } from '../domain/errors.ts';
import type { Principal } from '../domain/types.ts';

/** Refuses a viewer `what` (a phrase: "call cancel_launch, which changes the world"). */
export function refuseViewer(caller: Principal, what: string, details?: Record<string, unknown>): void {
  if (caller.role !== 'viewer') return;
  throw new DossierError(
    'forbidden',
    `Your role (viewer) may not ${what}.`,
    'Ask an admin for an operator token.',
    details,
  );
}
