import { once } from 'node:events';
import { Cluster } from 'ioredis';
import pg from 'pg';
import { type RedisClient, createRedis, scanTargets } from '../../src/infra/redis/connection.ts';
import { TEST_DATABASE_URL, TEST_REDIS_URL, type TestEnv } from './env.ts';

/** Direct connections to the test file's schema and key prefix, to check invariants at the source. */
export interface Stores {
  sql: pg.Pool;
  redis: RedisClient;
  /** Drops the schema and every key under the prefix. */
  cleanup(): Promise<void>;
}

export function openStores(env: TestEnv): Stores {
  const sql = new pg.Pool({ connectionString: TEST_DATABASE_URL, max: 4, options: `-c search_path="${env.schema}"` });
  // The file's servers' Redis: the shared one, a private one the test may kill, or a cluster.
  const clusterNodes = env.vars.REDIS_CLUSTER_NODES?.split(',') ?? [];
  const redis = createRedis({ url: env.vars.REDIS_URL ?? TEST_REDIS_URL, keyPrefix: env.keyPrefix, clusterNodes }, 'test-stores');
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

/** Every key under the prefix matching `pattern`, without the prefix (ioredis adds it back on use), sorted. */
async function scanKeys(redis: RedisClient, keyPrefix: string, pattern: string): Promise<string[]> {
  // A cluster client knows its primaries only once connected, and the stores connect lazily:
  // scanned before any other command, a cluster would look empty.
  if (redis.status !== 'ready') {
    const ready = once(redis, 'ready');
    if (redis.status === 'wait') await redis.connect();
    await ready;
  }
  const keys = new Set<string>();
  for (const node of scanTargets(redis)) {
    let cursor = '0';
    do {
      const [next, page] = await node.scan(cursor, 'MATCH', `${keyPrefix}${pattern}`, 'COUNT', 1000);
      cursor = next;
      for (const key of page) keys.add(key.slice(keyPrefix.length));
    } while (cursor !== '0');
  }
  return [...keys].sort();
}

/** The keys that hold state; rebuild markers (`…:rebuilding`) are short-lived locks and left out. */
export async function stateKeys(redis: RedisClient, keyPrefix: string, pattern = '*'): Promise<string[]> {
  return (await scanKeys(redis, keyPrefix, pattern)).filter((key) => !key.endsWith(':rebuilding'));
}

/**
 * Deletes every key under the prefix that matches `pattern` at once, as when Redis restarts
 * empty or fails over: no script ever sees a campaign with some of its keys and not others.
 * One DEL on a single Redis; on a cluster, whose DEL takes the keys of one slot, one DEL per
 * hash tag, all sent together: a campaign's keys share a tag, so each loses them in one step.
 */
export async function loseKeysAtOnce(redis: RedisClient, keyPrefix: string, pattern = '*'): Promise<number> {
  const keys = await scanKeys(redis, keyPrefix, pattern);
  if (keys.length === 0) return 0;
  if (!(redis instanceof Cluster)) return redis.del(...keys);
  const byTag = new Map<string, string[]>();
  for (const key of keys) byTag.set(hashTag(key), [...(byTag.get(hashTag(key)) ?? []), key]);
  const counts = await Promise.all([...byTag.values()].map((tagged) => redis.del(...tagged)));
  return counts.reduce((a, b) => a + b, 0);
}

/** What Redis Cluster hashes to pick a key's slot: the first non-empty `{…}`, else the whole key. */
function hashTag(key: string): string {
  const open = key.indexOf('{');
  const close = open < 0 ? -1 : key.indexOf('}', open + 1);
  return close > open + 1 ? key.slice(open + 1, close) : key;
}

/** Deletes the keys page by page, as a careless operator would: a campaign can briefly have some keys and not others. */
export async function deleteKeys(redis: RedisClient, keyPrefix: string, pattern = '*'): Promise<number> {
  let deleted = 0;
  const keys = await scanKeys(redis, keyPrefix, pattern);
  // A page's keys lie in many slots of a cluster: one DEL each there.
  const del = (page: string[]) => (scanTargets(redis).length > 1 ? Promise.all(page.map((key) => redis.del(key))).then((counts) => counts.reduce((a, b) => a + b, 0)) : redis.del(...page));
  for (let i = 0; i < keys.length; i += 1000) deleted += await del(keys.slice(i, i + 1000));
  return deleted;
}

/**
 * Everything the test file's stores hold: every row of every table of its schema and
 * the content of every state key under its prefix, to check that a refused request
 * changed nothing at all.
 */
export async function snapshotStores(stores: Stores, env: TestEnv): Promise<{ tables: Record<string, string[]>; keys: Record<string, unknown> }> {
  const { rows: tableRows } = await stores.sql.query<{ table_name: string }>('SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name', [env.schema]);
  const tables: Record<string, string[]> = {};
  for (const { table_name: table } of tableRows) {
    const { rows } = await stores.sql.query<{ row: string }>(`SELECT t::text AS row FROM "${table}" t ORDER BY 1`);
    tables[table] = rows.map((row) => row.row);
  }
  const keys: Record<string, unknown> = {};
  for (const key of await stateKeys(stores.redis, env.keyPrefix)) {
    const type = await stores.redis.type(key);
    keys[key] =
      type === 'string'
        ? await stores.redis.get(key)
        : type === 'hash'
          ? await stores.redis.hgetall(key)
          : type === 'set'
            ? (await stores.redis.smembers(key)).sort()
            : type === 'zset'
              ? await stores.redis.zrange(key, 0, -1, 'WITHSCORES')
              : type === 'list'
                ? await stores.redis.lrange(key, 0, -1)
                : type === 'stream'
                  ? await stores.redis.xrange(key, '-', '+')
                  : type;
  }
  return { tables, keys };
}
