import type { Redis } from 'ioredis';
import type { PrismaClient } from '../../generated/prisma/client.ts';
import type { Logger } from '../logger.ts';
import { StartupError } from '../startupError.ts';

/** Under the key prefix: the identity of the database the prefix's live state belongs to. */
const OWNER_KEY = 'database';
const DELETE_PAGE = 1000;

/**
 * The database's identity: the id `_prisma_migrations` gave its first migration, a random
 * UUID written once and kept by every later migration. A database created anew (the
 * embedded one deleted, DATABASE_URL pointed at another) gets another.
 */
export async function databaseIdentity(prisma: PrismaClient): Promise<string> {
  const [first] = await prisma.$queryRaw<{ id: string }[]>`SELECT id FROM "_prisma_migrations" ORDER BY started_at, migration_name LIMIT 1`;
  return first!.id;
}

export interface PrefixClaim {
  redis: Redis;
  keyPrefix: string;
  databaseId: string;
  /**
   * An embedded database this start created: whatever the prefix holds was left by
   * another one, deleted with its folder, so its keys go. A PostgreSQL server never takes
   * over: an empty database there more likely means a wrong DATABASE_URL than a lost one.
   * Nor does an empty prefix, which would be the whole Redis database.
   */
  takeOver: boolean;
  log: Logger;
}

/**
 * Redis's live state (balances, stock, journals, remembered answers) belongs to one
 * database: served against another, it would hand out points and stock that database
 * never had, and answer requestIds it never saw. The first instance claims the prefix
 * for its database; an instance of another database refuses to start on it, unless it
 * may take it over.
 */
export async function claimKeyPrefix({ redis, keyPrefix, databaseId, takeOver, log }: PrefixClaim): Promise<void> {
  if (takeOver && keyPrefix !== '') {
    const owner = await redis.get(OWNER_KEY);
    if (owner === databaseId) return;
    const deleted = await deleteAllKeys(redis, keyPrefix);
    if (deleted > 0) log.warn({ keyPrefix, deleted, previousDatabase: owner }, 'a new embedded database: deleted the Redis keys another database left under the prefix');
    await redis.set(OWNER_KEY, databaseId);
    return;
  }
  const owner = await redis.set(OWNER_KEY, databaseId, 'NX', 'GET');
  if (owner !== null && owner !== databaseId) {
    throw new StartupError(
      `the Redis keys under REDIS_KEY_PREFIX="${keyPrefix}" belong to another database (${owner}; this one is ${databaseId}). ` +
        `Set another REDIS_KEY_PREFIX, or, if that database is gone for good, delete its keys: redis-cli --scan --pattern '${keyPrefix}*' | xargs redis-cli del`,
    );
  }
}

async function deleteAllKeys(redis: Redis, keyPrefix: string): Promise<number> {
  let deleted = 0;
  let cursor = '0';
  do {
    // SCAN matches whole key names; ioredis adds the prefix to DEL's arguments itself.
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${keyPrefix}*`, 'COUNT', DELETE_PAGE);
    cursor = next;
    if (keys.length > 0) deleted += await redis.del(...keys.map((key) => key.slice(keyPrefix.length)));
  } while (cursor !== '0');
  return deleted;
}
