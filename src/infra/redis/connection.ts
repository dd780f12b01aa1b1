import { Cluster, type RedisOptions as IoRedisOptions, Redis } from 'ioredis';
import type { Logger } from '../logger.ts';
import { storeErrors } from '../metrics.ts';
import { StartupError, StoreUnreachableError, describeCause } from '../startupError.ts';

/** One Redis server, or a Redis Cluster (REDIS_CLUSTER_NODES): both run every command and script the service sends. */
export type RedisClient = Redis | Cluster;

export interface RedisOptions {
  url: string;
  keyPrefix: string;
  /** `host:port` of some cluster nodes; empty: the one server at `url`. */
  clusterNodes: string[];
  /** How long connectRedis waits for the connection to be ready (REDIS_CONNECT_TIMEOUT_MS). */
  connectTimeoutMs?: number;
  /** How long a command waits for its reply (REDIS_COMMAND_TIMEOUT_MS); unset: for ever. */
  commandTimeoutMs?: number;
}

export const DEFAULT_REDIS_CONNECT_TIMEOUT_MS = 30_000;
export const DEFAULT_REDIS_COMMAND_TIMEOUT_MS = 5_000;

/** Where the connections go, for messages: REDIS_URL, or the cluster's seed nodes. */
export function redisAddress({ url, clusterNodes }: RedisOptions): string {
  return clusterNodes.length > 0 ? `REDIS_CLUSTER_NODES=${clusterNodes.join(',')}` : `REDIS_URL=${redactUrl(url)}`;
}

/**
 * A connection that gives up quickly at start, so a wrong REDIS_URL is reported rather
 * than retried forever. `subscriber`: on a cluster, one that takes sharded subscriptions
 * (a connection to each primary).
 */
export function createRedis({ url, keyPrefix, clusterNodes, commandTimeoutMs }: RedisOptions, name: string, { subscriber = false } = {}): RedisClient {
  const options: IoRedisOptions = {
    keyPrefix,
    // A Redis that hangs (stopped, or cut off without a reset) closes no connection: without
    // a timeout every request waiting on it would wait for good, not answer SERVICE_UNAVAILABLE.
    commandTimeout: commandTimeoutMs,
    connectionName: `campaign-backend:${name}`,
    lazyConnect: true,
    maxRetriesPerRequest: 3,
    retryStrategy: (attempt: number) => Math.min(attempt * 100, 2000),
    // Commands issued in the same tick go out in one write: fewer syscalls under a storm.
    enableAutoPipelining: true,
  };
  const redis = clusterNodes.length === 0 ? new Redis(url, options) : clusterClient(url, keyPrefix, clusterNodes, subscriber, options);
  // Counted, not logged: ioredis reconnects on its own, and the requests it fails answer SERVICE_UNAVAILABLE.
  redis.on('error', () => storeErrors.inc({ source: 'redis' }));
  return redis;
}

function clusterClient(url: string, keyPrefix: string, clusterNodes: string[], subscriber: boolean, options: IoRedisOptions): Cluster {
  const { password, username } = new URL(url);
  const { keyPrefix: _, ...perNode } = options;
  return new Cluster(
    clusterNodes.map((node) => {
      const at = node.lastIndexOf(':');
      return { host: node.slice(0, at), port: Number(node.slice(at + 1)) };
    }),
    {
      keyPrefix,
      lazyConnect: true,
      enableAutoPipelining: true,
      shardedSubscribers: subscriber,
      clusterRetryStrategy: options.retryStrategy,
      // Without a periodic refresh the slot map is only mended by later redirects; after a
      // failover that leaves a quiet slot on a dead node until some command happens to land there.
      slotsRefreshInterval: 5_000,
      // Credentials, if any, come from REDIS_URL, as for a single server.
      redisOptions: { ...perNode, password: password ? decodeURIComponent(password) : undefined, username: username ? decodeURIComponent(username) : undefined },
    },
  );
}

/**
 * Every node a SCAN must visit: SCAN lists the keys of the node it runs on, so on a
 * cluster each primary is scanned in turn. The connections carry no key prefix.
 */
export function scanTargets(redis: RedisClient): Redis[] {
  return redis instanceof Cluster ? redis.nodes('master') : [redis];
}

/**
 * Resolves once the connection is ready. ioredis's Cluster#connect() never settles when its
 * first ready check finds cluster_state:fail (some slot without a live primary at that
 * moment): the retry that succeeds later only emits 'ready' (redis/ioredis#709). So 'ready'
 * counts too, and a connection still not ready after the timeout is refused, not awaited forever.
 */
/** Redis's replies to a missing or wrong password, or an unknown user. */
const REDIS_AUTH_REFUSED = /^(NOAUTH|WRONGPASS)|^ERR (AUTH|invalid (password|username))/;

export async function connectRedis(redis: RedisClient, options: RedisOptions): Promise<void> {
  const timeoutMs = options.connectTimeoutMs ?? DEFAULT_REDIS_CONNECT_TIMEOUT_MS;
  // The socket error is the useful cause (connect() itself only says "Connection is closed").
  let socketError: unknown;
  const onError = (error: unknown) => (socketError ??= error);
  let onReady = () => {};
  let timer: NodeJS.Timeout | undefined;
  redis.on('error', onError);
  try {
    await new Promise<void>((resolve, reject) => {
      onReady = resolve;
      redis.once('ready', onReady);
      timer = setTimeout(() => {
        const clusterHint = redis instanceof Cluster ? ' (a cluster is not ready while CLUSTER INFO says cluster_state:fail)' : '';
        reject(new Error(`not ready after ${timeoutMs} ms${clusterHint}`));
      }, timeoutMs);
      redis.connect().then(resolve, reject);
    });
  } catch (error) {
    redis.disconnect();
    const setting = options.clusterNodes.length > 0 ? 'REDIS_CLUSTER_NODES to reachable cluster nodes' : 'REDIS_URL to a reachable server';
    const cause = describeCause(socketError ?? error);
    // Refused credentials are a setting to fix; anything else may pass with the outage.
    const Refusal = REDIS_AUTH_REFUSED.test(cause) ? StartupError : StoreUnreachableError;
    throw new Refusal(`Redis is unreachable at ${redisAddress(options)}: ${cause}. Set ${setting}.`);
  } finally {
    clearTimeout(timer);
    redis.off('ready', onReady);
    redis.off('error', onError);
  }
}

/** Eviction would silently drop stock and locks, so only `noeviction` is accepted. */
export async function checkRedisServer(redis: RedisClient, log: Logger): Promise<void> {
  // CONFIG is per node: on a cluster every primary must say so.
  const nodes = scanTargets(redis);
  const policies = await Promise.all(nodes.map(async (node) => ((await node.config('GET', 'maxmemory-policy')) as [string, string])[1]));
  const policy = policies.find((value) => value !== 'noeviction');
  if (policy !== undefined) {
    throw new StartupError(
      `Redis maxmemory-policy is "${policy}"; it must be "noeviction", because eviction silently loses stock. ` +
        'Run CONFIG SET maxmemory-policy noeviction on the server REDIS_URL points at (on a cluster: on every node).',
    );
  }
  const aofs = await Promise.all(nodes.map(async (node) => ((await node.config('GET', 'appendonly')) as [string, string])[1]));
  if (aofs.some((aof) => aof !== 'yes')) {
    log.warn('Redis runs without AOF: after a Redis restart live state is rebuilt from PostgreSQL, and unpersisted journal entries are lost');
  }
}

function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return url;
  }
}
