import type { Goods, Prisma, PrismaClient } from '../../generated/prisma/client.ts';
import { ruleInputIssue } from '../../i18n/issues.ts';
import { unnest } from '../../infra/db/unnest.ts';
import { BadInputError } from '../errors.ts';
import { type OperatorRequest, recordRequest } from '../operatorRequests.ts';
import { allBuckets, bucketOf, initialShare } from './buckets.ts';
import { type CreateGoodsInput, MAX_GOODS_STOCK, MAX_POINTS, type RestockGoodsInput, type UpdateGoodsInput, saleEndsTooEarly } from './input.ts';
import { ANSWER_TTL_MS, type BalanceSnapshot, type GoodsShard, type GoodsSnapshot } from './store.ts';

export interface Award {
  userId: string;
  amount: number;
  reason: string;
  requestId: string;
}

/**
 * Writes an award's ledger row and moves the materialized balance, in one statement:
 * the account row is locked first, so the guard sees the newest balance and held points.
 * The guard: the balance stays at 0 or more, and the balance with what paid draws hold
 * (the ledger's sum) at 2^31−1 or less, so a reservation given back always fits.
 * 'replayed' when the requestId was used before (nothing changes). Throws BadInputError
 * when the guard fails, or when the requestId named another award.
 */
export async function recordAward(prisma: PrismaClient, award: Award): Promise<'applied' | 'replayed'> {
  const [outcome] = await prisma.$queryRaw<{ inserted: boolean; before: number }[]>`
    WITH current AS (
      SELECT balance, held FROM points_account WHERE user_id = ${award.userId} FOR UPDATE
    ),
    ledger AS (
      INSERT INTO points_ledger (user_id, delta, reason, request_id)
      SELECT ${award.userId}, ${award.amount}, ${award.reason}, ${award.requestId}
      WHERE COALESCE((SELECT balance FROM current), 0)::bigint + ${award.amount}::int >= 0
        AND COALESCE((SELECT balance::bigint + held FROM current), 0) + ${award.amount}::int <= ${MAX_POINTS}
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
  if (!first) {
    throw BadInputError.of([outcome!.before + award.amount < 0 ? ruleInputIssue(['amount'], 'BALANCE_BELOW_ZERO') : ruleInputIssue(['amount'], 'BALANCE_ABOVE_MAX', { max: MAX_POINTS })]);
  }
  if (first.userId !== award.userId || first.delta !== award.amount) {
    throw BadInputError.of([ruleInputIssue(['requestId'], 'REQUEST_ID_OF_ANOTHER_AWARD', { requestId: award.requestId })]);
  }
  return 'replayed';
}

/**
 * The ledger's sum and the user's answers Redis still remembers: redemptions and
 * refusals made after `nowMs` − the answer TTL. No transaction: an answer left out only
 * sends a retry to PostgreSQL, whose journal handlers keep the first answer. The balance
 * and the draw payments it counts are read in one statement, one snapshot: a draw's
 * commit changes both at once, and a settlement marked here is never applied again.
 */
export async function loadBalance(prisma: PrismaClient, userId: string, nowMs: number): Promise<BalanceSnapshot> {
  const since = new Date(nowMs - ANSWER_TTL_MS);
  const [[account], redemptions, refusals] = await Promise.all([
    prisma.$queryRaw<{ balance: number; settled: string[]; holds: { activityId: string; requestId: string; drawId: string; atMs: number }[] }[]>`
      SELECT COALESCE((SELECT balance FROM points_account WHERE user_id = ${userId}), 0) AS balance,
        ARRAY(SELECT draw_id FROM draw_payment WHERE user_id = ${userId} AND settled_at IS NULL AND status <> 'RESERVED') AS settled,
        COALESCE((SELECT jsonb_agg(jsonb_build_object('activityId', activity_id, 'requestId', request_id, 'drawId', draw_id,
                    'atMs', (extract(epoch FROM reserved_at) * 1000)::bigint))
                  FROM draw_payment WHERE user_id = ${userId} AND cost > 0 AND request_id IS NOT NULL AND status <> 'RELEASED' AND reserved_at > ${since}),
                 '[]'::jsonb) AS holds`,
    prisma.redemption.findMany({ where: { userId, createdAt: { gt: since } }, select: { requestId: true, goodsId: true, createdAt: true } }),
    prisma.redemptionRefusal.findMany({ where: { userId, refusedAt: { gt: since } }, select: { requestId: true, goodsId: true, answer: true, refusedAt: true } }),
  ]);
  return {
    userId,
    balance: account?.balance ?? 0,
    recent: [
      ...redemptions.map((row) => ({ requestId: row.requestId, goodsId: row.goodsId, answer: 'redeemed:', forgetAtMs: row.createdAt.getTime() + ANSWER_TTL_MS })),
      ...refusals.map((row) => ({ requestId: row.requestId, goodsId: row.goodsId, answer: row.answer, forgetAtMs: row.refusedAt.getTime() + ANSWER_TTL_MS })),
    ],
    settledDraws: account?.settled ?? [],
    drawHolds: (account?.holds ?? []).map(({ atMs, ...hold }) => ({ ...hold, forgetAtMs: Number(atMs) + ANSWER_TTL_MS })),
  };
}

/**
 * The goods item's share in one bucket as PostgreSQL holds it, read in one statement (one
 * snapshot); null if the item does not exist. The share is the bucket's allotment
 * (goods_bucket_stock; stock transfers move it). Without a pool, handing out resumes after
 * the bucket's highest durable stock unit, and each user's count after their highest
 * sequence number: a unit or number that a redemption on its way here holds is then never
 * handed out again (if that redemption is lost for good, with its process and Redis's copy
 * at once, that unit stays unsold).
 */
export async function loadGoods(prisma: PrismaClient, { goodsId, bucket }: GoodsShard, buckets: number): Promise<GoodsSnapshot | null> {
  const [goods] = await prisma.$queryRaw<
    {
      points_cost: number;
      per_user_limit: number;
      pooled: boolean;
      on_sale: boolean;
      sale_starts_at: Date | null;
      sale_ends_at: Date | null;
      allotted: number;
      free_codes: string[];
      max_unit: number | null;
      last_seqs: Record<string, number>;
      given: string[];
    }[]
  >`
    SELECT g.points_cost, g.per_user_limit, g.pooled, g.on_sale, g.sale_starts_at, g.sale_ends_at,
      COALESCE((SELECT s.allotted FROM goods_bucket_stock s WHERE s.goods_id = g.id AND s.bucket = ${bucket}), 0) AS allotted,
      ARRAY(SELECT v.code FROM voucher_code v
            WHERE v.goods_id = g.id AND v.bucket = ${bucket} AND NOT EXISTS (SELECT 1 FROM redemption r WHERE r.voucher_code = v.code)
            ORDER BY v.position) AS free_codes,
      (SELECT max(r.stock_unit) FROM redemption r WHERE r.goods_id = g.id AND r.stock_bucket = ${bucket}) AS max_unit,
      (SELECT COALESCE(jsonb_object_agg(s.user_id, s.seq), '{}'::jsonb)
       FROM (SELECT r.user_id, max(r.user_seq) AS seq FROM redemption r WHERE r.goods_id = g.id AND r.user_seq IS NOT NULL GROUP BY r.user_id) s) AS last_seqs,
      ARRAY(SELECT t.id FROM goods_stock_transfer t
            WHERE t.goods_id = g.id AND t.to_bucket = ${bucket} AND t.given_at > now() - ${ANSWER_TTL_MS}::int * interval '1 millisecond') AS given
    FROM goods g WHERE g.id = ${goodsId}`;
  if (!goods) return null;
  return {
    id: goodsId,
    bucket,
    pointsCost: goods.points_cost,
    perUserLimit: goods.per_user_limit,
    pooled: goods.pooled,
    onSale: goods.on_sale,
    saleStartsAtMs: goods.sale_starts_at?.getTime() ?? null,
    saleEndsAtMs: goods.sale_ends_at?.getTime() ?? null,
    stock: goods.allotted,
    remaining: goods.pooled ? goods.free_codes.length : Math.max(0, goods.allotted - ((goods.max_unit ?? -1) + 1)),
    freeCodes: goods.free_codes,
    lastSeqByUser: Object.fromEntries(Object.entries(goods.last_seqs).filter(([userId]) => bucketOf(userId, buckets) === bucket)),
    givenTransfers: goods.given,
  };
}

/**
 * Inserts the goods item, the first entry of its history, its pool and its stock dealt
 * over the buckets (a code to the bucket of its position). Throws BadInputError when a code is already in a pool.
 */
export async function insertGoods(prisma: PrismaClient, id: string, createdBy: string, input: CreateGoodsInput, buckets: number, request: OperatorRequest | null) {
  const codes = input.voucherCodes ?? [];
  return prisma.$transaction(async (tx) => {
    // First: a call racing with the same requestId waits here for this one, then fails on its key.
    if (request) await recordRequest(tx, request, id);
    const goods = await tx.goods.create({
      data: {
        id,
        title: input.title,
        pointsCost: input.pointsCost,
        stock: input.stock,
        perUserLimit: input.perUserLimit,
        pooled: codes.length > 0,
        onSale: input.onSale ?? true,
        saleStartsAt: input.saleStartsAt ?? null,
        saleEndsAt: input.saleEndsAt ?? null,
        createdBy,
      },
    });
    await tx.goodsChange.create({
      data: { id: `created:${id}`, goodsId: id, ...termsOf(goods), changedBy: createdBy, changedAt: goods.createdAt },
    });
    await tx.goodsBucketStock.createMany({
      data: allBuckets(buckets)
        .map((bucket) => ({ goodsId: id, bucket, allotted: initialShare(input.stock, bucket, buckets) }))
        .filter((share) => share.allotted > 0),
    });
    if (codes.length > 0) await insertPool(tx, id, codes, buckets, { firstPosition: 0, inFlight: false });
    return goods;
  });
}

/**
 * One statement with an array per column: Prisma's createMany built 10,000 codes'
 * parameters in JavaScript and held the event loop for up to a second doing it.
 * Codes already pooled are skipped by the insert, and the count tells. A code's bucket is
 * its position's; `inFlight` codes have none until a restock's transfer gives them one.
 */
async function insertPool(tx: Prisma.TransactionClient, goodsId: string, codes: readonly string[], buckets: number, place: { firstPosition: number; inFlight: boolean }) {
  const pool = unnest(
    'pool',
    codes.map((code, index) => ({ code, position: place.firstPosition + index })),
    {
      code: ['text', (row) => row.code],
      position: ['int', (row) => row.position],
    },
  );
  const inserted = await tx.$executeRaw`
    INSERT INTO voucher_code (code, goods_id, position, bucket)
    SELECT pool.code, ${goodsId}, pool.position, CASE WHEN ${place.inFlight} THEN NULL ELSE pool.position % ${buckets}::int END
    FROM ${pool}
    ON CONFLICT (code) DO NOTHING`;
  if (inserted === codes.length) return;
  // The transaction fails; which code was pooled already tells an operator importing thousands what to fix.
  const [taken] = await tx.$queryRaw<{ index: number; code: string }[]>`
    SELECT pool.position - ${place.firstPosition}::int AS index, pool.code
    FROM ${pool}
    WHERE NOT EXISTS (SELECT 1 FROM voucher_code v WHERE v.code = pool.code AND v.goods_id = ${goodsId} AND v.position = pool.position)
    ORDER BY pool.position LIMIT 1`;
  throw BadInputError.of([ruleInputIssue(['input', 'voucherCodes', taken!.index], 'VOUCHER_CODE_IN_ANOTHER_POOL', { code: taken!.code })]);
}

/**
 * Records a restock in one transaction, the item's row locked (so restocks of an item
 * take turns): the restock, the item's stock raised, a pool's new codes after its last,
 * and the units in flight to the buckets, dealt as createGoods deals them. The
 * allotments do not move yet: each bucket's give (stockTransfers.ts) raises its own, so
 * the allotments plus what is in flight stay the stock throughout. 'replayed' when the
 * requestId restocked the item before; null when the item does not exist.
 */
export async function recordRestock(prisma: PrismaClient, restockId: string, createdBy: string, input: RestockGoodsInput, buckets: number): Promise<'recorded' | 'replayed' | null> {
  const { goodsId, requestId, units } = input;
  const codes = input.voucherCodes ?? [];
  return prisma.$transaction(async (tx) => {
    const [item] = await tx.$queryRaw<{ pooled: boolean; stock: number }[]>`SELECT pooled, stock FROM goods WHERE id = ${goodsId} FOR UPDATE`;
    if (!item) return null;
    const first = await tx.goodsRestock.findUnique({ where: { goodsId_requestId: { goodsId, requestId } } });
    if (first) {
      if (first.units !== units || first.codes.length !== codes.length || first.codes.some((code, i) => code !== codes[i])) {
        throw BadInputError.of([ruleInputIssue(['input', 'requestId'], 'REQUEST_ID_OF_ANOTHER_RESTOCK', { requestId })]);
      }
      return 'replayed';
    }
    if (item.pooled !== codes.length > 0) throw BadInputError.of([ruleInputIssue(['input', 'voucherCodes'], item.pooled ? 'VOUCHER_CODES_REQUIRED' : 'VOUCHER_CODES_NOT_POOLED')]);
    if (item.stock + units > MAX_GOODS_STOCK) throw BadInputError.of([ruleInputIssue(['input', 'units'], 'STOCK_ABOVE_MAX', { max: MAX_GOODS_STOCK })]);
    await tx.goodsRestock.create({ data: { id: restockId, goodsId, requestId, units, codes, createdBy } });
    await tx.goods.update({ where: { id: goodsId }, data: { stock: { increment: units } } });
    const [{ next }] = (await tx.$queryRaw<{ next: number }[]>`SELECT COALESCE(max(position) + 1, 0)::int AS next FROM voucher_code WHERE goods_id = ${goodsId}`) as [{ next: number }];
    if (codes.length > 0) await insertPool(tx, goodsId, codes, buckets, { firstPosition: next, inFlight: true });
    for (const bucket of allBuckets(buckets)) {
      // A pool's codes go where createGoods would have put them: by position.
      const carried = codes.filter((_, index) => (next + index) % buckets === bucket);
      const share = item.pooled ? carried.length : initialShare(units, bucket, buckets);
      if (share === 0) continue;
      await tx.$executeRaw`
        INSERT INTO goods_stock_transfer (id, goods_id, from_bucket, to_bucket, units, codes, taken_at)
        VALUES (${`${restockId}:${bucket}`}, ${goodsId}, NULL, ${bucket}, ${share}, ${carried}::text[], now())`;
    }
    return 'recorded';
  });
}

/**
 * Applies an operator's change to the item's title, price or sale, and records the result
 * in its history; a change to what is already so records nothing. Null when the item
 * does not exist. A sale end already past ends a sale still open at `nowMs` (the buckets
 * then end it at their own time, and raiseSaleEnd records the latest); a sale that has
 * ended keeps its end.
 */
export async function recordGoodsChange(prisma: PrismaClient, changeId: string, changedBy: string, goodsId: string, input: UpdateGoodsInput, nowMs: number): Promise<Goods | null> {
  return prisma.$transaction(async (tx) => {
    const [locked] = await tx.$queryRaw<{ id: string }[]>`SELECT id FROM goods WHERE id = ${goodsId} FOR UPDATE`;
    if (!locked) return null;
    const goods = await tx.goods.findUniqueOrThrow({ where: { id: goodsId } });
    const current = termsOf(goods);
    const next: GoodsTerms = {
      title: input.title ?? current.title,
      pointsCost: input.pointsCost ?? current.pointsCost,
      onSale: input.onSale ?? current.onSale,
      saleStartsAt: input.clearSaleStartsAt ? null : (input.saleStartsAt ?? current.saleStartsAt),
      saleEndsAt: input.clearSaleEndsAt ? null : (input.saleEndsAt ?? current.saleEndsAt),
    };
    if (input.saleEndsAt && input.saleEndsAt.getTime() < nowMs) {
      const ended = current.saleEndsAt !== null && current.saleEndsAt.getTime() <= nowMs;
      next.saleEndsAt = ended ? current.saleEndsAt : new Date(nowMs);
    }
    // Checked on the window as it would be: one end may be changed alone.
    if (saleEndsTooEarly(next)) throw BadInputError.of([ruleInputIssue(['input', 'saleEndsAt'], 'SALE_ENDS_BEFORE_STARTS')]);
    if (JSON.stringify(next) === JSON.stringify(current)) return goods;
    await tx.goodsChange.create({ data: { id: changeId, goodsId, changedBy, ...next } });
    return tx.goods.update({ where: { id: goodsId }, data: next });
  });
}

/**
 * Moves the sale's end recorded at `endedAt` (by recordGoodsChange, in the item and in the
 * change that set it, or a retry of it) to `endsAt`, the latest end its buckets wrote:
 * they sold until then. Not if another change has moved the end since. The item as it is now.
 */
export async function raiseSaleEnd(prisma: PrismaClient, goodsId: string, endedAt: Date, endsAt: Date): Promise<Goods> {
  return prisma.$transaction(async (tx) => {
    await tx.goodsChange.updateMany({ where: { goodsId, saleEndsAt: endedAt }, data: { saleEndsAt: endsAt } });
    await tx.goods.updateMany({ where: { id: goodsId, saleEndsAt: endedAt }, data: { saleEndsAt: endsAt } });
    return tx.goods.findUniqueOrThrow({ where: { id: goodsId } });
  });
}

/** What an operator may change of a goods item, and its history records. */
type GoodsTerms = Pick<Goods, 'title' | 'pointsCost' | 'onSale' | 'saleStartsAt' | 'saleEndsAt'>;

function termsOf({ title, pointsCost, onSale, saleStartsAt, saleEndsAt }: GoodsTerms): GoodsTerms {
  return { title, pointsCost, onSale, saleStartsAt, saleEndsAt };
}
