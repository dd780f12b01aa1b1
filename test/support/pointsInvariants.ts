import { expect } from 'vitest';
import { allBuckets, bucketOf } from '../../src/domain/points/buckets.ts';
import { balanceKeys, goodsKeys, shopJournal } from '../../src/domain/points/store.ts';
import type { Stores } from './stores.ts';

export interface RedemptionRow {
  id: string;
  user_id: string;
  goods_id: string;
  request_id: string;
  points_spent: number;
  voucher_code: string | null;
  stock_unit: number | null;
  stock_bucket: number;
  user_seq: number | null;
  status: 'PENDING' | 'DELIVERED';
}

interface GoodsRow {
  id: string;
  points_cost: number;
  stock: number;
  per_user_limit: number;
  pooled: boolean;
}

/**
 * Every points invariant of docs/architecture.md, over the whole schema, in PostgreSQL and Redis:
 * balances are the ledger's sum and never negative, every redemption is paid for exactly
 * once, at a price its item had, no goods item is oversold, no code is handed out twice or outside its pool,
 * per-user limits hold, a requestId is redeemed or refused but not both, and Redis agrees
 * with PostgreSQL once the journal is drained. With `buckets` (POINTS_SHOP_BUCKETS) > 1:
 * the buckets' allotments plus the units in flight are each item's stock, no bucket hands
 * out beyond its allotment, and in Redis every bucket's share agrees with its allotment.
 * Returns the durable redemptions.
 */
export async function expectPointsInvariants(stores: Stores, buckets = 1): Promise<RedemptionRow[]> {
  const { sql, redis } = stores;
  const [{ rows: accounts }, { rows: ledgerSums }, { rows: redemptions }, { rows: goods }, { rows: codes }, { rows: ledger }, { rows: allotments }, { rows: inFlight }, { rows: prices }] =
    await Promise.all([
      sql.query<{ user_id: string; balance: number }>('SELECT user_id, balance FROM points_account'),
      // A paid draw's reservation is taken from the balance before its ledger debit exists.
      sql.query<{ user_id: string; total: string }>(
        `SELECT user_id, sum(delta) - COALESCE((SELECT sum(cost) FROM draw_payment p WHERE p.user_id = l.user_id AND p.status = 'RESERVED'), 0) AS total
       FROM points_ledger l GROUP BY user_id`,
      ),
      sql.query<RedemptionRow>('SELECT id, user_id, goods_id, request_id, points_spent, voucher_code, stock_unit, stock_bucket, user_seq, status FROM redemption'),
      sql.query<GoodsRow>('SELECT id, points_cost, stock, per_user_limit, pooled FROM goods'),
      sql.query<{ code: string; goods_id: string; position: number; bucket: number | null }>('SELECT code, goods_id, position, bucket FROM voucher_code ORDER BY goods_id, position'),
      sql.query<{ redemption_id: string; delta: number; user_id: string }>('SELECT redemption_id, delta, user_id FROM points_ledger WHERE redemption_id IS NOT NULL'),
      sql.query<{ goods_id: string; bucket: number; allotted: number }>('SELECT goods_id, bucket, allotted FROM goods_bucket_stock'),
      sql.query<{ goods_id: string; to_bucket: number; units: number; codes: string[] }>('SELECT goods_id, to_bucket, units, codes FROM goods_stock_transfer WHERE given_at IS NULL'),
      sql.query<{ goods_id: string; points_cost: number }>('SELECT DISTINCT goods_id, points_cost FROM goods_change'),
    ]);

  const { rows: both } = await sql.query('SELECT 1 FROM redemption r JOIN redemption_refusal f USING (user_id, request_id)');
  expect(both, 'requestIds both redeemed and refused').toHaveLength(0);

  // Balances: the ledger's sum, never below zero.
  const ledgerByUser = new Map(ledgerSums.map((row) => [row.user_id, Number(row.total)]));
  for (const account of accounts) {
    expect(account.balance, `balance of ${account.user_id}`).toBeGreaterThanOrEqual(0);
    expect(account.balance, `balance of ${account.user_id} = its ledger − what is reserved`).toBe(ledgerByUser.get(account.user_id) ?? 0);
  }
  expect(ledgerSums.every((row) => accounts.some((account) => account.user_id === row.user_id))).toBe(true);

  // Every redemption is paid once, at a price the goods item had (its history holds each).
  const paid = new Map(ledger.map((row) => [row.redemption_id, row]));
  expect(ledger).toHaveLength(redemptions.length);
  for (const item of goods) expect(prices, `the history of ${item.id} holds its price`).toContainEqual({ goods_id: item.id, points_cost: item.points_cost });
  for (const redemption of redemptions) {
    expect(prices, `the price redemption ${redemption.id} paid`).toContainEqual({ goods_id: redemption.goods_id, points_cost: redemption.points_spent });
    expect(paid.get(redemption.id)).toEqual({ redemption_id: redemption.id, delta: -redemption.points_spent, user_id: redemption.user_id });
  }

  // Stock, codes, per-user limits.
  const poolOf = new Map<string, string[]>();
  for (const { code, goods_id } of codes) poolOf.set(goods_id, [...(poolOf.get(goods_id) ?? []), code]);
  const allottedOf = (goodsId: string, bucket: number) => allotments.find((row) => row.goods_id === goodsId && row.bucket === bucket)?.allotted ?? 0;
  const inFlightOf = (goodsId: string) => inFlight.filter((row) => row.goods_id === goodsId);
  for (const item of goods) {
    const ofItem = redemptions.filter((redemption) => redemption.goods_id === item.id);
    expect(ofItem.length, `redemptions of ${item.id} within its stock`).toBeLessThanOrEqual(item.stock);
    // Transfers never make stock: the buckets' shares plus what is in flight are the stock.
    const allotted = allotments.filter((row) => row.goods_id === item.id).reduce((sum, row) => sum + row.allotted, 0);
    const flying = inFlightOf(item.id).reduce((sum, row) => sum + row.units, 0);
    expect(allotted + flying, `allotments + in flight of ${item.id}`).toBe(item.stock);
    for (const bucket of new Set(ofItem.map((redemption) => redemption.stock_bucket))) {
      const inBucket = ofItem.filter((redemption) => redemption.stock_bucket === bucket).length;
      const coming = inFlightOf(item.id)
        .filter((row) => row.to_bucket === bucket)
        .reduce((sum, row) => sum + row.units, 0);
      expect(inBucket, `redemptions of ${item.id} in bucket ${bucket} within its allotment`).toBeLessThanOrEqual(allottedOf(item.id, bucket) + coming);
    }
    const pool = new Set(poolOf.get(item.id) ?? []);
    if (item.pooled) {
      expect(pool.size).toBe(item.stock);
      for (const redemption of ofItem) expect(pool.has(redemption.voucher_code!), `code ${redemption.voucher_code} of ${item.id}`).toBe(true);
      expect(new Set(ofItem.map((redemption) => redemption.voucher_code)).size).toBe(ofItem.length);
      const carried = inFlightOf(item.id).flatMap((row) => row.codes);
      for (const bucket of allBuckets(buckets)) {
        const own = codes.filter((code) => code.goods_id === item.id && code.bucket === bucket).length;
        expect(own, `codes of ${item.id} in bucket ${bucket}`).toBe(allottedOf(item.id, bucket));
      }
      expect(
        codes
          .filter((code) => code.goods_id === item.id && code.bucket === null)
          .map((code) => code.code)
          .sort(),
        `codes of ${item.id} in flight`,
      ).toEqual([...carried].sort());
    } else {
      // Units are handed out in order within each bucket: durable ones are exactly 0 … n−1.
      for (const bucket of allBuckets(buckets)) {
        const inBucket = ofItem.filter((redemption) => redemption.stock_bucket === bucket);
        expect(inBucket.map((redemption) => redemption.stock_unit).sort((a, b) => a! - b!)).toEqual(inBucket.map((_, i) => i));
      }
      for (const redemption of ofItem) expect(redemption.voucher_code).toBeNull();
    }
    if (item.per_user_limit > 0) {
      for (const [user, count] of countBy(ofItem, (redemption) => redemption.user_id)) {
        expect(count).toBeLessThanOrEqual(item.per_user_limit);
        const seqs = ofItem.filter((redemption) => redemption.user_id === user).map((redemption) => redemption.user_seq);
        expect(
          seqs.sort((a, b) => a! - b!),
          `sequence numbers of ${user} for ${item.id}`,
        ).toEqual(seqs.map((_, i) => i + 1));
      }
    } else {
      for (const redemption of ofItem) expect(redemption.user_seq).toBeNull();
    }
  }
  expect(new Set(redemptions.map((redemption) => `${redemption.user_id}\u0000${redemption.request_id}`)).size).toBe(redemptions.length);

  // Redis, for the keys it holds: its own books balance, and match PostgreSQL once every journal is empty.
  const settled = (await Promise.all(allBuckets(buckets).map((bucket) => redis.xlen(shopJournal(bucket))))).every((length) => length === 0);
  for (const item of goods) {
    for (const bucket of allBuckets(buckets)) {
      const keys = goodsKeys(item.id, bucket);
      const meta = await redis.hgetall(keys.meta);
      if (!meta.remaining) continue;
      const remaining = Number(meta.remaining);
      expect(remaining).toBeGreaterThanOrEqual(0);
      const freeCodes = await redis.lrange(keys.codes, 0, -1);
      if (item.pooled) expect(freeCodes, `free codes of ${item.id} in bucket ${bucket}`).toHaveLength(remaining);
      if (!settled) continue;
      const ofBucket = redemptions.filter((redemption) => redemption.goods_id === item.id && redemption.stock_bucket === bucket);
      expect(Number(meta.stock), `the allotment of ${item.id} in bucket ${bucket}`).toBe(allottedOf(item.id, bucket));
      expect(remaining, `remaining stock of ${item.id} in bucket ${bucket}`).toBe(allottedOf(item.id, bucket) - ofBucket.length);
      const used = new Set(ofBucket.map((redemption) => redemption.voucher_code));
      const own = codes.filter((code) => code.goods_id === item.id && code.bucket === bucket && !used.has(code.code)).map((code) => code.code);
      expect([...freeCodes].sort(), `free codes of ${item.id} in bucket ${bucket}`).toEqual(own.sort());
      if (item.per_user_limit > 0) {
        const ofItem = redemptions.filter((redemption) => redemption.goods_id === item.id && bucketOf(redemption.user_id, buckets) === bucket);
        const counts = Object.fromEntries([...countBy(ofItem, (redemption) => redemption.user_id)].map(([user, count]) => [user, String(count)]));
        expect(await redis.hgetall(keys.users)).toEqual(counts);
      }
    }
  }
  for (const account of accounts) {
    const cached = await redis.get(balanceKeys(account.user_id, bucketOf(account.user_id, buckets)).meta);
    if (cached === null) continue;
    expect(Number(cached), `cached balance of ${account.user_id}`).toBeGreaterThanOrEqual(0);
    if (settled) expect(Number(cached), `cached balance of ${account.user_id}`).toBe(account.balance);
  }
  return redemptions;
}

function countBy<T>(items: T[], key: (item: T) => string): Map<string, number> {
  const counts = new Map<string, number>();
  for (const item of items) counts.set(key(item), (counts.get(key(item)) ?? 0) + 1);
  return counts;
}
