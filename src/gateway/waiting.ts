// Waiting for a workflow within one call's wait_ms, as launches and analyses
// both do. All the calls waiting on one run share one long poll of its result
// (so a client looping short waits never piles up polls), and each call
// answers at its own deadline by a timer; the run's progress is read from the
// store about once a second for MCP progress notifications.
import {
  ActivityExecutionFailedError,
  ActivityNotFoundError,
  WorkflowFailedError,
  type Client,
} from '@temporalio/client';

export interface WaitOptions {
  waitMs: number;
  /** Called about once a second while the call waits, with the run's latest progress facts. */
  onProgress?: (elapsedMs: number, facts: Record<string, unknown> | null) => Promise<void>;
  /** Ends the wait at once: the call's client went away, or the gateway is stopping. */
  signal?: AbortSignal;
}

const PROGRESS_POLL_MS = 1_000;

/**
 * Waits up to `wait.waitMs` for the workflow's result, or for `recorded`: the
 * store's row of the run written as ended in this process (Finishes), which is
 * what the reply reads (the caller owns that watch, and stops it). Returns the
 * error the workflow ended with when it ended before the deadline, undefined
 * otherwise.
 */
export async function waitForWorkflow(
  client: Client,
  workflowId: string,
  runId: string | null,
  wait: WaitOptions,
  progress: () => Promise<Record<string, unknown> | null>,
  recorded?: { ended: Promise<void> },
  /** The run is a standalone activity (DOSSIER_LAUNCH_DISPATCH=standalone), or a workflow if none is found. */
  standalone = false,
): Promise<{ ended: boolean; error?: unknown }> {
  if (wait.waitMs <= 0 || wait.signal?.aborted) return { ended: false };
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
  let gone: (() => void) | undefined;
  const late = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => resolve('late'), Math.max(0, deadline - Date.now()));
    gone = () => resolve('late');
    wait.signal?.addEventListener('abort', gone, { once: true });
  });
  try {
    while (Date.now() < deadline && !wait.signal?.aborted) {
      try {
        const first = await Promise.race([
          sharedResult(client, workflowId, runId, standalone).then(() => 'ended' as const),
          // The store row the reply reads was written here: no need to wait for the workflow's end.
          ...(recorded ? [recorded.ended.then(() => 'ended' as const)] : []),
          late,
        ]);
        return { ended: first === 'ended' };
      } catch (error) {
        // Only the run's own end (failed, terminated, timed out, cancelled) is an end; a poll that
        // ran out of time or a Temporal that did not answer leaves it running, as far as we know.
        if (error instanceof WorkflowFailedError || error instanceof ActivityExecutionFailedError)
          return { ended: true, error };
        if (grpcCode(error) !== GRPC_DEADLINE_EXCEEDED) return { ended: false };
      }
    }
    return { ended: false };
  } finally {
    if (timer) clearTimeout(timer);
    if (ticker) clearInterval(ticker);
    if (gone) wait.signal?.removeEventListener('abort', gone);
  }
}

const GRPC_DEADLINE_EXCEEDED = 4;
/** How long one shared poll of a run's result lasts before the next waiter starts another. */
const SHARED_POLL_MS = 60_000;
const polls = new Map<string, Promise<unknown>>();

/** The result of a run, from one poll shared by every call waiting on it in this process. */
function sharedResult(
  client: Client,
  workflowId: string,
  runId: string | null,
  standalone: boolean,
): Promise<unknown> {
  const key = `${workflowId}\n${runId ?? ''}`;
  let poll = polls.get(key);
  if (!poll) {
    const workflow = () => client.workflow.getHandle(workflowId, runId ?? undefined).result();
    // A launch started before the gateway's dispatch changed is a workflow: found as one.
    const activity = () =>
      client.activity
        .getHandle(workflowId, runId ?? undefined)
        .result()
        .catch((err: unknown) => {
          if (err instanceof ActivityNotFoundError) return workflow();
          throw err;
        });
    poll = client.connection.withDeadline(Date.now() + SHARED_POLL_MS, standalone ? activity : workflow);
    polls.set(key, poll);
    const forget = () => {
      if (polls.get(key) === poll) polls.delete(key);
    };
    poll.then(forget, forget);
  }
  return poll;
}

/** The gRPC status code somewhere in an error's causes (Temporal's client wraps them). */
export function grpcCode(err: unknown): number | undefined {
  for (let e = err as { code?: unknown; cause?: unknown } | undefined, depth = 0; e && depth < 5; depth++) {
    if (typeof e.code === 'number') return e.code;
    e = e.cause as typeof e;
  }
  return undefined;
}
