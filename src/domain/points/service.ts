import { randomUUID } from 'node:crypto';
import type { Goods, Prisma, Redemption, RedemptionStatus } from '../../generated/prisma/client.ts';
import { ruleInputIssue } from '../../i18n/issues.ts';
import { Campaign } from '../../infra/campaign/campaign.ts';
import type { OutboxBacklog } from '../../infra/outbox/outbox.ts';
import { redisTimeMs } from '../../infra/redis/time.ts';
import type { CampaignDeps } from '../deps.ts';
import { BadInputError, ServiceUnavailableError } from '../errors.ts';
import { type OperatorRequest, createOncePerRequest, operatorRequestOf } from '../operatorRequests.ts';
import { NotFound } from '../problems.ts';
import { allBuckets } from './buckets.ts';
import { type DeliveryOptions, VoucherDeliveryWorker } from './deliveryWorker.ts';
import { type DrawPaymentOptions, DrawPayments } from './drawPayments.ts';
import type { CreateGoodsInput, RestockGoodsInput, UpdateGoodsInput } from './input.ts';
import type { VoucherNotifier } from './notifiers.ts';
import { type Award, insertGoods, loadBalance, loadGoods, raiseSaleEnd, recordAward, recordGoodsChange, recordRestock } from './persistence.ts';
import { GoodsOffSale, InsufficientPoints, OutOfStock, PerUserLimitReached } from './problems.ts';
import { pendingRedemption, redemptionJournalKind, refusalJournalKind, requestOf } from './redemptions.ts';
import { StockTransfers } from './stockTransfers.ts';
import { type BalanceSnapshot, type GoodsShard, type GoodsSnapshot, PointsStore, type RedeemAnswer, answerKey, goodsKeys, parseAnswer } from './store.ts';

/** A redemption as its watchers get it: published as is, so its dates may arrive as ISO text. */
export type RedemptionState = Redemption & { version: number };

function redemptionTopic(redemptionId: string): string {
  return `redemption:${redemptionId}`;
}

/** A requestId names one redemption: reused for another goods item, it is the client's mistake, not a retry. */
const requestIdOfAnotherItem = (requestId: string) => BadInputError.of([ruleInputIssue(['requestId'], 'REQUEST_ID_OF_ANOTHER_ITEM', { requestId })]);

export class RedemptionNotConfirmedError extends ServiceUnavailableError {}

export interface PointsDeps extends Omit<CampaignDeps, 'random'> {
  notifier: VoucherNotifier;
  delivery: DeliveryOptions;
  drawPayments: DrawPaymentOptions;
  /** POINTS_SHOP_BUCKETS. */
  buckets: number;
  /** Tests only: runs between a stock transfer's committed take and its give. */
  afterStockTake?: () => Promise<void>;
}

/** The selection the Pothos Prisma plugin plans for a field; services pass it to Prisma. */
type RedemptionQuery = { include?: Prisma.RedemptionInclude; select?: Prisma.RedemptionSelect };

/** A rebuilt balance and the Redis time its remembered answers are counted down from. */
type RebuiltBalance = BalanceSnapshot & { nowMs: number };

/** The shop's journals are never retired: the sweeper watches them for good. */
const SHOP_JOURNAL_TRACKED_UNTIL = Number.MAX_SAFE_INTEGER;

/**
 * How many times one redemption finds its bucket dry and moves stock to it before it
 * gives up with SERVICE_UNAVAILABLE (never OutOfStock while stock remains): each round
 * brings half of the fullest bucket, which the bucket's other users may take first.
 */
const REFILL_ROUNDS = 20;

/**
 * The points shop: two kinds of campaign, a user's balance and a goods item's share in a
 * bucket, whose scripts journal to their bucket's stream (see store.ts, buckets.ts). A
 * redemption changes one of each, in the user's bucket.
 */
export class PointsService {
  private readonly store: PointsStore;
  private readonly delivery: VoucherDeliveryWorker;
  private readonly balances: Campaign<string, RebuiltBalance>;
  private readonly goods: Campaign<GoodsShard, GoodsSnapshot>;
  private readonly transfers: StockTransfers;
  private readonly redemptions: ReturnType<typeof redemptionJournalKind>;
  /** Lottery draws paid in points: reservations, releases, prizes (drawPayments.ts). */
  readonly draws: DrawPayments;

  constructor(private readonly deps: PointsDeps) {
    this.store = new PointsStore(deps.redis, deps.scripts, deps.buckets);
    this.delivery = new VoucherDeliveryWorker(deps.prisma, deps.notifier, deps.delivery, deps.log, (ids) => {
      for (const id of ids) deps.events.publishLatest(redemptionTopic(id), () => this.redemptionState(id));
    });
    this.balances = new Campaign(deps, {
      name: 'points balance',
      keys: (userId) => this.store.balanceKeys(userId),
      load: async (userId) => {
        const nowMs = await redisTimeMs(deps.redis);
        return { ...(await loadBalance(deps.prisma, userId, nowMs)), nowMs };
      },
      write: (balance) => this.store.writeBalance(balance, balance.nowMs),
      retainUntilMs: () => SHOP_JOURNAL_TRACKED_UNTIL,
      ownsEntry: (userId, entry) => entry.fields.user === userId,
    });
    this.goods = new Campaign(deps, {
      name: 'goods item',
      keys: ({ goodsId, bucket }) => goodsKeys(goodsId, bucket),
      load: (shard) => loadGoods(deps.prisma, shard, deps.buckets),
      write: (goods) => this.store.writeGoods(goods),
      retainUntilMs: () => SHOP_JOURNAL_TRACKED_UNTIL,
      ownsEntry: ({ goodsId }, entry) => entry.fields.goods === goodsId,
    });
    this.transfers = new StockTransfers(deps, this.goods, this.store, deps.afterStockTake);
    // A redemption or refusal PostgreSQL turned down spent points, stock and a code in
    // Redis and remembered its answer: the balance, the goods item and the answer go.
    this.redemptions = redemptionJournalKind(this.delivery);
    for (const kind of [this.redemptions, refusalJournalKind]) {
      this.balances.persistsWith(kind, (entry) => [requestOf(entry).user], {
        alsoDrops: (entry) => {
          const { user, goods, request } = requestOf(entry);
          const bucket = this.store.bucketOf(user);
          return [goodsKeys(goods, bucket).meta, answerKey(user, request, bucket)];
        },
      });
    }
    this.draws = new DrawPayments(deps, this.balances, this.store, deps.drawPayments);
  }

  /**
   * Writes the award to the ledger in PostgreSQL, then to the cached balance. Returns
   * the new spendable balance. A repeated requestId changes nothing.
   */
  award(award: Award): Promise<number> {
    return this.balances.changeDurably(award.userId, async () => {
      const outcome = await recordAward(this.deps.prisma, award);
      const applied = outcome === 'applied' ? await this.store.applyAward(award.userId, award.amount) : null;
      // A replay cannot know whether the first call reached Redis (it may have died in
      // between), so it rebuilds the balance from the ledger, as an award Redis could not apply does.
      return applied ?? (await this.balances.rebuildLocked(award.userId))?.balance ?? 0;
    });
  }

  /** Creates the item with its stock dealt over the buckets, and writes its share in each. */
  /** Creates the item; with a requestId, once: a retry after a timeout gets the first item. */
  createGoods(createdBy: string, input: CreateGoodsInput): Promise<Goods> {
    const request = operatorRequestOf('goods', createdBy, input);
    return createOncePerRequest(
      this.deps.prisma,
      request,
      () => this.createGoodsOnce(createdBy, input, request),
      (goodsId) => this.deps.prisma.goods.findUniqueOrThrow({ where: { id: goodsId } }),
    );
  }

  private async createGoodsOnce(createdBy: string, input: CreateGoodsInput, request: OperatorRequest | null): Promise<Goods> {
    // Checked here, not in the schema: it depends on the clock. updateGoods may end a sale now.
    if (input.saleEndsAt && input.saleEndsAt.getTime() <= (await redisTimeMs(this.deps.redis))) {
      throw BadInputError.of([ruleInputIssue(['input', 'saleEndsAt'], 'SALE_ENDS_IN_THE_PAST')]);
    }
    const id = randomUUID();
    const { buckets } = this.store;
    const load = async (bucket: number) => (await loadGoods(this.deps.prisma, { goodsId: id, bucket }, buckets))!;
    let created: Goods | undefined;
    await this.goods.create({ goodsId: id, bucket: 0 }, async () => {
      created = await insertGoods(this.deps.prisma, id, createdBy, input, buckets, request);
      return load(0);
    });
    await Promise.all(
      allBuckets(buckets)
        .slice(1)
        .map((bucket) => this.goods.create({ goodsId: id, bucket }, () => load(bucket))),
    );
    return created!;
  }

  /**
   * Adds stock to the item: committed in PostgreSQL as units in flight to the buckets,
   * then given to each (a process that dies in between leaves them to the transfer
   * sweeper). The same requestId restocks once; a retry gives what is still in flight.
   */
  async restock(createdBy: string, input: RestockGoodsInput): Promise<Goods> {
    const outcome = await recordRestock(this.deps.prisma, randomUUID(), createdBy, input, this.store.buckets);
    if (!outcome) throw new NotFound('goods', input.goodsId);
    await this.transfers.giveRestocked(input.goodsId);
    return this.deps.prisma.goods.findUniqueOrThrow({ where: { id: input.goodsId } });
  }

  /**
   * Changes the item's title, price or sale: in PostgreSQL, then in every bucket's share,
   * each under its rebuild lock taken after the commit, with the terms read again under
   * it. A rebuild that read PostgreSQL before the commit still holds the lock then, so its
   * older copy is written first and overwritten; and of two changes racing, whichever
   * writes a bucket last writes the newest terms, not its own. The terms are written to
   * Redis even when nothing changed, so an operator's retry after a failure in between
   * puts them right; meanwhile PostgreSQL refuses redemptions at terms the item no longer
   * has (redemptions.ts).
   */
  async updateGoods(changedBy: string, goodsId: string, input: UpdateGoodsInput): Promise<Goods> {
    const goods = await recordGoodsChange(this.deps.prisma, randomUUID(), changedBy, goodsId, input, await redisTimeMs(this.deps.redis));
    if (!goods) throw new NotFound('goods', goodsId);
    const endsWritten = await Promise.all(
      allBuckets(this.store.buckets).map((bucket) =>
        this.goods.changeDurably({ goodsId, bucket }, async () => {
          const terms = await this.deps.prisma.goods.findUniqueOrThrow({ where: { id: goodsId }, select: { pointsCost: true, onSale: true, saleStartsAt: true, saleEndsAt: true } });
          return this.store.setGoodsTerms({ goodsId, bucket }, { ...terms, saleStartsAtMs: terms.saleStartsAt?.getTime() ?? null, saleEndsAtMs: terms.saleEndsAt?.getTime() ?? null });
        }),
      ),
    );
    // A bucket still selling ended the sale at its own time, after the end recorded: so no
    // redemption is dated after the end, the latest is recorded.
    const latestEndMs = Math.max(...endsWritten.map((endMs) => endMs ?? Number.NEGATIVE_INFINITY));
    if (goods.saleEndsAt && latestEndMs > goods.saleEndsAt.getTime()) return raiseSaleEnd(this.deps.prisma, goodsId, goods.saleEndsAt, new Date(latestEndMs));
    return goods;
  }

  /**
   * Spends the goods item's cost on one unit of it. Resolves once the redemption is
   * committed in PostgreSQL; the same requestId gets the same answer.
   */
  async redeem(userId: string, goodsId: string, requestId: string): Promise<Redemption> {
    const shard = { goodsId, bucket: this.store.bucketOf(userId) };
    // With several buckets a dry one first takes stock from the others; it refuses
    // OutOfStock only once they are all dry.
    let stockElsewhere = this.store.buckets > 1;
    for (let round = 1; ; round++) {
      const reply = await this.redeemInBucket(shard, userId, requestId, stockElsewhere);
      if (reply.kind !== 'dry') return reply.redemption;
      if (round > REFILL_ROUNDS) throw new RedemptionNotConfirmedError('stock is being moved to this shop bucket; try again');
      stockElsewhere = await this.transfers.refill(goodsId, shard.bucket);
    }
  }

  /** One redemption script call in the user's bucket: its redemption or problem, or 'dry' (with `dryReply`). */
  private async redeemInBucket(shard: GoodsShard, userId: string, requestId: string, dryReply: boolean): Promise<{ kind: 'dry' } | { kind: 'answer'; redemption: Redemption }> {
    const { goodsId } = shard;
    const reply = await this.goods.journaled(shard, {
      call: () => this.store.redeem(userId, goodsId, requestId, randomUUID(), dryReply),
      rebuild: async () => (await this.goods.rebuild(shard)) && this.balances.rebuild(userId),
      entryOf: (redemption) => (redemption.kind === 'redeemed' || redemption.kind === 'refused' ? redemption.entry : null),
      // PostgreSQL holds another answer for this requestId (given before Redis forgot it),
      // or refused what Redis allowed: the first answer stands, if there is one.
      onConflict: async () => {
        const first = await this.durableAnswer(userId, goodsId, requestId);
        return first ? { kind: 'durable' as const, redemption: first } : undefined;
      },
      unavailable: () => new RedemptionNotConfirmedError('the points shop is being rebuilt; try again'),
    });
    if (!reply) throw new NotFound('goods', goodsId);
    switch (reply.kind) {
      case 'dry':
        return { kind: 'dry' };
      case 'offSale': {
        // Before the sale opens, a crowd asks again and again: answered from Redis alone. A
        // first answer exists then only if an operator moved the start later after it.
        if (reply.opensAtMs > 0) throw new GoodsOffSale(new Date(reply.opensAtMs));
        // Redis forgot this requestId's answer (its TTL, a data loss): a retry gets the first one, not a refusal.
        const first = await this.durableAnswer(userId, goodsId, requestId);
        if (first) return { kind: 'answer', redemption: first };
        throw new GoodsOffSale(null, reply.endedAtMs > 0 ? new Date(reply.endedAtMs) : null);
      }
      case 'durable':
        return { kind: 'answer', redemption: reply.redemption };
      case 'redeemed':
        return { kind: 'answer', redemption: pendingRedemption(this.redemptions.decode(reply.entry)) };
      case 'answered':
        if (reply.goodsId !== undefined && reply.goodsId !== goodsId) throw requestIdOfAnotherItem(requestId);
        return { kind: 'answer', redemption: await this.answered(userId, goodsId, requestId, reply.answer) };
      case 'refused':
        return { kind: 'answer', redemption: await this.answered(userId, goodsId, requestId, reply.answer) };
    }
  }

  /** The spendable balance: Redis's, rebuilt from the ledger when missing. */
  async balance(userId: string): Promise<number> {
    return (await this.balances.read(userId, () => this.store.balance(userId))) ?? 0;
  }

  /** Live remaining stock, over every bucket; null when the goods item does not exist. */
  async remainingStock(goodsId: string): Promise<number | null> {
    const shares = await Promise.all(allBuckets(this.store.buckets).map((bucket) => this.goods.read({ goodsId, bucket }, () => this.store.remainingStock({ goodsId, bucket }))));
    return shares.some((share) => share === null) ? null : shares.reduce<number>((sum, share) => sum + share!, 0);
  }

  /** The sweeper's round: gives the stock transfers dead processes left in flight. */
  mendTransfers(): Promise<number> {
    return this.transfers.mend();
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

  /** A redemption the viewer may watch: their own, or any for an operator; null otherwise, as if it did not exist. */
  async visibleRedemption(redemptionId: string, viewer: { userId: string; operator: boolean }): Promise<Redemption | null> {
    const redemption = await this.deps.prisma.redemption.findUnique({ where: { id: redemptionId } });
    return redemption && (viewer.operator || redemption.userId === viewer.userId) ? redemption : null;
  }

  /**
   * The redemption now, then as its delivery moves (a failed attempt and its retry, the
   * delivery), across instances; completes once DELIVERED. Nothing is published before
   * someone watches, and a watcher reads the current state itself.
   */
  watchRedemption(redemptionId: string): AsyncIterableIterator<RedemptionState> {
    return this.deps.events.currentThenChanges(redemptionTopic(redemptionId), {
      load: () => this.redemptionState(redemptionId),
      versionOf: (state) => state.version,
      isFinal: (state) => state.status === 'DELIVERED',
    });
  }

  /**
   * A redemption with a version that grows with every move: four per attempt (a claim
   * counts one), plus one once that attempt failed, two once delivered. A handed-back
   * claim lowers it, but nothing was delivered then and the next claim raises it again.
   */
  private async redemptionState(redemptionId: string): Promise<RedemptionState | null> {
    const redemption = await this.deps.prisma.redemption.findUnique({ where: { id: redemptionId } });
    if (!redemption) return null;
    const move = redemption.status === 'DELIVERED' ? 2 : redemption.lastError === null ? 0 : 1;
    return { ...redemption, version: 4 * redemption.deliveryAttempts + move };
  }

  /** One round of the delivery worker over what is due (retries, and redemptions whose process died). */
  deliverDue(stopping?: AbortSignal): Promise<number> {
    return this.delivery.deliverDue(stopping);
  }

  /** The redemptions waiting for their voucher's delivery, for /metrics. */
  deliveryBacklog(): Promise<OutboxBacklog> {
    return this.delivery.backlog();
  }

  /** Call after the journal's last commit: fresh deliveries in hand finish, the rest go back to the due rounds. */
  stopDelivery(): Promise<void> {
    return this.delivery.stop();
  }

  private async answered(userId: string, goodsId: string, requestId: string, answer: RedeemAnswer): Promise<Redemption> {
    switch (answer.kind) {
      case 'outOfStock':
        throw new OutOfStock();
      case 'perUserLimit':
        throw new PerUserLimitReached(answer.limit);
      case 'insufficient':
        throw new InsufficientPoints(answer.balance, answer.cost);
      case 'redeemed':
        return this.durableRedemption(userId, goodsId, requestId, answer.entryId);
    }
  }

  /**
   * The redemption a retried requestId made. A concurrent first call may still be
   * committing it, so commit its journal entry too: a retry is answered only with what
   * PostgreSQL holds, as the first call is.
   */
  private async durableRedemption(userId: string, goodsId: string, requestId: string, entryId: string): Promise<Redemption> {
    // An entry still in the journal is committed here too; one that is gone was committed (or refused) already.
    const entry = entryId ? await this.store.journalEntry(userId, entryId) : null;
    if (entry) await this.deps.journal.commit(entry);
    const durable = await this.durableAnswer(userId, goodsId, requestId);
    if (durable) return durable;
    // Refused by PostgreSQL: the first call is rebuilding and trying again.
    throw new RedemptionNotConfirmedError('the first call with this requestId is still being confirmed; try again');
  }

  /**
   * What PostgreSQL holds for a requestId: its redemption, or its refusal thrown as the
   * problem; null for neither. BadInputError when it answered another goods item.
   */
  private async durableAnswer(userId: string, goodsId: string, requestId: string): Promise<Redemption | null> {
    const where = { userId_requestId: { userId, requestId } };
    const first = (await this.deps.prisma.redemption.findUnique({ where })) ?? (await this.deps.prisma.redemptionRefusal.findUnique({ where }));
    if (!first) return null;
    if (first.goodsId !== goodsId) throw requestIdOfAnotherItem(requestId);
    return 'answer' in first ? this.answered(userId, goodsId, requestId, parseAnswer(first.answer)) : first;
  }
}
