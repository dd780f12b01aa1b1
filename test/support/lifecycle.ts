import type { ServerProcess } from './server.ts';

/** Rejects with `what` if `promise` has not settled within `ms`. */
export async function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * SIGTERM and wait for the exit code, but never longer than `ms`: a server that hangs
 * in shutdown is SIGKILLed (so no process outlives the test file) and reported.
 */
export async function stopWithin(server: ServerProcess, ms = 20_000): Promise<number | null> {
  try {
    return await withTimeout(server.stop(), ms, 'graceful stop');
  } catch (error) {
    await server.kill();
    throw new Error(`${(error as Error).message}; killed it. Last output:\n${server.output().slice(-4000)}`);
  }
}

/** Stops every server given (bounded), even when one of them fails to stop. */
export async function stopAll(...servers: (ServerProcess | undefined)[]): Promise<void> {
  const results = await Promise.allSettled(servers.filter((server) => server !== undefined).map((server) => stopWithin(server)));
  const failed = results.find((result): result is PromiseRejectedResult => result.status === 'rejected');
  if (failed) throw failed.reason;
}
