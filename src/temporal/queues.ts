// Task queue names, in one place: every worker polls WORKFLOW_TASK_QUEUE for
// workflow tasks and store bookkeeping, and one queue per capability it serves
// for that capability's launch workflows and their effects (on one queue, the
// effect is dispatched eagerly to the worker that scheduled it). Launches whose
// capability no worker runs workflows for start on WORKFLOW_TASK_QUEUE. Pure,
// so workflow code may import it.
export const WORKFLOW_TASK_QUEUE = 'dossier';

export function capabilityQueue(capability: string): string {
  return `dossier-${capability}`;
}
