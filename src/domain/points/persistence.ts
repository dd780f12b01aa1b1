import { Prisma, type PrismaClient, type Redemption } from '../../generated/prisma/client.ts';
import { type JournalEntry, type JournalHandler, conflictingEntries } from '../../infra/journal/journal.ts';
import { BadInputError } from '../errors.ts';
import type { LeasedRedemption, VoucherDeliveryWorker } from './deliveryWorker.ts';
import { type CreateGoodsInput, MAX_POINTS } from './input.ts';
import { ANSWER_TTL_MS, type BalanceSnapshot, type GoodsSnapshot } from './store.ts';

/**
 * The redemptions of a batch, checked again by PostgreSQL and inserted with their
 * ledger rows and balance debits in one statement. Redis already checked them;
 * PostgreSQL's own check matters only when Redis lost data and was rebuilt while
 * redemptions were on their way here. Then it refuses (reports as a conflict)
 * whatever would overdraw a balance, oversell the stock (a voucher code or a stock unit
 * twice, or one outside the item), break a per-user limit (a sequence number twice or
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
const INSERT_REDEMPTIONS = `
WITH entry AS (
  SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int[], $6::text[], $7::int[], $8::int[], $9::bigint[])
    WITH ORDINALITY AS e(id, user_id, goods_id, request_id, cost, code, stock_unit, user_seq, at_ms, seq)
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
    AND r.cost = g.points_cost
    AND CASE WHEN g.pooled THEN EXISTS (SELECT 1 FROM voucher_code v WHERE v.code = r.code AND v.goods_id = g.id)
             ELSE r.stock_unit < g.stock END
    AND (g.per_user_limit = 0 OR r.user_seq <= g.per_user_limit)
),
inserted AS (
  INSERT INTO redemption (id, user_id, goods_id, request_id, points_spent, voucher_code, stock_unit, user_seq, created_at, next_attempt_at,
                          delivery_attempts, locked_until)
  SELECT id, user_id, goods_id, request_id, cost, NULLIF(code, ''), stock_unit, user_seq, to_timestamp(at_ms / 1000.0),
         now() + $10::int * interval '1 millisecond', 1, now() + $10::int * interval '1 millisecond'
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

const intOrNull = (value: string | undefined) => (value ? Number(value) : null);

/** Persists redemptions and hands those it inserted to `delivery`, whose lease they carry. */
export function redemptionJournalHandler(delivery: VoucherDeliveryWorker): JournalHandler {
  return {
    kind: 'points.redeem',
    async persist(db: PrismaClient, entries: JournalEntry[]): Promise<JournalEntry[]> {
      const rows = entries.map(({ fields }) => fields);
      const inserted = await db.$queryRawUnsafe<LeasedRedemption[]>(
        INSERT_REDEMPTIONS,
        rows.map((row) => row.id!),
        rows.map((row) => row.user!),
        rows.map((row) => row.goods!),
        rows.map((row) => row.request!),
        rows.map((row) => Number(row.cost)),
        rows.map((row) => row.code!),
        rows.map((row) => intOrNull(row.unit)),
        rows.map((row) => intOrNull(row.seq)),
        rows.map((row) => Number(row.at)),
        delivery.options.leaseMs,
      );
      delivery.deliverFresh(inserted);
      return conflictingEntries(entries, ({ fields }) => fields.id!, inserted.map((row) => row.id), async (redemptionIds) =>
        (await db.redemption.findMany({ where: { id: { in: redemptionIds } }, select: { id: true } })).map((row) => row.id),
      );
    },
  };
}

/**
 * Refusals, so a retry gets the same problem once Redis has forgotten it. One that
 * PostgreSQL answered otherwise before (a redemption, or another refusal, made while
 * Redis was being rebuilt) is a conflict: the first answer stands.
 */
export const refusalJournalHandler: JournalHandler = {
  kind: 'points.refuse',
  async persist(db: PrismaClient, entries: JournalEntry[]): Promise<JournalEntry[]> {
    const rows = entries.map(({ fields }) => fields);
    const refusalKey = (user: string, request: string, answer: string) => `${user}\u0000${request}\u0000${answer}`;
    const inserted = await db.$queryRaw<{ user_id: string; request_id: string; answer: string }[]>`
      INSERT INTO redemption_refusal (user_id, request_id, goods_id, answer, refused_at)
      SELECT r.user_id, r.request_id, r.goods_id, r.answer, to_timestamp(r.at_ms / 1000.0)
      FROM unnest(${rows.map((row) => row.user!)}::text[], ${rows.map((row) => row.request!)}::text[], ${rows.map((row) => row.goods!)}::text[],
                  ${rows.map((row) => row.answer!)}::text[], ${rows.map((row) => Number(row.at))}::bigint[]) AS r(user_id, request_id, goods_id, answer, at_ms)
      WHERE NOT EXISTS (SELECT 1 FROM redemption d WHERE d.user_id = r.user_id AND d.request_id = r.request_id)
      ON CONFLICT DO NOTHING
      RETURNING user_id, request_id, answer`;
    return conflictingEntries(
      entries,
      ({ fields }) => refusalKey(fields.user!, fields.request!, fields.answer!),
      inserted.map((row) => refusalKey(row.user_id, row.request_id, row.answer)),
      async (keys) => {
        const wanted = keys.map((key) => key.split('\u0000'));
        const present = await db.redemptionRefusal.findMany({ where: { OR: wanted.map(([userId, requestId]) => ({ userId: userId!, requestId: requestId! })) } });
        return present.map((row) => refusalKey(row.userId, row.requestId, row.answer));
      },
    );
  },
};

/**
 * The redemption a journal entry describes, as PostgreSQL now holds it: just persisted,
 * its first delivery attempt under way. Its lease's end is PostgreSQL's time and not
 * known here: nextAttemptAt and lockedUntil, which the API does not show, are left at the
 * creation time and null.
 */
export function pendingRedemption(fields: Record<string, string>): Redemption {
  const createdAt = new Date(Number(fields.at));
  return {
    id: fields.id!,
    userId: fields.user!,
    goodsId: fields.goods!,
    requestId: fields.request!,
    pointsSpent: Number(fields.cost),
    voucherCode: fields.code || null,
    stockUnit: intOrNull(fields.unit),
    userSeq: intOrNull(fields.seq),
    status: 'PENDING',
    createdAt,
    deliveryAttempts: 1,
    nextAttemptAt: createdAt,
    lockedUntil: null,
    lastError: null,
    deliveredAt: null,
  };
}

export interface Award {
  userId: string;
  amount: number;
  reason: string;
  requestId: string;
}

/**
 * Writes an award's ledger row and moves the materialized balance, in one statement:
 * the account row is locked first, so the guard (the balance stays within 0 … 2^31−1)
 * sees the newest balance. 'replayed' when the requestId was used before (nothing
 * changes). Throws BadInputError when the guard fails, or when the requestId named
 * another award.
 */
export async function recordAward(prisma: PrismaClient, award: Award): Promise<'applied' | 'replayed'> {
  const [outcome] = await prisma.$queryRaw<{ inserted: boolean; before: number }[]>`
    WITH current AS (
      SELECT balance FROM points_account WHERE user_id = ${award.userId} FOR UPDATE
    ),
    ledger AS (
      INSERT INTO points_ledger (user_id, delta, reason, request_id)
      SELECT ${award.userId}, ${award.amount}, ${award.reason}, ${award.requestId}
      WHERE COALESCE((SELECT balance FROM current), 0)::bigint + ${award.amount}::int BETWEEN 0 AND ${MAX_POINTS}
      ON CONFLICT (request_id) DO NOTHING
      RETURNING delta
    ),
    updated AS (
      UPDATE points_account a SET balance = a.balance + l.delta FROM ledger l WHERE a.user_id = ${award.userId}
    ),
    -- A first award (never negative: the guard counted from 0); a concurrent first award adds up.
    created AS (
      INSERT INTO points_account AS a (user_id, balance) SELECT ${award.userId}, delta FROM ledger WHERE NOT EXISTS (SELECT 1 FROM current)
      ON CONFLICT (user_id) DO UPDATE SET balance = a.balance + EXCLUDED.balance
    )
    SELECT EXISTS (SELECT 1 FROM ledger) AS inserted, COALESCE((SELECT balance FROM current), 0) AS before`;
  if (outcome!.inserted) return 'applied';
  const first = await prisma.pointsLedger.findUnique({ where: { requestId: award.requestId } });
  if (!first) throw new BadInputError(outcome!.before + award.amount < 0 ? 'the balance would go below zero' : `the balance would exceed ${MAX_POINTS}`);
  if (first.userId !== award.userId || first.delta !== award.amount) throw new BadInputError(`requestId ${award.requestId} was already used for another award`);
  return 'replayed';
}

/**
 * The ledger's sum and the user's answers Redis still remembers: redemptions and
 * refusals made after `nowMs` − the answer TTL. No transaction: an answer left out only
 * sends a retry to PostgreSQL, whose journal handlers keep the first answer.
 */
export async function loadBalance(prisma: PrismaClient, userId: string, nowMs: number): Promise<BalanceSnapshot> {
  const since = new Date(nowMs - ANSWER_TTL_MS);
  const [account, redemptions, refusals] = await Promise.all([
    prisma.pointsAccount.findUnique({ where: { userId } }),
    prisma.redemption.findMany({ where: { userId, createdAt: { gt: since } }, select: { requestId: true, createdAt: true } }),
    prisma.redemptionRefusal.findMany({ where: { userId, refusedAt: { gt: since } }, select: { requestId: true, answer: true, refusedAt: true } }),
  ]);
  return {
    userId,
    balance: account?.balance ?? 0,
    recent: [
      ...redemptions.map((row) => ({ requestId: row.requestId, answer: 'redeemed:', forgetAtMs: row.createdAt.getTime() + ANSWER_TTL_MS })),
      ...refusals.map((row) => ({ requestId: row.requestId, answer: row.answer, forgetAtMs: row.refusedAt.getTime() + ANSWER_TTL_MS })),
    ],
  };
}

/**
 * The goods item as PostgreSQL holds it, read in one statement (one snapshot); null if
 * it does not exist. Without a pool, handing out resumes after the highest durable stock
 * unit, and each user's count after their highest sequence number: a unit or number that
 * a redemption on its way here holds is then never handed out again (if that redemption
 * is lost for good, with its process and Redis's copy at once, that unit stays unsold).
 */
export async function loadGoods(prisma: PrismaClient, goodsId: string): Promise<GoodsSnapshot | null> {
  const [goods] = await prisma.$queryRaw<
    { points_cost: number; per_user_limit: number; pooled: boolean; stock: number; free_codes: string[]; max_unit: number | null; last_seqs: Record<string, number> }[]
  >`
    SELECT g.points_cost, g.per_user_limit, g.pooled, g.stock,
      ARRAY(SELECT v.code FROM voucher_code v
            WHERE v.goods_id = g.id AND NOT EXISTS (SELECT 1 FROM redemption r WHERE r.voucher_code = v.code)
            ORDER BY v.position) AS free_codes,
      (SELECT max(r.stock_unit) FROM redemption r WHERE r.goods_id = g.id) AS max_unit,
      (SELECT COALESCE(jsonb_object_agg(s.user_id, s.seq), '{}'::jsonb)
       FROM (SELECT r.user_id, max(r.user_seq) AS seq FROM redemption r WHERE r.goods_id = g.id AND r.user_seq IS NOT NULL GROUP BY r.user_id) s) AS last_seqs
    FROM goods g WHERE g.id = ${goodsId}`;
  if (!goods) return null;
  return {
    id: goodsId,
    pointsCost: goods.points_cost,
    perUserLimit: goods.per_user_limit,
    pooled: goods.pooled,
    stock: goods.stock,
    remaining: goods.pooled ? goods.free_codes.length : goods.stock - ((goods.max_unit ?? -1) + 1),
    freeCodes: goods.free_codes,
    lastSeqByUser: goods.last_seqs,
  };
}

/** Inserts the goods item and its pool. Throws BadInputError when a code is already in a pool. */
export async function insertGoods(prisma: PrismaClient, id: string, createdBy: string, input: CreateGoodsInput) {
  const codes = input.voucherCodes ?? [];
  try {
    return await prisma.$transaction(async (tx) => {
      const goods = await tx.goods.create({
        data: { id, title: input.title, pointsCost: input.pointsCost, stock: input.stock, perUserLimit: input.perUserLimit, pooled: codes.length > 0, createdBy },
      });
      if (codes.length > 0) await tx.voucherCode.createMany({ data: codes.map((code, position) => ({ code, goodsId: id, position })) });
      return goods;
    });
  } catch (error) {
    if (error instanceof Prisma.PrismaClientKnownRequestError && error.code === 'P2002') {
      throw new BadInputError('a voucher code is already in the pool of another goods item');
    }
    throw error;
  }
}
