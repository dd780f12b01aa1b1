/*
 * Every key of the points shop shares one hash tag, `{shop}`. A redemption checks and
 * moves a user's balance, a goods item's stock and voucher codes, and remembers its
 * answer, all in one script, and Redis Cluster runs a script only on keys of one slot.
 * Balances belong to users and stock to goods, so no finer tag puts both in one slot
 * for every pair. The price: the whole shop lives on one cluster node, one Redis core,
 * which is far above what a shop needs (see bench/RESULTS.md). The alternative, a
 * two-phase reservation across slots (hold the points, take the stock, then commit or
 * release), buys scale-out with a new failure mode: reservations a crash leaves behind.
 */

import type { Missing } from '../../infra/campaign/campaign.ts';
import { type JournalEntry, journalEntry } from '../../infra/journal/journal.ts';
import type { RedisClient } from '../../infra/redis/connection.ts';
import { type ReplyOf, type Scripts, defineScript } from '../../infra/redis/scripts.ts';

const SHOP = '{shop}';
// User and goods ids come from outside; encoded they cannot hold the ':' between key parts.
const keyOf = (...parts: string[]) => [SHOP, ...parts.map(encodeURIComponent)].join(':');

/** Every redemption of the shop, waiting for PostgreSQL. */
export const SHOP_JOURNAL = `${SHOP}:journal`;

/** A user's spendable points: a cache of the ledger, authoritative while it exists. */
export function balanceKeys(userId: string) {
  const meta = keyOf('balance', userId);
  return { meta, rebuilding: `${meta}:rebuilding`, journal: SHOP_JOURNAL };
}

export function goodsKeys(goodsId: string) {
  const meta = keyOf('goods', goodsId);
  return { meta, codes: `${meta}:codes`, users: `${meta}:users`, rebuilding: `${meta}:rebuilding`, journal: SHOP_JOURNAL };
}

/** The remembered answer to one (user, requestId). */
export const answerKey = (userId: string, requestId: string) => keyOf('answer', userId, requestId);

/** A paid draw request's live reservation: the draw id a retry with the same requestId draws with. */
export const drawHoldKey = (userId: string, activityId: string, requestId: string) => keyOf('drawHold', userId, activityId, requestId);

/** Set once a settled draw payment (a release, a POINTS prize) is in the cached balance. */
export const drawSettledKey = (drawId: string) => keyOf('drawSettled', drawId);

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

const redeemPoints = defineScript('redeemPoints', ['balance', 'goods', 'codes', 'users', 'answer', 'journal'], {
  missing: () => ({}),
  redeemed: (values, keys) => ({ entry: values.entry(0, keys.journal)! }),
  answered: (values) => ({ answer: parseAnswer(values.str(0)) }),
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

export type ReserveDrawReply = ReplyOf<typeof reserveDrawPoints.replies>;

export interface DrawReservation {
  userId: string;
  activityId: string;
  requestId: string | null;
  drawId: string;
  cost: number;
}

export type RedeemReply = Exclude<ReplyOf<typeof redeemPoints.replies>, Missing>;

/** What a rebuilt balance holds: the ledger's sum and the answers of recent redemptions. */
export interface BalanceSnapshot {
  userId: string;
  balance: number;
  /** Answers to remember: 'redeemed:' for a redemption (retries look it up), or the refusal. */
  recent: { requestId: string; answer: string; forgetAtMs: number }[];
  /** Draw payments the balance already counts but Redis may not have applied: marked settled, never applied again. */
  settledDraws: string[];
  /** Live reservations of paid draw requests, so a retry reserves nothing. */
  drawHolds: { activityId: string; requestId: string; drawId: string; forgetAtMs: number }[];
}

/** What rebuilt goods keys hold. */
export interface GoodsSnapshot {
  id: string;
  pointsCost: number;
  perUserLimit: number;
  pooled: boolean;
  stock: number;
  /** Pooled: the free codes. Not pooled: the units after the highest durable one, so the next unit is stock − remaining. */
  remaining: number;
  /** The pool's codes no persisted redemption holds, in hand-out order. */
  freeCodes: string[];
  /** Each user's highest durable sequence number for the item (goods with a per-user limit). */
  lastSeqByUser: Record<string, number>;
}

/** The shop's Redis side: the scripts' bindings, reads, and what a rebuild writes. */
export class PointsStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly scripts: Scripts,
  ) {}

  redeem(userId: string, goodsId: string, requestId: string, redemptionId: string) {
    const goods = goodsKeys(goodsId);
    const keys = { balance: balanceKeys(userId).meta, goods: goods.meta, codes: goods.codes, users: goods.users, answer: answerKey(userId, requestId), journal: SHOP_JOURNAL };
    return this.scripts.call(redeemPoints, keys, [userId, goodsId, requestId, redemptionId, ANSWER_TTL_MS]);
  }

  reserveDraw(reservation: DrawReservation, rememberMs: number, releaseAfterMs: number): Promise<ReserveDrawReply> {
    const { userId, activityId, requestId, drawId, cost } = reservation;
    const keys = { balance: balanceKeys(userId).meta, hold: drawHoldKey(userId, activityId, requestId ?? ''), journal: SHOP_JOURNAL };
    return this.scripts.call(reserveDrawPoints, keys, [userId, activityId, requestId ?? '', drawId, cost, rememberMs, releaseAfterMs]);
  }

  /** Applies a settled draw payment to the cached balance, once per draw; 'missing' when the balance is not cached. */
  async settleDraw(payment: { userId: string; activityId: string; requestId: string | null; drawId: string }, delta: number, released: boolean, rememberMs: number) {
    const keys = { balance: balanceKeys(payment.userId).meta, settled: drawSettledKey(payment.drawId), hold: drawHoldKey(payment.userId, payment.activityId, payment.requestId ?? '') };
    return (await this.scripts.call(settleDrawPoints, keys, [payment.drawId, delta, rememberMs, released ? '1' : '0'])).kind;
  }

  /** Applies a committed award to the cached balance; null when it cannot (see the script): reload it. */
  async applyAward(userId: string, delta: number): Promise<number | null> {
    const reply = await this.scripts.call(awardPoints, { balance: balanceKeys(userId).meta }, [delta]);
    return reply.kind === 'applied' ? reply.balance : null;
  }

  async balance(userId: string): Promise<number | null> {
    const balance = await this.redis.get(balanceKeys(userId).meta);
    return balance === null ? null : Number(balance);
  }

  async remainingStock(goodsId: string): Promise<number | null> {
    const remaining = await this.redis.hget(goodsKeys(goodsId).meta, 'remaining');
    return remaining === null ? null : Number(remaining);
  }

  /** A journaled redemption not yet persisted, or null. */
  async journalEntry(entryId: string): Promise<JournalEntry | null> {
    const [entry] = await this.redis.xrange(SHOP_JOURNAL, entryId, entryId);
    return entry ? journalEntry(SHOP_JOURNAL, entry[0], entry[1]) : null;
  }

  async writeBalance(snapshot: BalanceSnapshot, nowMs: number): Promise<void> {
    const tx = this.redis.multi();
    for (const { requestId, answer, forgetAtMs } of snapshot.recent) {
      if (forgetAtMs > nowMs) tx.set(answerKey(snapshot.userId, requestId), answer, 'PX', forgetAtMs - nowMs);
    }
    for (const drawId of snapshot.settledDraws) tx.set(drawSettledKey(drawId), '1', 'PX', ANSWER_TTL_MS);
    for (const { activityId, requestId, drawId, forgetAtMs } of snapshot.drawHolds) {
      if (forgetAtMs > nowMs) tx.set(drawHoldKey(snapshot.userId, activityId, requestId), drawId, 'PX', forgetAtMs - nowMs);
    }
    await tx.set(balanceKeys(snapshot.userId).meta, snapshot.balance).exec();
  }

  /** Writes every key of the goods item in one transaction, meta last. */
  async writeGoods(snapshot: GoodsSnapshot): Promise<void> {
    const keys = goodsKeys(snapshot.id);
    const tx = this.redis.multi().del(keys.meta, keys.codes, keys.users);
    if (snapshot.freeCodes.length > 0) tx.rpush(keys.codes, ...snapshot.freeCodes);
    if (Object.keys(snapshot.lastSeqByUser).length > 0) tx.hset(keys.users, snapshot.lastSeqByUser);
    tx.hset(keys.meta, {
      pointsCost: snapshot.pointsCost,
      perUserLimit: snapshot.perUserLimit,
      pooled: snapshot.pooled ? 1 : 0,
      stock: snapshot.stock,
      remaining: snapshot.remaining,
    });
    await tx.exec();
  }
}
