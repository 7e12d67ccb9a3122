// Waiting for a workflow within one call's wait_ms, as launches and analyses
// both do: a gRPC deadline on the result (no leaked long poll), with the run's
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
  try {
    const handle = client.workflow.getHandle(workflowId, runId ?? undefined);
    await client.connection.withDeadline(deadline, () => handle.result());
    return { ended: true };
  } catch (error) {
    return Date.now() < deadline - 50 ? { ended: true, error } : { ended: false };
  } finally {
    if (ticker) clearInterval(ticker);
  }
}
