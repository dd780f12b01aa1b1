import type { PrismaClient } from '../../generated/prisma/client.ts';
import type { Logger } from '../../infra/logger.ts';
import type { RedisClient } from '../../infra/redis/connection.ts';
import { StartupError } from '../../infra/startupError.ts';
import { bucketTag } from './buckets.ts';
import { goodsKeys } from './store.ts';

/**
 * The bucket count the shop's keys were laid out for. Under `{shop}`, so the documented
 * way to change POINTS_SHOP_BUCKETS (every instance stopped, the shop's keys deleted)
 * deletes it too.
 */
const BUCKET_COUNT_KEY = `${bucketTag(0)}:buckets`;

/** Serializes the folds of instances starting at once; any constant of its own. */
const FOLD_LOCK_ID = 0x5b0c4e75;
/** A shop of many items past the count moves them all in one transaction, before the instance serves. */
const FOLD_TRANSACTION = { maxWait: 10_000, timeout: 120_000 };

/**
 * Makes sure every instance on the key prefix runs the shop with the same bucket count
 * (one with another would sell from buckets the others never look in, and show stale
 * balances), and that a lowered count strands no stock. Refuses to start on a count
 * other than the one recorded. The instance that records the count (a new prefix, or the
 * shop's keys deleted to change it) first folds what buckets past it still hold into
 * those below it; of instances starting at once with different counts, only that one.
 */
export async function settleBucketCount(deps: { redis: RedisClient; prisma: PrismaClient; log: Logger }, buckets: number): Promise<void> {
  if ((await deps.redis.set(BUCKET_COUNT_KEY, String(buckets), 'NX')) !== 'OK') {
    const mismatch = await otherCount(deps.redis, buckets);
    if (mismatch) {
      throw new StartupError(
        `POINTS_SHOP_BUCKETS is ${buckets}, but the points shop on this key prefix runs with ${mismatch} buckets: every instance needs the same value. ` +
          'To change it, stop every instance and delete the shop keys first (docs/operations.md, "Points shop buckets").',
      );
    }
    return;
  }
  try {
    await foldBucketsPast(deps, buckets);
  } catch (error) {
    // Recorded without its fold, the next start would skip the fold for good.
    await deps.redis.del(BUCKET_COUNT_KEY).catch(() => undefined);
    throw error;
  }
}

/**
 * Run with the key prefix's claim: records the count again when Redis lost it, so an
 * instance started later with another count is still refused. Returns why this instance
 * must stop when another count was recorded meanwhile, as the prefix's claim does.
 */
export async function recheckBucketCount(redis: RedisClient, buckets: number): Promise<string | null> {
  if ((await redis.set(BUCKET_COUNT_KEY, String(buckets), 'NX')) === 'OK') return null;
  const mismatch = await otherCount(redis, buckets);
  return mismatch ? `an instance recorded POINTS_SHOP_BUCKETS=${mismatch} for this key prefix after Redis lost this one's (${buckets}); every instance needs the same value` : null;
}

/** The count recorded, when it is not `buckets`. */
async function otherCount(redis: RedisClient, buckets: number): Promise<string | null> {
  const recorded = await redis.get(BUCKET_COUNT_KEY);
  return recorded !== null && recorded !== String(buckets) ? recorded : null;
}

/**
 * Moves to bucket `b mod buckets` what each bucket past the count still holds: the units
 * of its allotment after the last one handed out, its free voucher codes, and the stock
 * transfers on their way to it. Recorded as transfers given at once, so the history
 * tells where the stock went. A no-op when no bucket lies past the count.
 */
async function foldBucketsPast(deps: { prisma: PrismaClient; log: Logger; redis: RedisClient }, buckets: number): Promise<void> {
  const moved = await deps.prisma.$transaction(async (tx) => {
    await tx.$executeRaw`SELECT pg_advisory_xact_lock(${FOLD_LOCK_ID})`;
    const redirected = await tx.$queryRaw<{ goods_id: string; to_bucket: number }[]>`
      UPDATE goods_stock_transfer SET to_bucket = to_bucket % ${buckets}
      WHERE given_at IS NULL AND to_bucket >= ${buckets}
      RETURNING goods_id, to_bucket`;
    const folded = await tx.$queryRaw<{ goods_id: string; from_bucket: number; to_bucket: number; units: number }[]>`
      WITH past AS (
        SELECT s.goods_id, s.bucket, g.pooled,
          CASE WHEN g.pooled
            THEN (SELECT count(*) FROM voucher_code v WHERE v.goods_id = s.goods_id AND v.bucket = s.bucket
                  AND NOT EXISTS (SELECT 1 FROM redemption r WHERE r.voucher_code = v.code))::int
            ELSE s.allotted - COALESCE((SELECT max(r.stock_unit) + 1 FROM redemption r WHERE r.goods_id = s.goods_id AND r.stock_bucket = s.bucket), 0)
          END AS units
        FROM goods_bucket_stock s JOIN goods g ON g.id = s.goods_id
        WHERE s.bucket >= ${buckets}
      ),
      moves AS (
        SELECT goods_id, bucket AS from_bucket, bucket % ${buckets} AS to_bucket, units, pooled,
          CASE WHEN pooled THEN ARRAY(SELECT v.code FROM voucher_code v WHERE v.goods_id = past.goods_id AND v.bucket = past.bucket
                                        AND NOT EXISTS (SELECT 1 FROM redemption r WHERE r.voucher_code = v.code) ORDER BY v.position)
               ELSE '{}'::text[] END AS codes,
          'rebucketed:' || gen_random_uuid()::text AS id
        FROM past WHERE units > 0
      ),
      recorded AS (
        INSERT INTO goods_stock_transfer (id, goods_id, from_bucket, to_bucket, units, codes, taken_at, given_at, given_by)
        SELECT id, goods_id, from_bucket, to_bucket, units, codes, now(), now(), id FROM moves
      ),
      taken AS (
        UPDATE goods_bucket_stock s SET allotted = s.allotted - m.units FROM moves m WHERE s.goods_id = m.goods_id AND s.bucket = m.from_bucket
      ),
      carried AS (
        UPDATE voucher_code v SET bucket = m.to_bucket FROM moves m WHERE v.code = ANY(m.codes)
      )
      SELECT goods_id, from_bucket, to_bucket, units FROM moves`;
    // Several buckets may fold into one: their units are summed before the receiver is raised.
    for (const move of folded) {
      await tx.$executeRaw`
        INSERT INTO goods_bucket_stock AS s (goods_id, bucket, allotted) VALUES (${move.goods_id}, ${move.to_bucket}, ${move.units})
        ON CONFLICT (goods_id, bucket) DO UPDATE SET allotted = s.allotted + EXCLUDED.allotted`;
    }
    return { redirected, folded };
  }, FOLD_TRANSACTION);
  const receivers = [...moved.redirected, ...moved.folded].map((move) => goodsKeys(move.goods_id, move.to_bucket).meta);
  if (receivers.length === 0) return;
  // Keys still there (the shop's keys were not deleted) would go on selling the old allotment.
  await Promise.all([...new Set(receivers)].map((key) => deps.redis.del(key)));
  deps.log.warn(
    { buckets, folded: moved.folded.length, units: moved.folded.reduce((sum, move) => sum + move.units, 0), redirected: moved.redirected.length },
    'POINTS_SHOP_BUCKETS was lowered: stock of the buckets past it moved to those below',
  );
}
