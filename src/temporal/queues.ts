// Task queue names, in one place: every worker polls WORKFLOW_TASK_QUEUE for
// workflow tasks and store bookkeeping, and one queue per capability it serves
// for the effects. Pure, so workflow code may import it.
export const WORKFLOW_TASK_QUEUE = 'dossier';

export function capabilityQueue(capability: string): string {
  return `dossier-${capability}`;
}
