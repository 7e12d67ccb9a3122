// Waiting for a workflow within one call's wait_ms, as launches and analyses
// both do: a gRPC deadline on the result (so no long poll outlives the wait by
// much) and a timer of our own (so the reply leaves on time), with the run's
// progress read from the store about once a second for MCP progress
// notifications.
import type { Client } from '@temporalio/client';

export interface WaitOptions {
  waitMs: number;
  /** Called about once a second while the call waits, with the run's latest progress facts. */
  onProgress?: (elapsedMs: number, facts: Record<string, unknown> | null) => Promise<void>;
}

const PROGRESS_POLL_MS = 1_000;

/**
 * Waits up to `wait.waitMs` for the workflow's result. Returns the error it
 * ended with when it ended before the deadline, undefined otherwise.
 */
export async function waitForWorkflow(
  client: Client,
  workflowId: string,
  runId: string | null,
  wait: WaitOptions,
  progress: () => Promise<Record<string, unknown> | null>,
): Promise<{ ended: boolean; error?: unknown }> {
  if (wait.waitMs <= 0) return { ended: false };
  const started = Date.now();
  const deadline = started + wait.waitMs;
  const ticker = wait.onProgress
    ? setInterval(() => {
        progress()
          .then((facts) => wait.onProgress?.(Date.now() - started, facts))
          .catch(() => undefined);
      }, PROGRESS_POLL_MS)
    : undefined;
  let timer: NodeJS.Timeout | undefined;
  try {
    const handle = client.workflow.getHandle(workflowId, runId ?? undefined);
    const result = client.connection.withDeadline(deadline, () => handle.result());
    result.catch(() => undefined);
    // The deadline alone did not always end the wait on time: under load, over the worker's
    // native connection, a 500 ms wait was answered after 6-10 s. The timer does.
    const late = new Promise<'late'>((resolve) => {
      timer = setTimeout(() => resolve('late'), Math.max(0, deadline - Date.now()));
    });
    const first = await Promise.race([result.then(() => 'ended' as const), late]);
    return { ended: first === 'ended' };
  } catch (error) {
    return Date.now() < deadline - 50 ? { ended: true, error } : { ended: false };
  } finally {
    if (timer) clearTimeout(timer);
    if (ticker) clearInterval(ticker);
  }
}
