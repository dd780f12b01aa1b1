import { z } from 'zod';
import { Prisma, type Redemption } from '../../generated/prisma/client.ts';
import { unnest } from '../../infra/db/unnest.ts';
import { conflictingEntries, entryKind } from '../../infra/journal/entryKind.ts';
import type { JournalEntry } from '../../infra/journal/journal.ts';
import type { LeasedRedemption, VoucherDeliveryWorker } from './deliveryWorker.ts';

/** A stock unit or sequence number: empty when the goods item has none. */
const optionalInt = z.union([z.literal('').transform(() => null), z.coerce.number().int()]);

/** What lua/redeemPoints.lua journals for every answer: whose request, for which item, when. */
const answerFields = z.object({
  user: z.string(),
  goods: z.string(),
  request: z.string(),
  at: z.coerce.number().int(),
});

/** A redemption's entry. */
const redeemFields = answerFields.extend({
  id: z.string(),
  cost: z.coerce.number().int(),
  /** The voucher code; empty without a pool. */
  code: z.string(),
  unit: optionalInt,
  seq: optionalInt,
  /** The shop bucket whose stock it took; entries from before buckets have none: 0. */
  bucket: z.coerce.number().int().optional().default(0),
});

/** A refusal's entry: 'outOfStock', 'perUserLimit:<limit>' or 'insufficient:<balance>:<cost>'. */
const refuseFields = answerFields.extend({ answer: z.string() });

export type RedeemFields = z.infer<typeof redeemFields>;

const requestFields = answerFields.pick({ user: true, goods: true, request: true });

/**
 * Whose request for which item an entry of either kind answers: what its script changed
 * in Redis, read even from an entry whose other fields are unreadable.
 */
export function requestOf(entry: JournalEntry): z.infer<typeof requestFields> {
  return requestFields.parse(entry.fields);
}

/**
 * How far apart the clocks of Redis (a redemption's time) and PostgreSQL (a change of an
 * item's terms) may be, for a redemption made just before a change to be held to the terms
 * before it. Within it, a redemption made just after may pass at the old terms too.
 */
const TERMS_CLOCK_SLACK_MS = 5_000;

/**
 * The redemptions of a batch, checked again by PostgreSQL and inserted with their
 * ledger rows and balance debits in one statement. Redis already checked them;
 * PostgreSQL's own check matters only when Redis lost data and was rebuilt while
 * redemptions were on their way here. Then it refuses (reports as a conflict)
 * whatever was not at the item's terms (a price it did not have, off sale, or outside its
 * sale window: a stale copy in Redis), would overdraw a balance, oversell the stock (a voucher code or a stock unit
 * twice, or one outside the item, or outside its bucket's allotment and the transfers on
 * their way to it, which sum to the stock), break a per-user limit (a sequence number twice or
 * above the limit), or repeat a (user, requestId), refused or redeemed.
 *
 * Only the accounts are locked, in user order so concurrent batches queue instead of
 * deadlocking; the rows FOR UPDATE returns are the newest, so the balance check is
 * exact. They are read through one jsonb object: joined as rows, the locked accounts
 * drew a nested loop from the planner (it cannot estimate unnest), a quadratic scan that
 * was half of a 256-entry batch's time. Everything else is a unique key, so batches for
 * one goods item commit side by side. A refusal is pessimistic for the user's later
 * entries in the batch, which is safe: they are rebuilt and retried.
 *
 * Each redemption is inserted under a delivery lease of the committing process, which
 * hands it to its notifier right away (VoucherDeliveryWorker.deliverFresh); it is due
 * for the other workers only once that lease has run out. One whose insert committed
 * but whose reply was lost is not returned by the retry, so it waits for its lease to
 * run out and goes out as attempt 2: late, never lost.
 */
function insertRedemptions(redemptions: RedeemFields[], leaseMs: number): Prisma.Sql {
  // The batch's order, for each user's running total.
  const numbered = redemptions.map((fields, i) => ({ ...fields, position: i + 1 }));
  return Prisma.sql`
WITH entry AS (
  SELECT * FROM ${unnest('e', numbered, {
    id: ['text', (row) => row.id],
    user_id: ['text', (row) => row.user],
    goods_id: ['text', (row) => row.goods],
    request_id: ['text', (row) => row.request],
    cost: ['int', (row) => row.cost],
    code: ['text', (row) => row.code],
    stock_unit: ['int', (row) => row.unit],
    user_seq: ['int', (row) => row.seq],
    at_ms: ['bigint', (row) => row.at],
    seq: ['int', (row) => row.position],
    stock_bucket: ['int', (row) => row.bucket],
  })}
),
account AS MATERIALIZED (
  SELECT jsonb_object_agg(user_id, balance) AS balances
  FROM (SELECT user_id, balance FROM points_account WHERE user_id IN (SELECT user_id FROM entry) ORDER BY user_id FOR UPDATE) locked
),
fresh AS (
  SELECT e.* FROM entry e
  WHERE NOT EXISTS (SELECT 1 FROM redemption r WHERE r.id = e.id)
    AND NOT EXISTS (SELECT 1 FROM redemption r WHERE r.user_id = e.user_id AND r.request_id = e.request_id)
    AND NOT EXISTS (SELECT 1 FROM redemption_refusal f WHERE f.user_id = e.user_id AND f.request_id = e.request_id)
),
running AS (
  SELECT f.*, sum(f.cost) OVER (PARTITION BY f.user_id ORDER BY f.seq) AS spent FROM fresh f
),
accepted AS (
  SELECT r.* FROM running r
  CROSS JOIN account a
  JOIN goods g ON g.id = r.goods_id
  WHERE r.spent <= (a.balances ->> r.user_id)::bigint
    -- The item's terms when the script ran: its price, on sale, and the script's time within
    -- the sale window (both Redis time). The current ones, or (an operator changed them while
    -- the entry was on its way here) those in effect within a few seconds of the script's
    -- time, as the clocks of Redis and PostgreSQL (changed_at) may differ.
    AND CASE WHEN r.cost = g.points_cost AND g.on_sale
                  AND to_timestamp(r.at_ms / 1000.0) >= COALESCE(g.sale_starts_at, '-infinity') AND to_timestamp(r.at_ms / 1000.0) < COALESCE(g.sale_ends_at, 'infinity') THEN true
             ELSE EXISTS (SELECT 1 FROM (SELECT c.points_cost, c.on_sale, c.sale_starts_at, c.sale_ends_at, c.changed_at, lead(c.changed_at) OVER (ORDER BY c.changed_at, c.id) AS until
                                         FROM goods_change c WHERE c.goods_id = g.id) c
                          WHERE c.points_cost = r.cost AND c.on_sale
                            AND to_timestamp(r.at_ms / 1000.0) >= COALESCE(c.sale_starts_at, '-infinity') AND to_timestamp(r.at_ms / 1000.0) < COALESCE(c.sale_ends_at, 'infinity')
                            AND c.changed_at <= to_timestamp(r.at_ms / 1000.0) + ${TERMS_CLOCK_SLACK_MS}::int * interval '1 millisecond'
                            AND (c.until IS NULL OR c.until >= to_timestamp(r.at_ms / 1000.0) - ${TERMS_CLOCK_SLACK_MS}::int * interval '1 millisecond')) END
    AND CASE WHEN g.pooled THEN EXISTS (SELECT 1 FROM voucher_code v WHERE v.code = r.code AND v.goods_id = g.id)
             ELSE r.stock_unit < COALESCE((SELECT s.allotted FROM goods_bucket_stock s WHERE s.goods_id = g.id AND s.bucket = r.stock_bucket), 0)
                                + COALESCE((SELECT sum(t.units) FROM goods_stock_transfer t WHERE t.goods_id = g.id AND t.to_bucket = r.stock_bucket AND t.given_at IS NULL), 0) END
    AND (g.per_user_limit = 0 OR r.user_seq <= g.per_user_limit)
),
inserted AS (
  INSERT INTO redemption (id, user_id, goods_id, request_id, points_spent, voucher_code, stock_unit, stock_bucket, user_seq, created_at, next_attempt_at,
                          delivery_attempts, locked_until)
  SELECT id, user_id, goods_id, request_id, cost, NULLIF(code, ''), stock_unit, stock_bucket, user_seq, to_timestamp(at_ms / 1000.0),
         now() + ${leaseMs}::int * interval '1 millisecond', 1, now() + ${leaseMs}::int * interval '1 millisecond'
  FROM accepted
  ON CONFLICT DO NOTHING
  RETURNING id, user_id, goods_id, voucher_code, points_spent, delivery_attempts, locked_until, created_at
),
debited AS (
  UPDATE points_account a SET balance = a.balance - s.spent
  FROM (SELECT user_id, sum(points_spent) AS spent FROM inserted GROUP BY user_id) s
  WHERE a.user_id = s.user_id
),
ledgered AS (
  INSERT INTO points_ledger (user_id, delta, reason, redemption_id, created_at)
  SELECT user_id, -points_spent, 'redemption', id, created_at FROM inserted
)
SELECT id, user_id, goods_id, voucher_code, points_spent, delivery_attempts, locked_until FROM inserted`;
}

/** Persists redemptions and hands those it inserted to `delivery`, whose lease they carry. */
export function redemptionJournalKind(delivery: VoucherDeliveryWorker) {
  return entryKind({
    kind: 'points.redeem',
    fields: redeemFields,
    async persist(db, entries) {
      const redemptions = entries.map(({ fields }) => fields);
      const inserted = await db.query<LeasedRedemption>(insertRedemptions(redemptions, delivery.options.leaseMs));
      delivery.deliverFresh(inserted);
      return conflictingEntries(
        entries,
        (redemption) => redemption.id,
        inserted.map((row) => row.id),
        async (redemptionIds) => (await db.prisma.redemption.findMany({ where: { id: { in: redemptionIds } }, select: { id: true } })).map((row) => row.id),
      );
    },
  });
}

const refusalKey = (user: string, request: string, answer: string) => `${user}\u0000${request}\u0000${answer}`;

/**
 * Refusals, so a retry gets the same problem once Redis has forgotten it. One that
 * PostgreSQL answered otherwise before (a redemption, or another refusal, made while
 * Redis was being rebuilt) is a conflict: the first answer stands.
 */
export const refusalJournalKind = entryKind({
  kind: 'points.refuse',
  fields: refuseFields,
  async persist(db, entries) {
    const refusals = entries.map(({ fields }) => fields);
    const inserted = await db.query<{ user_id: string; request_id: string; answer: string }>(Prisma.sql`
      INSERT INTO redemption_refusal (user_id, request_id, goods_id, answer, refused_at)
      SELECT r.user_id, r.request_id, r.goods_id, r.answer, to_timestamp(r.at_ms / 1000.0)
      FROM ${unnest('r', refusals, {
        user_id: ['text', (refusal) => refusal.user],
        request_id: ['text', (refusal) => refusal.request],
        goods_id: ['text', (refusal) => refusal.goods],
        answer: ['text', (refusal) => refusal.answer],
        at_ms: ['bigint', (refusal) => refusal.at],
      })}
      WHERE NOT EXISTS (SELECT 1 FROM redemption d WHERE d.user_id = r.user_id AND d.request_id = r.request_id)
      ON CONFLICT DO NOTHING
      RETURNING user_id, request_id, answer`);
    return conflictingEntries(
      entries,
      (refusal) => refusalKey(refusal.user, refusal.request, refusal.answer),
      inserted.map((row) => refusalKey(row.user_id, row.request_id, row.answer)),
      async (keys) => {
        const wanted = keys.map((key) => key.split('\u0000'));
        const present = await db.prisma.redemptionRefusal.findMany({ where: { OR: wanted.map(([userId, requestId]) => ({ userId: userId!, requestId: requestId! })) } });
        return present.map((row) => refusalKey(row.userId, row.requestId, row.answer));
      },
    );
  },
});

/**
 * The redemption a journal entry describes, as PostgreSQL now holds it: just persisted,
 * its first delivery attempt under way. Its lease's end is PostgreSQL's time and not
 * known here: nextAttemptAt and lockedUntil, which the API does not show, are left at the
 * creation time and null.
 */
export function pendingRedemption(fields: RedeemFields): Redemption {
  const createdAt = new Date(fields.at);
  return {
    id: fields.id,
    userId: fields.user,
    goodsId: fields.goods,
    requestId: fields.request,
    pointsSpent: fields.cost,
    voucherCode: fields.code || null,
    stockUnit: fields.unit,
    stockBucket: fields.bucket,
    userSeq: fields.seq,
    status: 'PENDING',
    createdAt,
    deliveryAttempts: 1,
    nextAttemptAt: createdAt,
    lockedUntil: null,
    lastError: null,
    deliveredAt: null,
  };
}
