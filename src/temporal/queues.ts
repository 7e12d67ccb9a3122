// Task queue names, in one place. Every worker polls WORKFLOW_TASK_QUEUE for
// analysis database workflows and store bookkeeping, and every capability's
// queue for that capability's launch workflows (and, on dossier-analysis, the
// analysis workflows); it takes effects only from the queues of the
// capabilities it serves. With a workflow and its activity on one queue, the
// activity is handed to the worker whose workflow task scheduled it (eager
// activity dispatch). Pure, so workflow code may import it.
export const WORKFLOW_TASK_QUEUE = 'dossier';

export function capabilityQueue(capability: string): string {
  return `dossier-${capability}`;
}
