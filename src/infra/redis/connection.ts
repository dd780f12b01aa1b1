import { Redis } from 'ioredis';
import type { Logger } from '../logger.ts';
import { StartupError, describeCause } from '../startupError.ts';

export interface RedisOptions {
  url: string;
  keyPrefix: string;
}

/** A connection that gives up quickly at start, so a wrong REDIS_URL is reported rather than retried forever. */
export function createRedis({ url, keyPrefix }: RedisOptions, name: string): Redis {
  return new Redis(url, {
    keyPrefix,
    connectionName: `campaign-backend:${name}`,
    lazyConnect: true,
    maxRetriesPerRequest: 3,
    retryStrategy: (attempt) => Math.min(attempt * 100, 2000),
    // Commands issued in the same tick go out in one write: fewer syscalls under a storm.
    enableAutoPipelining: true,
  });
}

export async function connectRedis(redis: Redis, url: string): Promise<void> {
  // Without a listener ioredis prints "Unhandled error event" and a stack to stderr;
  // the socket error is also the useful cause (connect() itself only says "Connection is closed").
  let socketError: unknown;
  const onError = (error: unknown) => (socketError ??= error);
  redis.on('error', onError);
  try {
    await redis.connect();
  } catch (error) {
    redis.disconnect();
    throw new StartupError(`Redis is unreachable at REDIS_URL=${redactUrl(url)}: ${describeCause(socketError ?? error)}. Set REDIS_URL to a reachable server.`);
  }
  redis.off('error', onError);
}

/** Eviction would silently drop stock and locks, so only `noeviction` is accepted. */
export async function checkRedisServer(redis: Redis, log: Logger): Promise<void> {
  const [, policy] = (await redis.config('GET', 'maxmemory-policy')) as [string, string];
  if (policy !== 'noeviction') {
    throw new StartupError(
      `Redis maxmemory-policy is "${policy}"; it must be "noeviction", because eviction silently loses stock. ` +
        'Run CONFIG SET maxmemory-policy noeviction on the server REDIS_URL points at.',
    );
  }
  const [, aof] = (await redis.config('GET', 'appendonly')) as [string, string];
  if (aof !== 'yes') {
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
