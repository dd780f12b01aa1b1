/**
 * A problem that stops the server from starting and that the operator fixes by
 * changing configuration. main.ts prints the message as one line, without a stack.
 */
export class StartupError extends Error {}

/**
 * A store that could not be reached at start (refused, timed out): unlike a setting, it
 * may be back in a moment, so a restart may well succeed (main.ts exits 75, not 78).
 */
export class StoreUnreachableError extends StartupError {}

export function describeCause(error: unknown): string {
  if (error instanceof AggregateError && error.errors.length > 0) return describeCause(error.errors[0]);
  if (error instanceof Error) return (error as NodeJS.ErrnoException).code ?? error.message;
  return String(error);
}
