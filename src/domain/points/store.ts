/*
 * Every key of a shop bucket shares its hash tag, `{shop}` for bucket 0 and `{shop:<b>}`
 * for the others (buckets.ts). A redemption checks and moves a user's balance, a goods
 * item's stock and voucher codes, and remembers its answer, all in one script, and Redis
 * Cluster runs a script only on keys of one slot: so the user's balance and counts live
 * in the user's bucket, and every bucket holds a share of each item's stock. With one
 * bucket (the default) the whole shop is one slot, one Redis core; with N, N slots.
 */

import { randomUUID } from 'node:crypto';
import type { Missing } from '../../infra/campaign/campaign.ts';
import { type JournalEntry, journalEntry } from '../../infra/journal/journal.ts';
import type { RedisClient } from '../../infra/redis/connection.ts';
import { type ReplyOf, type Scripts, defineScript } from '../../infra/redis/scripts.ts';
import { bucketOf, bucketTag } from './buckets.ts';

// User and goods ids come from outside; encoded they cannot hold the ':' between key parts.
const keyOf = (bucket: number, ...parts: string[]) => [bucketTag(bucket), ...parts.map(encodeURIComponent)].join(':');

/** Every redemption, refusal, reservation and stock transfer of a bucket, waiting for PostgreSQL. */
export const shopJournal = (bucket: number) => `${bucketTag(bucket)}:journal`;

/** Bucket 0's journal: the whole shop's with one bucket. */
export const SHOP_JOURNAL = shopJournal(0);

/** A user's spendable points: a cache of the ledger, authoritative while it exists. */
export function balanceKeys(userId: string, bucket = 0) {
  const meta = keyOf(bucket, 'balance', userId);
  return { meta, rebuilding: `${meta}:rebuilding`, journal: shopJournal(bucket) };
}

/** A goods item's share in one bucket. */
export function goodsKeys(goodsId: string, bucket = 0) {
  const meta = keyOf(bucket, 'goods', goodsId);
  return { meta, codes: `${meta}:codes`, users: `${meta}:users`, rebuilding: `${meta}:rebuilding`, journal: shopJournal(bucket) };
}

/** Held while stock of the goods item moves between buckets: one transfer of an item at a time. */
export const transferLockKey = (goodsId: string) => keyOf(0, 'goods', goodsId, 'transferring');

/** The item's sold-out verdict (lua/markSoldOut.lua), beside its transfer lock: one key for every bucket. */
export const soldOutKey = (goodsId: string) => keyOf(0, 'goods', goodsId, 'soldOut');

/** The remembered answer to one (user, requestId). */
export const answerKey = (userId: string, requestId: string, bucket = 0) => keyOf(bucket, 'answer', userId, requestId);

/** A paid draw request's live reservation: the draw id a retry with the same requestId draws with. */
export const drawHoldKey = (userId: string, activityId: string, requestId: string, bucket = 0) => keyOf(bucket, 'drawHold', userId, activityId, requestId);

/** Set once a settled draw payment (a release, a POINTS prize) is in the cached balance. */
export const drawSettledKey = (drawId: string, bucket = 0) => keyOf(bucket, 'drawSettled', drawId);

/** Set once a stock transfer's units are in the receiving bucket. */
export const stockGivenKey = (transferId: string, bucket: number) => keyOf(bucket, 'stockGiven', transferId);

/** How long a redemption's answer is remembered in Redis; a rebuilt balance restores those of its persisted redemptions. */
export const ANSWER_TTL_MS = 24 * 3600 * 1000;

/** What the first call with a requestId answered; retries get the same. */
export type RedeemAnswer =
  | { kind: 'redeemed' /** The redemption's journal entry; empty once it is known to be persisted. */; entryId: string }
  | { kind: 'outOfStock' }
  | { kind: 'perUserLimit'; limit: number }
  | { kind: 'insufficient'; balance: number; cost: number };

export function parseAnswer(answer: string): RedeemAnswer {
  const [kind, first = '', second = ''] = answer.split(':');
  switch (kind) {
    case 'redeemed':
      return { kind, entryId: first };
    case 'outOfStock':
      return { kind };
    case 'perUserLimit':
      return { kind, limit: Number(first) };
    case 'insufficient':
      return { kind, balance: Number(first), cost: Number(second) };
    default:
      throw new Error(`unknown redemption answer: ${answer}`);
  }
}

/**
 * A remembered answer: '<goods id>|<answer>'. One without the goods id (remembered before
 * it was kept) is taken for any item.
 */
function parseRemembered(remembered: string): { goodsId: string | undefined; answer: RedeemAnswer } {
  const bar = remembered.indexOf('|');
  return { goodsId: bar < 0 ? undefined : remembered.slice(0, bar), answer: parseAnswer(remembered.slice(bar + 1)) };
}

/** The value a rebuild remembers for an answer (see parseRemembered). */
const remembered = (goodsId: string, answer: string) => `${goodsId}|${answer}`;

const redeemPoints = defineScript('redeemPoints', ['balance', 'goods', 'codes', 'users', 'answer', 'journal'], {
  missing: () => ({}),
  dry: () => ({}),
  offSale: (values) => ({ opensAtMs: values.num(0), endedAtMs: values.num(1) }),
  redeemed: (values, keys) => ({ entry: values.entry(0, keys.journal)! }),
  answered: (values) => parseRemembered(values.str(0)),
  refused: (values, keys) => ({ answer: parseAnswer(values.str(0)), entry: values.entry(1, keys.journal)! }),
});

const awardPoints = defineScript('awardPoints', ['balance'], {
  applied: (values) => ({ balance: values.num(0) }),
  missing: () => ({}),
  belowZero: () => ({}),
});

const reserveDrawPoints = defineScript('reserveDrawPoints', ['balance', 'hold', 'journal'], {
  missing: () => ({}),
  held: (values) => ({ drawId: values.str(0) }),
  insufficient: (values) => ({ balance: values.num(0), cost: values.num(1) }),
  reserved: (values, keys) => ({ entry: values.entry(0, keys.journal)! }),
});

const settleDrawPoints = defineScript('settleDrawPoints', ['balance', 'settled', 'hold'], {
  applied: (values) => ({ balance: values.num(0) }),
  already: () => ({}),
  missing: () => ({}),
});

const setGoodsTerms = defineScript('setGoodsTerms', ['goods'], {
  missing: () => ({}),
  set: (values) => ({ saleEndsAtMs: values.str(0) === '' ? null : values.num(0) }),
});

const markSoldOut = defineScript('markSoldOut', ['soldOut'], {
  marked: () => ({}),
  stale: () => ({}),
});

const takeStock = defineScript('takeStock', ['goods', 'codes', 'journal'], {
  missing: () => ({}),
  empty: () => ({}),
  taken: (values, keys) => ({ entry: values.entry(0, keys.journal)! }),
});

const giveStock = defineScript('giveStock', ['goods', 'codes', 'given', 'journal'], {
  missing: () => ({}),
  already: () => ({}),
  given: (values, keys) => ({ entry: values.entry(0, keys.journal)! }),
});

export type ReserveDrawReply = ReplyOf<typeof reserveDrawPoints.replies>;
export type TakeStockReply = ReplyOf<typeof takeStock.replies>;
export type GiveStockReply = ReplyOf<typeof giveStock.replies>;

export interface DrawReservation {
  userId: string;
  activityId: string;
  requestId: string | null;
  drawId: string;
  cost: number;
}

/** A transfer as the receiver gets it: what was taken, from its committed take. */
export interface StockTransfer {
  id: string;
  goodsId: string;
  toBucket: number;
  units: number;
  codes: string[];
}

export type RedeemReply = Exclude<ReplyOf<typeof redeemPoints.replies>, Missing>;

/** What a rebuilt balance holds: the ledger's sum and the answers of recent redemptions. */
export interface BalanceSnapshot {
  userId: string;
  balance: number;
  /** Answers to remember: 'redeemed:' for a redemption (retries look it up), or the refusal. */
  recent: { requestId: string; goodsId: string; answer: string; forgetAtMs: number }[];
  /** Draw payments the balance already counts but Redis may not have applied: marked settled, never applied again. */
  settledDraws: string[];
  /** Live reservations of paid draw requests, so a retry reserves nothing. */
  drawHolds: { activityId: string; requestId: string; drawId: string; forgetAtMs: number }[];
}

/** A goods item's share in one bucket. */
export interface GoodsShard {
  goodsId: string;
  bucket: number;
}

/** What an operator may change of an item that the redemption script reads. */
export type GoodsSaleTerms = Pick<GoodsSnapshot, 'pointsCost' | 'onSale' | 'saleStartsAtMs' | 'saleEndsAtMs'>;

/** The goods hash's fields for the terms (lua/redeemPoints.lua); an open end is an empty string, as 0 is an instant. */
function saleTermFields(terms: GoodsSaleTerms) {
  return { pointsCost: terms.pointsCost, onSale: terms.onSale ? 1 : 0, saleStartsAtMs: terms.saleStartsAtMs ?? '', saleEndsAtMs: terms.saleEndsAtMs ?? '' };
}

/** What rebuilt goods keys of one bucket hold. */
export interface GoodsSnapshot {
  id: string;
  bucket: number;
  pointsCost: number;
  perUserLimit: number;
  pooled: boolean;
  onSale: boolean;
  /** The sale window in ms; null for an open end. */
  saleStartsAtMs: number | null;
  saleEndsAtMs: number | null;
  /** The bucket's allotment: the units it may hand out in all, those handed out included. */
  stock: number;
  /** Pooled: the free codes. Not pooled: the units after the highest durable one, so the next unit is stock − remaining. */
  remaining: number;
  /** The bucket's codes no persisted redemption holds, in hand-out order. */
  freeCodes: string[];
  /** Each user's (of the bucket) highest durable sequence number for the item (goods with a per-user limit). */
  lastSeqByUser: Record<string, number>;
  /** Transfers into the bucket that its allotment already counts: marked given, never given again. */
  givenTransfers: string[];
}

/** The shop's Redis side: the scripts' bindings, reads, and what a rebuild writes. */
export class PointsStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly scripts: Scripts,
    /** POINTS_SHOP_BUCKETS. */
    readonly buckets: number,
  ) {}

  bucketOf(userId: string): number {
    return bucketOf(userId, this.buckets);
  }

  balanceKeys(userId: string) {
    return balanceKeys(userId, this.bucketOf(userId));
  }

  drawHoldKey(userId: string, activityId: string, requestId: string): string {
    return drawHoldKey(userId, activityId, requestId, this.bucketOf(userId));
  }

  /** With `dryReply`, a dry bucket replies 'dry' and changes nothing, so stock can move to it first; without, it refuses. */
  redeem(userId: string, goodsId: string, requestId: string, redemptionId: string, dryReply: boolean) {
    const bucket = this.bucketOf(userId);
    const goods = goodsKeys(goodsId, bucket);
    const keys = { balance: this.balanceKeys(userId).meta, goods: goods.meta, codes: goods.codes, users: goods.users, answer: answerKey(userId, requestId, bucket), journal: goods.journal };
    return this.scripts.call(redeemPoints, keys, [userId, goodsId, requestId, redemptionId, ANSWER_TTL_MS, bucket, dryReply ? '1' : '0']);
  }

  reserveDraw(reservation: DrawReservation, rememberMs: number, releaseAfterMs: number): Promise<ReserveDrawReply> {
    const { userId, activityId, requestId, drawId, cost } = reservation;
    const balance = this.balanceKeys(userId);
    const keys = { balance: balance.meta, hold: this.drawHoldKey(userId, activityId, requestId ?? ''), journal: balance.journal };
    return this.scripts.call(reserveDrawPoints, keys, [userId, activityId, requestId ?? '', drawId, cost, rememberMs, releaseAfterMs]);
  }

  /** Applies a settled draw payment to the cached balance, once per draw; 'missing' when the balance is not cached. */
  async settleDraw(payment: { userId: string; activityId: string; requestId: string | null; drawId: string }, delta: number, released: boolean, rememberMs: number) {
    const { userId } = payment;
    const keys = {
      balance: this.balanceKeys(userId).meta,
      settled: drawSettledKey(payment.drawId, this.bucketOf(userId)),
      hold: this.drawHoldKey(userId, payment.activityId, payment.requestId ?? ''),
    };
    return (await this.scripts.call(settleDrawPoints, keys, [payment.drawId, delta, rememberMs, released ? '1' : '0'])).kind;
  }

  /** Applies a committed award to the cached balance; null when it cannot (see the script): reload it. */
  async applyAward(userId: string, delta: number): Promise<number | null> {
    const reply = await this.scripts.call(awardPoints, { balance: this.balanceKeys(userId).meta }, [delta]);
    return reply.kind === 'applied' ? reply.balance : null;
  }

  /** Takes half of the donor bucket's remaining stock into a transfer to `toBucket`. */
  takeStock(goodsId: string, fromBucket: number, toBucket: number, transferId: string) {
    const keys = goodsKeys(goodsId, fromBucket);
    return this.scripts.call(takeStock, { goods: keys.meta, codes: keys.codes, journal: keys.journal }, [transferId, goodsId, fromBucket, toBucket]);
  }

  /** Gives a committed take's units to its receiving bucket, once. */
  giveStock(transfer: StockTransfer, giveId: string) {
    const keys = goodsKeys(transfer.goodsId, transfer.toBucket);
    return this.scripts.call(giveStock, { goods: keys.meta, codes: keys.codes, given: stockGivenKey(transfer.id, transfer.toBucket), journal: keys.journal }, [
      transfer.id,
      giveId,
      transfer.goodsId,
      transfer.toBucket,
      transfer.units,
      JSON.stringify(transfer.codes),
      ANSWER_TTL_MS,
    ]);
  }

  /** Starts a check for a sold-out verdict: its token, to be written before the buckets are read. */
  async beginSoldOutCheck(goodsId: string, tokenTtlMs: number): Promise<string> {
    const token = `checking:${randomUUID()}`;
    await this.redis.set(soldOutKey(goodsId), token, 'PX', tokenTtlMs);
    return token;
  }

  /** Records the verdict of the check with `token`, unless stock was added since it began. */
  async markSoldOut(goodsId: string, token: string, verdictTtlMs: number): Promise<void> {
    await this.scripts.call(markSoldOut, { soldOut: soldOutKey(goodsId) }, [token, verdictTtlMs]);
  }

  async isSoldOut(goodsId: string): Promise<boolean> {
    return (await this.redis.get(soldOutKey(goodsId))) === 'soldOut';
  }

  /** After stock was added to a bucket: ends a verdict, and spoils a check that may have read the bucket before. */
  async stockAdded(goodsId: string): Promise<void> {
    await this.redis.del(soldOutKey(goodsId));
  }

  /**
   * Sets the price and sale of the item's share in a bucket, if the share is in Redis (a
   * rebuild reads them from PostgreSQL): the sale's end written (an end passed becomes the
   * script's time, lua/setGoodsTerms.lua), or null for no end or no share in Redis.
   */
  async setGoodsTerms({ goodsId, bucket }: GoodsShard, terms: GoodsSaleTerms): Promise<number | null> {
    const fields = saleTermFields(terms);
    const reply = await this.scripts.call(setGoodsTerms, { goods: goodsKeys(goodsId, bucket).meta }, [fields.pointsCost, fields.onSale, fields.saleStartsAtMs, fields.saleEndsAtMs]);
    return reply.kind === 'set' ? reply.saleEndsAtMs : null;
  }

  async balance(userId: string): Promise<number | null> {
    const balance = await this.redis.get(this.balanceKeys(userId).meta);
    return balance === null ? null : Number(balance);
  }

  /** The bucket's remaining stock of the item, or null when its keys are gone. */
  async remainingStock({ goodsId, bucket }: GoodsShard): Promise<number | null> {
    const remaining = await this.redis.hget(goodsKeys(goodsId, bucket).meta, 'remaining');
    return remaining === null ? null : Number(remaining);
  }

  /** A journaled redemption of the user's bucket not yet persisted, or null. */
  async journalEntry(userId: string, entryId: string): Promise<JournalEntry | null> {
    const stream = this.balanceKeys(userId).journal;
    const [entry] = await this.redis.xrange(stream, entryId, entryId);
    return entry ? journalEntry(stream, entry[0], entry[1]) : null;
  }

  async writeBalance(snapshot: BalanceSnapshot, nowMs: number): Promise<void> {
    const { userId } = snapshot;
    const bucket = this.bucketOf(userId);
    const tx = this.redis.multi();
    for (const { requestId, goodsId, answer, forgetAtMs } of snapshot.recent) {
      if (forgetAtMs > nowMs) tx.set(answerKey(userId, requestId, bucket), remembered(goodsId, answer), 'PX', forgetAtMs - nowMs);
    }
    for (const drawId of snapshot.settledDraws) tx.set(drawSettledKey(drawId, bucket), '1', 'PX', ANSWER_TTL_MS);
    for (const { activityId, requestId, drawId, forgetAtMs } of snapshot.drawHolds) {
      if (forgetAtMs > nowMs) tx.set(this.drawHoldKey(userId, activityId, requestId), drawId, 'PX', forgetAtMs - nowMs);
    }
    await tx.set(balanceKeys(userId, bucket).meta, snapshot.balance).exec();
  }

  /** Writes every key of the item's share in its bucket in one transaction, meta last. */
  async writeGoods(snapshot: GoodsSnapshot): Promise<void> {
    const keys = goodsKeys(snapshot.id, snapshot.bucket);
    const tx = this.redis.multi().del(keys.meta, keys.codes, keys.users);
    if (snapshot.freeCodes.length > 0) tx.rpush(keys.codes, ...snapshot.freeCodes);
    if (Object.keys(snapshot.lastSeqByUser).length > 0) tx.hset(keys.users, snapshot.lastSeqByUser);
    for (const transferId of snapshot.givenTransfers) tx.set(stockGivenKey(transferId, snapshot.bucket), 'rebuilt', 'PX', ANSWER_TTL_MS);
    tx.hset(keys.meta, {
      ...saleTermFields(snapshot),
      perUserLimit: snapshot.perUserLimit,
      pooled: snapshot.pooled ? 1 : 0,
      stock: snapshot.stock,
      remaining: snapshot.remaining,
    });
    await tx.exec();
    // A rebuilt share may hold units the sold-out check read as gone (a redemption PostgreSQL turned down).
    if (snapshot.remaining > 0) await this.stockAdded(snapshot.id);
  }
}
