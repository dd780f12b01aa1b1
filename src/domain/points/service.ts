import { randomUUID } from 'node:crypto';
import type { Prisma, Redemption, RedemptionStatus } from '../../generated/prisma/client.ts';
import type { JournalEntry } from '../../infra/journal/journal.ts';
import { hydrate, withHydrationLock, withRebuild } from '../../infra/redis/hydration.ts';
import { redisTimeMs } from '../../infra/redis/time.ts';
import type { CampaignDeps } from '../deps.ts';
import { ServiceUnavailableError } from '../errors.ts';
import { NotFound } from '../problems.ts';
import { type DeliveryOptions, VoucherDeliveryWorker } from './deliveryWorker.ts';
import type { VoucherNotifier } from './notifiers.ts';
import type { CreateGoodsInput } from './input.ts';
import { type Award, insertGoods, loadBalance, loadGoods, pendingRedemption, recordAward, redemptionJournalHandler, refusalJournalHandler } from './persistence.ts';
import { InsufficientPoints, OutOfStock, PerUserLimitReached } from './problems.ts';
import { PointsStore, type RedeemAnswer, SHOP_JOURNAL, balanceKeys, goodsKeys, parseAnswer } from './store.ts';

export class RedemptionNotConfirmedError extends ServiceUnavailableError {}

export interface PointsDeps extends Omit<CampaignDeps, 'events' | 'random'> {
  notifier: VoucherNotifier;
  delivery: DeliveryOptions;
}

/** The selection the Pothos Prisma plugin plans for a field; services pass it to Prisma. */
type RedemptionQuery = { include?: Prisma.RedemptionInclude; select?: Prisma.RedemptionSelect };

/** How many times a redemption PostgreSQL refused rebuilds the keys it touched and tries again. */
const REDEEM_ATTEMPTS = 3;
/** The shop's journal is never retired: the sweeper watches it for good. */
const SHOP_JOURNAL_TRACKED_UNTIL = Number.MAX_SAFE_INTEGER;

export class PointsService {
  private readonly store: PointsStore;
  private readonly delivery: VoucherDeliveryWorker;

  constructor(private readonly deps: PointsDeps) {
    this.store = new PointsStore(deps.redis, deps.scripts);
    this.delivery = new VoucherDeliveryWorker(deps.prisma, deps.notifier, deps.delivery, deps.log);
    // A redemption or refusal PostgreSQL turned down spent points, stock and a code in Redis.
    const forget = ({ fields }: JournalEntry) => this.store.forget(fields.user!, fields.goods!, fields.request!);
    deps.journal.register(redemptionJournalHandler(this.delivery), forget);
    deps.journal.register(refusalJournalHandler, forget);
  }

  /**
   * Writes the award to the ledger in PostgreSQL, then to the cached balance. Returns
   * the new spendable balance. A repeated requestId changes nothing.
   */
  async award(award: Award): Promise<number> {
    // Both writes under the lock a rebuild takes: a rebuild then reads the ledger either
    // before the award, and the award is added on top, or after the award reached Redis.
    // With only the Redis write under it, a rebuild that read the ledger just after the
    // award committed made the award count twice in Redis. A replay cannot know whether
    // the first call reached Redis (it may have died in between), so it reloads the
    // balance from the ledger.
    return withHydrationLock(this.deps, balanceKeys(award.userId).hydrating, async () => {
      const outcome = await recordAward(this.deps.prisma, award);
      const applied = outcome === 'applied' ? await this.store.applyAward(award.userId, award.amount) : null;
      return applied ?? this.reloadBalance(award.userId);
    });
  }

  async createGoods(createdBy: string, input: CreateGoodsInput) {
    const goods = await insertGoods(this.deps.prisma, randomUUID(), createdBy, input);
    await this.deps.journal.trackStream(SHOP_JOURNAL, SHOP_JOURNAL_TRACKED_UNTIL);
    await this.store.writeGoods({
      id: goods.id,
      pointsCost: goods.pointsCost,
      perUserLimit: goods.perUserLimit,
      pooled: goods.pooled,
      stock: goods.stock,
      remaining: goods.stock,
      freeCodes: input.voucherCodes ?? [],
      lastSeqByUser: {},
    });
    return goods;
  }

  /**
   * Spends the goods item's cost on one unit of it. Resolves once the redemption is
   * committed in PostgreSQL; the same requestId gets the same answer.
   */
  async redeem(userId: string, goodsId: string, requestId: string): Promise<Redemption> {
    for (let attempt = 1; attempt <= REDEEM_ATTEMPTS; attempt++) {
      const reply = await withRebuild(
        () => this.store.redeem(userId, goodsId, requestId, randomUUID()),
        async () => (await this.rebuildGoods(goodsId)) && this.rebuildBalance(userId),
      );
      if (!reply) throw new NotFound('goods', goodsId);
      if (reply.kind === 'answered') return this.answered(userId, requestId, reply.answer);
      if ((await this.deps.journal.commit(reply.entry)) === 'persisted') {
        return reply.kind === 'refused' ? this.answered(userId, requestId, reply.answer) : pendingRedemption(reply.entry.fields);
      }
      // PostgreSQL holds another answer for this requestId (given before Redis forgot it),
      // or refused what Redis allowed because Redis lost data and was rebuilt while
      // redemptions were on their way to PostgreSQL. The commit dropped the keys the
      // redemption touched, to be rebuilt; the first answer stands, if there is one.
      this.deps.log.warn({ userId, goodsId, requestId }, 'redemption conflicted with PostgreSQL; rebuilding its balance and goods');
      const first = await this.durableAnswer(userId, requestId);
      if (first) return first;
    }
    throw new RedemptionNotConfirmedError('the points shop is being rebuilt; try again');
  }

  /** The spendable balance: Redis's, rebuilt from the ledger when missing. */
  async balance(userId: string): Promise<number> {
    return (await this.cached(() => this.store.balance(userId), () => this.rebuildBalance(userId))) ?? 0;
  }

  /** Live remaining stock, or null when the goods item does not exist. */
  remainingStock(goodsId: string): Promise<number | null> {
    return this.cached(() => this.store.remainingStock(goodsId), () => this.rebuildGoods(goodsId));
  }

  findGoods(query: { include?: Prisma.GoodsInclude; select?: Prisma.GoodsSelect }, goodsId: string) {
    return this.deps.prisma.goods.findUnique({ ...query, where: { id: goodsId } });
  }

  /** The user's redemptions, newest first. */
  redemptionsOf(query: RedemptionQuery, userId: string, limit: number) {
    return this.deps.prisma.redemption.findMany({ ...query, where: { userId }, orderBy: [{ createdAt: 'desc' }, { id: 'asc' }], take: limit });
  }

  /** A goods item's redemptions, oldest first, for operators. */
  redemptionsOfGoods(query: RedemptionQuery, goodsId: string, page: { status?: RedemptionStatus | null; limit: number; offset: number }) {
    return this.deps.prisma.redemption.findMany({
      ...query,
      where: { goodsId, ...(page.status ? { status: page.status } : {}) },
      orderBy: [{ createdAt: 'asc' }, { id: 'asc' }],
      take: page.limit,
      skip: page.offset,
    });
  }

  /** One round of the delivery worker over what is due (retries, and redemptions whose process died). */
  deliverDue(stopping?: AbortSignal): Promise<number> {
    return this.delivery.deliverDue(stopping);
  }

  /** Call after the journal's last commit: fresh deliveries in hand finish, the rest go back to the due rounds. */
  stopDelivery(): Promise<void> {
    return this.delivery.stop();
  }

  /** A value read from Redis, rebuilding its keys when they are missing; null if PostgreSQL does not know them either. */
  private async cached<T>(read: () => Promise<T | null>, rebuild: () => Promise<boolean>): Promise<T | null> {
    const reply = await withRebuild(async () => {
      const value = await read();
      return value === null ? { kind: 'missing' as const } : { kind: 'found' as const, value };
    }, rebuild);
    return reply && reply.value;
  }

  private async answered(userId: string, requestId: string, answer: RedeemAnswer): Promise<Redemption> {
    switch (answer.kind) {
      case 'outOfStock':
        throw new OutOfStock();
      case 'perUserLimit':
        throw new PerUserLimitReached(answer.limit);
      case 'insufficient':
        throw new InsufficientPoints(answer.balance, answer.cost);
      case 'redeemed':
        return this.durableRedemption(userId, requestId, answer.entryId);
    }
  }

  /**
   * The redemption a retried requestId made. A concurrent first call may still be
   * committing it, so commit its journal entry too: a retry is answered only with what
   * PostgreSQL holds, as the first call is.
   */
  private async durableRedemption(userId: string, requestId: string, entryId: string): Promise<Redemption> {
    // An entry still in the journal is committed here too; one that is gone was committed (or refused) already.
    const entry = entryId ? await this.store.journalEntry(entryId) : null;
    if (entry) await this.deps.journal.commit(entry);
    const durable = await this.durableAnswer(userId, requestId);
    if (durable) return durable;
    // Refused by PostgreSQL: the first call is rebuilding and trying again.
    throw new RedemptionNotConfirmedError('the first call with this requestId is still being confirmed; try again');
  }

  /** What PostgreSQL holds for a requestId: its redemption, or its refusal thrown as the problem; null for neither. */
  private async durableAnswer(userId: string, requestId: string): Promise<Redemption | null> {
    const where = { userId_requestId: { userId, requestId } };
    const redemption = await this.deps.prisma.redemption.findUnique({ where });
    if (redemption) return redemption;
    const refusal = await this.deps.prisma.redemptionRefusal.findUnique({ where });
    return refusal ? this.answered(userId, requestId, parseAnswer(refusal.answer)) : null;
  }

  private rebuildBalance(userId: string): Promise<boolean> {
    return hydrate(this.deps, balanceKeys(userId), async () => {
      await this.reloadBalance(userId);
      return true;
    });
  }

  /**
   * Rewrites a cached balance from the ledger; the caller holds its hydration lock. No
   * redemption of the user runs while the key is missing, so once the user's journal
   * entries are persisted PostgreSQL holds them all.
   */
  private async reloadBalance(userId: string): Promise<number> {
    await this.store.dropBalance(userId);
    await this.deps.journal.trackStream(SHOP_JOURNAL, SHOP_JOURNAL_TRACKED_UNTIL);
    await this.deps.journal.commitStream(SHOP_JOURNAL, (entry) => entry.fields.user === userId);
    const nowMs = await redisTimeMs(this.deps.redis);
    const snapshot = await loadBalance(this.deps.prisma, userId, nowMs);
    await this.store.writeBalance(snapshot, nowMs);
    return snapshot.balance;
  }

  /** Rebuilds a goods item's keys; false if it does not exist. */
  private rebuildGoods(goodsId: string): Promise<boolean> {
    return hydrate(this.deps, goodsKeys(goodsId), async () => {
      await this.deps.journal.trackStream(SHOP_JOURNAL, SHOP_JOURNAL_TRACKED_UNTIL);
      await this.deps.journal.commitStream(SHOP_JOURNAL, (entry) => entry.fields.goods === goodsId);
      const snapshot = await loadGoods(this.deps.prisma, goodsId);
      if (!snapshot) return false;
      await this.store.writeGoods(snapshot);
      return true;
    });
  }
}
