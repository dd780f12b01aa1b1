/*
 * Stock transfers between shop buckets (buckets.ts). A bucket whose share of a goods item
 * ran dry takes stock from the bucket that has the most, in two journaled scripts on two
 * slots, one of each per transfer:
 *
 * 1. take (lua/takeStock.lua, the donor's slot): half of the donor's remaining stock
 *    leaves its share; committed, goods_stock_transfer holds the units in flight and the
 *    donor's allotment is lowered, in one statement.
 * 2. give (lua/giveStock.lua, the receiver's slot): the units join the receiver's share,
 *    once per transfer (a marker); committed, the transfer is given and the receiver's
 *    allotment raised, in one statement.
 *
 * Neither makes stock: a take only moves what its donor has not handed out, and a give
 * only what a committed take holds. So at every instant the buckets' allotments plus the
 * units in flight are the stock. A process that dies between the two leaves the units in
 * flight, durably; the transfer sweeper (`mend`) gives them. One transfer of an item runs
 * at a time (its transfer lock), which is also why a bucket that finds every other dry
 * may answer OutOfStock: no units are on their way anywhere, except a dead process's,
 * which it gives first.
 *
 * That finding is recorded as the item's sold-out verdict (lua/markSoldOut.lua): most of a
 * flash sale's crowd arrives after the last unit, and each would otherwise queue for the
 * lock to be told the same, one at a time, past its wait limit. Whatever adds stock to a
 * bucket ends the verdict (a give, a rebuilt share with stock), and a check that may have
 * read a bucket before the stock came records none.
 *
 * A restock (restockGoods) is a give without a take: its transfers, one per bucket, come
 * from no bucket and are committed with the item's raised stock.
 */
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { Prisma, type PrismaClient } from '../../generated/prisma/client.ts';
import type { Campaign } from '../../infra/campaign/campaign.ts';
import { underRebuildLock } from '../../infra/campaign/rebuild.ts';
import { conflictingEntries, entryKind } from '../../infra/journal/entryKind.ts';
import type { CampaignDeps } from '../deps.ts';
import { ServiceUnavailableError } from '../errors.ts';
import { allBuckets } from './buckets.ts';
import { type GoodsShard, type GoodsSnapshot, type PointsStore, type StockTransfer, transferLockKey } from './store.ts';

/** How long a check for a sold-out verdict may take (its token's life), as long as a lock's lease. */
const SOLD_OUT_CHECK_TTL_MS = 10_000;
/**
 * How long a verdict stands before the next dry redemption checks again under the lock:
 * a bound on a verdict whose end was lost (a Redis failover losing the delete, a share
 * dropped after a conflict and not rebuilt yet), cheap to renew in a crowd.
 */
const SOLD_OUT_TTL_MS = 2_000;

const takeFields = z.object({
  transfer: z.string(),
  goods: z.string(),
  from: z.coerce.number().int(),
  to: z.coerce.number().int(),
  units: z.coerce.number().int(),
  codes: z.string().transform((codes) => z.array(z.string()).parse(codes === '{}' ? [] : JSON.parse(codes))),
  at: z.coerce.number().int(),
});

const giveFields = z.object({
  give: z.string(),
  transfer: z.string(),
  goods: z.string(),
  to: z.coerce.number().int(),
  at: z.coerce.number().int(),
});

/**
 * A take, persisted only if PostgreSQL agrees the donor had the units: for a pool, the
 * codes are the donor's and free; otherwise its allotment less the units still covers
 * every unit it handed out. Otherwise a conflict: the donor is rebuilt.
 */
export const takeStockJournalKind = entryKind({
  kind: 'points.takeStock',
  fields: takeFields,
  async persist(db, entries) {
    const inserted: string[] = [];
    for (const { fields: take } of entries) {
      const rows = await db.query<{ id: string }>(Prisma.sql`
        WITH guard AS (
          SELECT 1 FROM goods g WHERE g.id = ${take.goods} AND CASE
            WHEN g.pooled THEN (SELECT count(*) FROM voucher_code v WHERE v.goods_id = g.id AND v.bucket = ${take.from} AND v.code = ANY(${take.codes}::text[])
                                  AND NOT EXISTS (SELECT 1 FROM redemption r WHERE r.voucher_code = v.code)) = ${take.units}
            ELSE COALESCE((SELECT s.allotted FROM goods_bucket_stock s WHERE s.goods_id = g.id AND s.bucket = ${take.from}), 0) - ${take.units}
                 >= COALESCE((SELECT max(r.stock_unit) + 1 FROM redemption r WHERE r.goods_id = g.id AND r.stock_bucket = ${take.from}), 0) END
        ),
        taken AS (
          INSERT INTO goods_stock_transfer (id, goods_id, from_bucket, to_bucket, units, codes, taken_at)
          SELECT ${take.transfer}, ${take.goods}, ${take.from}, ${take.to}, ${take.units}, ${take.codes}::text[], to_timestamp(${take.at}::bigint / 1000.0) FROM guard
          ON CONFLICT (id) DO NOTHING
          RETURNING id
        ),
        allotment AS (
          UPDATE goods_bucket_stock s SET allotted = s.allotted - ${take.units}
          WHERE s.goods_id = ${take.goods} AND s.bucket = ${take.from} AND EXISTS (SELECT 1 FROM taken)
        ),
        carried AS (
          UPDATE voucher_code v SET bucket = NULL WHERE v.code = ANY(${take.codes}::text[]) AND EXISTS (SELECT 1 FROM taken)
        )
        SELECT id FROM taken`);
      inserted.push(...rows.map((row) => row.id));
    }
    return conflictingEntries(
      entries,
      (take) => take.transfer,
      inserted,
      async (ids) => (await db.prisma.goodsStockTransfer.findMany({ where: { id: { in: ids } }, select: { id: true } })).map((row) => row.id),
    );
  },
});

/** A give: the transfer given and the receiver's allotment raised, once; a transfer another give landed is a conflict. */
export const giveStockJournalKind = entryKind({
  kind: 'points.giveStock',
  fields: giveFields,
  async persist(db, entries) {
    const inserted: string[] = [];
    for (const { fields: give } of entries) {
      const rows = await db.query<{ id: string }>(Prisma.sql`
        WITH given AS (
          UPDATE goods_stock_transfer t SET given_at = to_timestamp(${give.at}::bigint / 1000.0), given_by = ${give.give}
          WHERE t.id = ${give.transfer} AND t.to_bucket = ${give.to} AND t.given_at IS NULL
          RETURNING t.goods_id, t.to_bucket, t.units, t.codes
        ),
        allotment AS (
          INSERT INTO goods_bucket_stock AS s (goods_id, bucket, allotted) SELECT goods_id, to_bucket, units FROM given
          ON CONFLICT (goods_id, bucket) DO UPDATE SET allotted = s.allotted + EXCLUDED.allotted
        ),
        carried AS (
          UPDATE voucher_code v SET bucket = g.to_bucket FROM given g WHERE v.code = ANY(g.codes)
        )
        SELECT ${give.give} AS id FROM given`);
      inserted.push(...rows.map((row) => row.id));
    }
    return conflictingEntries(
      entries,
      (give) => give.give,
      inserted,
      async (ids) => (await db.prisma.goodsStockTransfer.findMany({ where: { givenBy: { in: ids } }, select: { givenBy: true } })).map((row) => row.givenBy!),
    );
  },
});

/** The transfers of the item taken (or restocked) and not given yet. */
async function inFlight(prisma: PrismaClient, goodsId: string): Promise<(StockTransfer & { restock: boolean })[]> {
  const rows = await prisma.goodsStockTransfer.findMany({ where: { goodsId, givenAt: null }, orderBy: { takenAt: 'asc' } });
  return rows.map((row) => ({ id: row.id, goodsId, toBucket: row.toBucket, units: row.units, codes: row.codes, restock: row.fromBucket === null }));
}

export class StockTransfers {
  constructor(
    private readonly deps: Omit<CampaignDeps, 'random'>,
    private readonly goods: Campaign<GoodsShard, GoodsSnapshot>,
    private readonly store: PointsStore,
    /** Tests only: runs between a committed take and its give (a crash test stops there). */
    private readonly afterTake: () => Promise<void> = async () => {},
  ) {
    // A take or give PostgreSQL turned down was decided by a share that disagrees with it: that share is rebuilt.
    // Read raw: an entry may be unreadable otherwise (a dead letter).
    goods.persistsWith(takeStockJournalKind, (entry) => [{ goodsId: String(entry.fields.goods), bucket: Number(entry.fields.from) }]);
    goods.persistsWith(giveStockJournalKind, (entry) => [{ goodsId: String(entry.fields.goods), bucket: Number(entry.fields.to) }]);
  }

  /**
   * Moves stock into the dry `bucket` from the bucket with the most left. True once the
   * bucket has stock (moved here, or by a transfer before this one); false when every
   * bucket is dry and nothing is in flight, or the item's sold-out verdict says so.
   */
  refill(goodsId: string, bucket: number): Promise<boolean> {
    const remainingIn = (b: number) => this.goods.read({ goodsId, bucket: b }, () => this.store.remainingStock({ goodsId, bucket: b }));
    // Everyone whose bucket ran dry asks at once in a storm: those a transfer already
    // refilled, or told sold out, go without queueing for the lock, or the last would
    // wait out its limit.
    const answeredMeanwhile = async () => {
      const [left, soldOut] = await Promise.all([remainingIn(bucket), this.store.isSoldOut(goodsId)]);
      if ((left ?? 0) > 0) return true;
      return soldOut ? false : undefined;
    };
    return underRebuildLock(
      this.deps,
      transferLockKey(goodsId),
      async () => {
        await this.giveInFlight(goodsId);
        // Written before the buckets are read: stock added after that spoils the verdict.
        const check = await this.store.beginSoldOutCheck(goodsId, SOLD_OUT_CHECK_TTL_MS);
        for (;;) {
          const remaining = await Promise.all(allBuckets(this.store.buckets).map(remainingIn));
          if (remaining[bucket] === null) return false;
          if (remaining[bucket]! > 0) return true;
          const donor = remaining.reduce<number>((best, left, b) => ((left ?? 0) > (remaining[best] ?? 0) ? b : best), bucket);
          if (donor === bucket) {
            await this.store.markSoldOut(goodsId, check, SOLD_OUT_TTL_MS);
            return false;
          }
          // null: the donor ran dry between the read and the take; look again.
          const transfer = await this.take(goodsId, donor, bucket);
          if (!transfer) continue;
          await this.afterTake();
          await this.give(transfer);
          return true;
        }
      },
      answeredMeanwhile,
    );
  }

  /** Gives a committed restock's units to their buckets, with anything else of the item in flight. */
  giveRestocked(goodsId: string): Promise<number> {
    return underRebuildLock(this.deps, transferLockKey(goodsId), () => this.giveInFlight(goodsId));
  }

  /** The sweeper: gives what dead processes left in flight, item by item; one that fails holds back no other. Returns how many transfers it gave. */
  async mend(): Promise<number> {
    const items = await this.deps.prisma.goodsStockTransfer.findMany({ where: { givenAt: null }, distinct: ['goodsId'], select: { goodsId: true } });
    let given = 0;
    for (const { goodsId } of items) {
      try {
        given += await underRebuildLock(this.deps, transferLockKey(goodsId), () => this.giveInFlight(goodsId));
      } catch (error) {
        this.deps.log.error({ err: error, goodsId }, 'could not give the stock in flight of a goods item; tried again next round');
      }
    }
    return given;
  }

  /**
   * Under the item's transfer lock, so no live transfer is between its two halves: a take
   * in flight was left by a process that died before its give. A restock's units are in
   * flight until a give, whoever makes it.
   */
  private async giveInFlight(goodsId: string): Promise<number> {
    const transfers = await inFlight(this.deps.prisma, goodsId);
    for (const transfer of transfers) {
      const fields = { transfer: transfer.id, goodsId, toBucket: transfer.toBucket };
      if (transfer.restock) this.deps.log.info(fields, 'giving restocked stock');
      else this.deps.log.warn(fields, 'giving stock a transfer left in flight');
      await this.give(transfer);
    }
    return transfers.length;
  }

  private async take(goodsId: string, from: number, to: number): Promise<StockTransfer | null> {
    const reply = await this.goods.journaled(
      { goodsId, bucket: from },
      {
        call: () => this.store.takeStock(goodsId, from, to, randomUUID()),
        entryOf: (reply) => (reply.kind === 'taken' ? reply.entry : null),
        unavailable: () => new ServiceUnavailableError('stock could not be moved between buckets; try again'),
      },
    );
    if (reply?.kind !== 'taken') return null;
    const take = takeStockJournalKind.decode(reply.entry);
    return { id: take.transfer, goodsId, toBucket: to, units: take.units, codes: take.codes };
  }

  /**
   * Ends the item's sold-out verdict, then gives the units. Before, not after: every give
   * runs under the transfer lock, so no check can record a verdict again until it is done,
   * and dry redemptions meanwhile queue for the lock rather than being told OutOfStock while
   * the units land.
   */
  private async give(transfer: StockTransfer): Promise<void> {
    await this.store.stockAdded(transfer.goodsId);
    await this.goods.journaled(
      { goodsId: transfer.goodsId, bucket: transfer.toBucket },
      {
        call: () => this.store.giveStock(transfer, randomUUID()),
        entryOf: (reply) => (reply.kind === 'given' ? reply.entry : null),
        unavailable: () => new ServiceUnavailableError('stock could not be moved between buckets; try again'),
      },
    );
  }
}
