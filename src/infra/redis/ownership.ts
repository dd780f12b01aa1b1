import type { PrismaClient } from '../../generated/prisma/client.ts';
import type { Logger } from '../logger.ts';
import { StartupError } from '../startupError.ts';
import type { RedisClient } from './connection.ts';
import { scanTargets } from './connection.ts';
import { type Scripts, defineScript } from './scripts.ts';

/** Under the key prefix: the database the prefix's live state belongs to (see lua/claimKeyPrefix.lua). */
const OWNER_KEY = 'database';
const DELETE_PAGE = 1000;

/**
 * The database's identity: its kind and the id `_prisma_migrations` gave its first
 * migration, a random UUID written once and kept by every later migration. A database
 * created anew (the embedded one deleted, DATABASE_URL pointed at another) gets another.
 */
export async function databaseIdentity(prisma: PrismaClient, kind: 'postgresql' | 'pglite'): Promise<string> {
  const [first] = await prisma.$queryRaw<{ id: string }[]>`SELECT id FROM "_prisma_migrations" ORDER BY started_at, migration_name LIMIT 1`;
  if (!first) throw new Error('the database has no applied migration to take its identity from');
  return `${kind}:${first.id}`;
}

export interface PrefixClaim {
  redis: RedisClient;
  scripts: Scripts;
  keyPrefix: string;
  databaseId: string;
  log: Logger;
}

const claimKeyPrefixScript = defineScript('claimKeyPrefix', ['owner'], {
  claimed: () => ({}),
  claimedAnew: () => ({}),
  clear: () => ({}),
  refused: (values) => ({ owner: values.str(0) }),
});

function refusal({ keyPrefix, databaseId }: PrefixClaim, owner: string): string {
  return (
    `the Redis keys under REDIS_KEY_PREFIX="${keyPrefix}" belong to another database (${owner}; this one is ${databaseId}). ` +
    'Set another REDIS_KEY_PREFIX, or, if that database is gone for good, delete the keys under the prefix on the Redis at REDIS_URL'
  );
}

/**
 * Redis's live state (balances, stock, journals, remembered answers) belongs to one
 * database: served against another, it would hand out points and stock that database
 * never had, and answer requestIds it never saw. The first instance claims the prefix;
 * an instance of another database refuses to start on it.
 *
 * `mayTakeOver`: an embedded database this start created may take over a prefix another
 * embedded database owned: that one was deleted with its folder (a developer's reset),
 * and its keys go. Never a prefix a PostgreSQL database owns (a live deployment's
 * journal may hold grants not yet persisted), never an empty prefix (the whole Redis
 * database).
 */
export async function claimKeyPrefix(claim: PrefixClaim & { mayTakeOver: boolean }): Promise<void> {
  const { redis, scripts, keyPrefix, databaseId, mayTakeOver, log } = claim;
  const verdict = await scripts.call(claimKeyPrefixScript, { owner: OWNER_KEY }, [databaseId, mayTakeOver && keyPrefix !== '' ? '1' : '0']);
  if (verdict.kind === 'refused') throw new StartupError(refusal(claim, verdict.owner));
  if (verdict.kind === 'clear') {
    const deleted = await deleteKeysUnder(redis, keyPrefix);
    await redis.set(OWNER_KEY, databaseId);
    log.warn({ keyPrefix, deleted }, 'a new embedded database: deleted the Redis keys another embedded database left under the prefix');
  }
}

/**
 * The claim again, while the instance runs. A Redis that lost its data (restarted
 * without persistence, flushed) lost the owner key with it: the claim is written
 * again, so an instance of another database started later still refuses.
 *
 * Returns null while the prefix is this database's (a takeover this database left
 * unfinished included), or, when another database's instance claimed the prefix while
 * the key was missing, why this instance must stop: two databases would share one set
 * of keys. Whichever side claimed second stops, even a whole fleet against one stray
 * instance; its message names both databases, never the way out a refusal to start
 * gives (deleting the keys would delete the other deployment's live state).
 */
export async function recheckKeyPrefix(claim: PrefixClaim): Promise<string | null> {
  const verdict = await claim.scripts.call(claimKeyPrefixScript, { owner: OWNER_KEY }, [claim.databaseId, '0']);
  if (verdict.kind === 'refused') {
    return (
      `another database (${verdict.owner}) claimed the Redis keys under REDIS_KEY_PREFIX="${claim.keyPrefix}" after Redis lost the claim of this one (${claim.databaseId}). ` +
      'Two databases must not share one prefix: give one of the two deployments another REDIS_KEY_PREFIX'
    );
  }
  if (verdict.kind === 'claimedAnew') claim.log.warn({ keyPrefix: claim.keyPrefix }, "the Redis key naming the prefix's database was gone (Redis lost its data?); claimed the prefix again");
  return null;
}

const OWNER_VALUE = /^(clearing:)?(pglite|postgresql):/;

/** SCAN's pattern for the keys whose names start with `keyPrefix`: glob characters escaped. */
const scanPattern = (keyPrefix: string, rest: string) => `${keyPrefix.replace(/[*?[\]\\]/g, '\\$&')}${rest}`;

/** Every full key name SCAN finds for `pattern`, page by page, on every primary of a cluster. */
async function* scanPages(redis: RedisClient, pattern: string): AsyncGenerator<string[]> {
  for (const node of scanTargets(redis)) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', DELETE_PAGE);
      cursor = next;
      yield keys;
    } while (cursor !== '0');
  }
}

/**
 * Longer prefixes under this one that another deployment claimed (`cb:prod:` under
 * `cb:`, say): their keys only look like ours.
 */
async function claimedPrefixesUnder(redis: RedisClient, keyPrefix: string): Promise<string[]> {
  const nested: string[] = [];
  for await (const keys of scanPages(redis, scanPattern(keyPrefix, `?*${OWNER_KEY}`))) {
    for (const key of keys) {
      if (!key.startsWith(keyPrefix)) continue;
      // ioredis adds this instance's prefix to TYPE's and GET's argument itself. A data
      // key may end in the same word (a goods item named so): only a string can be an owner.
      const name = key.slice(keyPrefix.length);
      if ((await redis.type(name)) !== 'string') continue;
      const owner = await redis.get(name);
      if (owner && OWNER_VALUE.test(owner)) nested.push(key.slice(0, -OWNER_KEY.length));
    }
  }
  return nested;
}

/**
 * Every key under the prefix but the owner key, which marks the deletion as under way
 * until it is done, and but the keys of longer prefixes other deployments claimed. Two
 * scans of the prefix, and a check per key against the longer prefixes: a takeover
 * happens once, on a developer's reset, not on a hot path.
 */
async function deleteKeysUnder(redis: RedisClient, keyPrefix: string): Promise<number> {
  const nested = await claimedPrefixesUnder(redis, keyPrefix);
  const ours = (key: string) => key.startsWith(keyPrefix) && !nested.some((prefix) => key.startsWith(prefix));
  let deleted = 0;
  for await (const keys of scanPages(redis, scanPattern(keyPrefix, '*'))) {
    // ioredis adds the prefix to UNLINK's arguments itself. One key a command: on a
    // cluster the keys of a page lie in many slots (auto-pipelining batches them anyway).
    const names = keys
      .filter(ours)
      .map((key) => key.slice(keyPrefix.length))
      .filter((key) => key !== OWNER_KEY);
    for (const count of await Promise.all(names.map((name) => redis.unlink(name)))) deleted += count;
  }
  return deleted;
}
