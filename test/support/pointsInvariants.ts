import { expect } from 'vitest';
import { SHOP_JOURNAL, balanceKeys, goodsKeys } from '../../src/domain/points/store.ts';
import type { Stores } from './stores.ts';

export interface RedemptionRow {
  id: string;
  user_id: string;
  goods_id: string;
  request_id: string;
  points_spent: number;
  voucher_code: string | null;
  stock_unit: number | null;
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
 * once, no goods item is oversold, no code is handed out twice or outside its pool,
 * per-user limits hold, a requestId is redeemed or refused but not both, and Redis agrees
 * with PostgreSQL once the journal is drained.
 * Returns the durable redemptions.
 */
export async function expectPointsInvariants(stores: Stores): Promise<RedemptionRow[]> {
  const { sql, redis } = stores;
  const [{ rows: accounts }, { rows: ledgerSums }, { rows: redemptions }, { rows: goods }, { rows: codes }, { rows: ledger }] = await Promise.all([
    sql.query<{ user_id: string; balance: number }>('SELECT user_id, balance FROM points_account'),
    // A paid draw's reservation is taken from the balance before its ledger debit exists.
    sql.query<{ user_id: string; total: string }>(
      `SELECT user_id, sum(delta) - COALESCE((SELECT sum(cost) FROM draw_payment p WHERE p.user_id = l.user_id AND p.status = 'RESERVED'), 0) AS total
       FROM points_ledger l GROUP BY user_id`,
    ),
    sql.query<RedemptionRow>('SELECT id, user_id, goods_id, request_id, points_spent, voucher_code, stock_unit, user_seq, status FROM redemption'),
    sql.query<GoodsRow>('SELECT id, points_cost, stock, per_user_limit, pooled FROM goods'),
    sql.query<{ code: string; goods_id: string; position: number }>('SELECT code, goods_id, position FROM voucher_code ORDER BY goods_id, position'),
    sql.query<{ redemption_id: string; delta: number; user_id: string }>('SELECT redemption_id, delta, user_id FROM points_ledger WHERE redemption_id IS NOT NULL'),
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

  // Every redemption is paid once, at the goods item's cost.
  const goodsById = new Map(goods.map((row) => [row.id, row]));
  const paid = new Map(ledger.map((row) => [row.redemption_id, row]));
  expect(ledger).toHaveLength(redemptions.length);
  for (const redemption of redemptions) {
    const item = goodsById.get(redemption.goods_id)!;
    expect(redemption.points_spent).toBe(item.points_cost);
    expect(paid.get(redemption.id)).toEqual({ redemption_id: redemption.id, delta: -redemption.points_spent, user_id: redemption.user_id });
  }

  // Stock, codes, per-user limits.
  const poolOf = new Map<string, string[]>();
  for (const { code, goods_id } of codes) poolOf.set(goods_id, [...(poolOf.get(goods_id) ?? []), code]);
  for (const item of goods) {
    const ofItem = redemptions.filter((redemption) => redemption.goods_id === item.id);
    expect(ofItem.length, `redemptions of ${item.id} within its stock`).toBeLessThanOrEqual(item.stock);
    const pool = new Set(poolOf.get(item.id) ?? []);
    if (item.pooled) {
      expect(pool.size).toBe(item.stock);
      for (const redemption of ofItem) expect(pool.has(redemption.voucher_code!), `code ${redemption.voucher_code} of ${item.id}`).toBe(true);
      expect(new Set(ofItem.map((redemption) => redemption.voucher_code)).size).toBe(ofItem.length);
    } else {
      // Units are handed out in order: durable ones are exactly 0 … n−1.
      expect(ofItem.map((redemption) => redemption.stock_unit).sort((a, b) => a! - b!)).toEqual(ofItem.map((_, i) => i));
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

  // Redis, for the keys it holds: its own books balance, and match PostgreSQL once the journal is empty.
  const settled = (await redis.xlen(SHOP_JOURNAL)) === 0;
  for (const item of goods) {
    const keys = goodsKeys(item.id);
    const meta = await redis.hgetall(keys.meta);
    if (!meta.remaining) continue;
    const remaining = Number(meta.remaining);
    expect(remaining).toBeGreaterThanOrEqual(0);
    const freeCodes = await redis.lrange(keys.codes, 0, -1);
    if (item.pooled) expect(freeCodes, `free codes of ${item.id}`).toHaveLength(remaining);
    if (!settled) continue;
    const ofItem = redemptions.filter((redemption) => redemption.goods_id === item.id);
    expect(remaining, `remaining stock of ${item.id}`).toBe(item.stock - ofItem.length);
    const used = new Set(ofItem.map((redemption) => redemption.voucher_code));
    expect(freeCodes, `free codes of ${item.id}`).toEqual((poolOf.get(item.id) ?? []).filter((code) => !used.has(code)));
    if (item.per_user_limit > 0) {
      const counts = Object.fromEntries([...countBy(ofItem, (redemption) => redemption.user_id)].map(([user, count]) => [user, String(count)]));
      expect(await redis.hgetall(keys.users)).toEqual(counts);
    }
  }
  for (const account of accounts) {
    const cached = await redis.get(balanceKeys(account.user_id).meta);
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
