// Task queue names, in one place. Every worker polls WORKFLOW_TASK_QUEUE for
// analysis workflows and store bookkeeping, and every capability's queue for
// that capability's launch workflows; it takes effects only from the queues of
// the capabilities it serves. With a launch and its effect on one queue, the
// effect is handed to the worker whose workflow task scheduled it (eager
// activity dispatch). Pure, so workflow code may import it.
export const WORKFLOW_TASK_QUEUE = 'dossier';

export function capabilityQueue(capability: string): string {
  return `dossier-${capability}`;
}
