import { type Logger, logRepeating } from './logger.ts';

/**
 * Runs `task` every `intervalMs`, never two at once, and logs failures instead of
 * crashing (held back while they repeat): background sweepers must outlive a database or
 * Redis hiccup.
 */
export function every(intervalMs: number, name: string, task: (stopping: AbortSignal) => Promise<unknown>, log: Logger): () => Promise<void> {
  let running: Promise<void> | undefined;
  // Tells a long task (a delivery backlog, say) to stop at its next safe point when the process stops.
  const stopping = new AbortController();
  const tick = () => {
    if (running || stopping.signal.aborted) return;
    running = task(stopping.signal)
      .then(() => undefined)
      // A task's own window: each failing task still shows, whichever fails first.
      .catch((error: unknown) => logRepeating(log, 'error', { err: error, task: name }, 'background task failed', `background task failed: ${name}`))
      .finally(() => {
        running = undefined;
      });
  };
  const timer = setInterval(tick, intervalMs);
  timer.unref();
  return async () => {
    stopping.abort();
    clearInterval(timer);
    await running;
  };
}
