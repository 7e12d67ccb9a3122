// The ends of launches and analyses this process records, told at once to the
// calls of this process waiting on them. The store row is what a reply says, so
// a call may answer as soon as the row is written rather than after the
// workflow's last task and its result's poll (tens of milliseconds here). An end
// recorded by another process (a worker of a cluster) is not told: those calls
// go on waiting for the workflow's result, as before.

export class Finishes {
  private readonly waiting = new Map<string, Set<() => void>>();

  /** The end of `workflowId` was written: every call of this process waiting on it may answer. */
  announce(workflowId: string): void {
    const waiters = this.waiting.get(workflowId);
    if (!waiters) return;
    this.waiting.delete(workflowId);
    for (const resolve of waiters) resolve();
  }

  /** Resolves when this process records the end of `workflowId`; `stop` forgets the wait. */
  watch(workflowId: string): { ended: Promise<void>; stop: () => void } {
    let resolve!: () => void;
    const ended = new Promise<void>((r) => (resolve = r));
    let waiters = this.waiting.get(workflowId);
    if (!waiters) this.waiting.set(workflowId, (waiters = new Set()));
    waiters.add(resolve);
    const stop = () => {
      const current = this.waiting.get(workflowId);
      if (!current?.delete(resolve)) return;
      if (current.size === 0) this.waiting.delete(workflowId);
    };
    return { ended, stop };
  }
}
