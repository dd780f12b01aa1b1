import { Redis } from 'ioredis';
import pg from 'pg';
import { TEST_DATABASE_URL, TEST_REDIS_URL, type TestEnv } from './env.ts';

/** Direct connections to the test file's schema and key prefix, to check invariants at the source. */
export interface Stores {
  sql: pg.Pool;
  redis: Redis;
  /** Drops the schema and every key under the prefix. */
  cleanup(): Promise<void>;
}

export function openStores(env: TestEnv): Stores {
  const sql = new pg.Pool({ connectionString: TEST_DATABASE_URL, max: 4, options: `-c search_path="${env.schema}"` });
  const redis = new Redis(TEST_REDIS_URL, { keyPrefix: env.keyPrefix });
  return {
    sql,
    redis,
    async cleanup() {
      await deleteKeys(redis, env.keyPrefix);
      await sql.query(`DROP SCHEMA IF EXISTS "${env.schema}" CASCADE`);
      await sql.end();
      redis.disconnect();
    },
  };
}

/** Deletes every key under the prefix, as a Redis data loss would. */
export async function deleteKeys(redis: Redis, keyPrefix: string, pattern = '*'): Promise<number> {
  let cursor = '0';
  let deleted = 0;
  do {
    // SCAN returns full key names; keyPrefix would be added a second time on DEL.
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${keyPrefix}${pattern}`, 'COUNT', 1000);
    cursor = next;
    if (keys.length > 0) deleted += await redis.del(...keys.map((key) => key.slice(keyPrefix.length)));
  } while (cursor !== '0');
  return deleted;
}

/**
 * Deletes every key under the prefix that matches `pattern` in one DEL, so the loss is
 * atomic, as when Redis restarts empty or fails over: no script ever sees a campaign
 * with some of its keys and not others. (`deleteKeys` deletes page by page.)
 */
export async function loseKeysAtOnce(redis: Redis, keyPrefix: string, pattern = '*'): Promise<number> {
  const keys = new Set<string>();
  let cursor = '0';
  do {
    const [next, page] = await redis.scan(cursor, 'MATCH', `${keyPrefix}${pattern}`, 'COUNT', 1000);
    cursor = next;
    for (const key of page) keys.add(key.slice(keyPrefix.length));
  } while (cursor !== '0');
  return keys.size > 0 ? redis.del(...keys) : 0;
}
