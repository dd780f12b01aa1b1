import type { Redis } from 'ioredis';
import type { PrismaClient } from '../../generated/prisma/client.ts';
import { StartupError } from '../startupError.ts';

/** Under the key prefix: the identity of the database the prefix's live state belongs to. */
const OWNER_KEY = 'database';

/**
 * The database's identity: the id `_prisma_migrations` gave its first migration, a random
 * UUID written once and kept by every later migration. A database created anew (the
 * embedded one deleted, DATABASE_URL pointed at another) gets another.
 */
export async function databaseIdentity(prisma: PrismaClient): Promise<string> {
  const [first] = await prisma.$queryRaw<{ id: string }[]>`SELECT id FROM "_prisma_migrations" ORDER BY started_at, migration_name LIMIT 1`;
  return first!.id;
}

/**
 * Redis's live state (balances, stock, journals, remembered answers) belongs to one
 * database: served against another, it would hand out points and stock that database
 * never had, and answer requestIds it never saw. The first instance claims the prefix
 * for its database; an instance of another database refuses to start on it.
 */
export async function claimKeyPrefix(redis: Redis, databaseId: string, keyPrefix: string): Promise<void> {
  const owner = await redis.set(OWNER_KEY, databaseId, 'NX', 'GET');
  if (owner !== null && owner !== databaseId) {
    throw new StartupError(
      `the Redis keys under REDIS_KEY_PREFIX="${keyPrefix}" belong to another database (${owner}; this one is ${databaseId}). ` +
        `Set another REDIS_KEY_PREFIX, or, if that database is gone for good, delete its keys: redis-cli --scan --pattern '${keyPrefix}*' | xargs redis-cli del`,
    );
  }
}
