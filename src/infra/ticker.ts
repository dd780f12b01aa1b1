import type { Logger } from './logger.ts';

/**
 * Runs `task` every `intervalMs`, never two at once, and logs failures instead of
 * crashing: background sweepers must outlive a database or Redis hiccup.
 */
export function every(intervalMs: number, name: string, task: () => Promise<unknown>, log: Logger): () => Promise<void> {
  let running: Promise<void> | undefined;
  let stopped = false;
  const tick = () => {
    if (running || stopped) return;
    running = task()
      .then(() => undefined)
      .catch((error: unknown) => log.error({ err: error, task: name }, 'background task failed'))
      .finally(() => {
        running = undefined;
      });
  };
  const timer = setInterval(tick, intervalMs);
  timer.unref();
  return async () => {
    stopped = true;
    clearInterval(timer);
    await running;
  };
}
