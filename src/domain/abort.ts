// Reacting to an abort signal that may already have fired: a listener added
// after the abort would never run, so a cancel that arrives while an effect is
// still setting up would be lost.

/** Runs `fn` when `signal` aborts, or at once if it already has; returns the remover. */
export function whenAborted(signal: AbortSignal, fn: () => void): () => void {
  if (signal.aborted) {
    fn();
    return () => undefined;
  }
  signal.addEventListener('abort', fn, { once: true });
  return () => signal.removeEventListener('abort', fn);
}
