import { afterAll, beforeAll } from 'vitest';
import type { Subscription } from './client.ts';
import type { TestEnv } from './env.ts';
import { type RedisCluster, startRedisCluster } from './redisCluster.ts';
import { type ServerProcess, startServerProcess, startServerProcesses } from './server.ts';
import { type Stores, openStores } from './stores.ts';

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

/** One server for the test file and direct connections to its stores; set before the file's tests run. */
export interface StartedServer {
  readonly server: ServerProcess;
  readonly stores: Stores;
}

/**
 * Starts one server on the file's env and opens its stores before the file's tests;
 * stops the server and drops the stores after them.
 */
export function startedServer(env: TestEnv): StartedServer {
  const context = {} as { server: ServerProcess; stores: Stores };
  beforeAll(async () => {
    context.server = await startServerProcess(env.vars);
    context.stores = openStores(env);
  });
  afterAll(async () => {
    await context.server?.stop();
    await context.stores?.cleanup();
  });
  return context;
}

/** Two server instances of one deployment (same schema, same key prefix) and direct connections to their stores. */
export interface TwoInstances {
  readonly server: ServerProcess;
  readonly other: ServerProcess;
  readonly stores: Stores;
  /** Keeps `subscription` to be closed after the file's tests, before the servers stop. */
  track<T>(subscription: Subscription<T>): Subscription<T>;
}

/**
 * Starts two instances of one deployment on the file's env, both at once, and opens the
 * stores before the file's tests. After them: closes every tracked subscription, runs
 * `beforeStop`, stops both servers (bounded) and drops the stores even when a server
 * failed to stop.
 */
export function twoInstances(env: TestEnv, options: { beforeStop?: () => Promise<unknown> } = {}): TwoInstances {
  const open: Subscription<unknown>[] = [];
  const context = {
    track<T>(subscription: Subscription<T>): Subscription<T> {
      open.push(subscription as Subscription<unknown>);
      return subscription;
    },
  } as { server: ServerProcess; other: ServerProcess; stores: Stores } & Pick<TwoInstances, 'track'>;
  beforeAll(async () => {
    [context.server, context.other] = await startServerProcesses([env.vars, env.vars]);
    context.stores = openStores(env);
  });
  afterAll(async () => {
    for (const subscription of open) subscription.close();
    try {
      await options.beforeStop?.();
      await stopAll(context.server, context.other);
    } finally {
      await context.stores?.cleanup();
    }
  });
  return context;
}

/**
 * A Redis Cluster of the file's own, started before the file's other hooks and stopped
 * after them (after-hooks run in reverse), with the env's servers pointed at it: call it
 * before startedServer or the file's own beforeAll.
 */
export function clusterOfTheFile(env: TestEnv): { readonly cluster: RedisCluster } {
  const context = {} as { cluster: RedisCluster };
  beforeAll(async () => {
    context.cluster = await startRedisCluster();
    env.vars.REDIS_CLUSTER_NODES = context.cluster.nodes;
  }, 30_000);
  afterAll(async () => {
    await context.cluster?.stop();
  });
  return context;
}
