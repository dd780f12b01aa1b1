import type { Config } from './config.ts';
import { LotteryService } from './domain/lottery/service.ts';
import { UserHistory } from './domain/me/history.ts';
import { WebhookRefundProvider } from './domain/money/refundDelivery.ts';
import { RefundService } from './domain/money/refundService.ts';
import { WalletService } from './domain/money/walletService.ts';
import { SignedNotifyProvider } from './domain/payments/provider.ts';
import { PaymentService } from './domain/payments/service.ts';
import { recheckBucketCount, settleBucketCount } from './domain/points/bucketCount.ts';
import { LogVoucherNotifier, WebhookVoucherNotifier } from './domain/points/notifiers.ts';
import { PointsService } from './domain/points/service.ts';
import { UserAliases } from './domain/privacy.ts';
import { RedPacketService } from './domain/redPackets/service.ts';
import { TeamService } from './domain/teams/service.ts';
import type { PrismaClient } from './generated/prisma/client.ts';
import type { RateLimits } from './guards/rateLimits.ts';
import { TokenVerifier } from './infra/auth/tokens.ts';
import { type Database, openDatabase } from './infra/db/database.ts';
import { applyMigrations } from './infra/db/migrations.ts';
import { Journal } from './infra/journal/journal.ts';
import type { Logger } from './infra/logger.ts';
import { RateLimiter } from './infra/rateLimit.ts';
import { type RedisClient, checkRedisServer, connectRedis, createRedis } from './infra/redis/connection.ts';
import { type PrefixClaim, claimKeyPrefix, databaseIdentity, recheckKeyPrefix } from './infra/redis/ownership.ts';
import { LiveEvents } from './infra/redis/pubsub.ts';
import { Scripts } from './infra/redis/scripts.ts';
import { ScriptClock } from './infra/redis/testClock.ts';
import { every } from './infra/ticker.ts';

/** Everything one instance holds: connections, the shared machinery and the domain services. */
export interface App {
  config: Config;
  log: Logger;
  db: Database;
  prisma: PrismaClient;
  redis: RedisClient;
  scripts: Scripts;
  journal: Journal;
  events: LiveEvents;
  rateLimits: RateLimits;
  tokens: TokenVerifier;
  /** What other users see instead of a user id (src/domain/privacy.ts). */
  userAliases: UserAliases;
  redPackets: RedPacketService;
  points: PointsService;
  teams: TeamService;
  payments: PaymentService;
  lottery: LotteryService;
  /** What a user's own lists read (Me.pointsLedger, Me.redPacketsSent…). */
  history: UserHistory;
  wallets: WalletService;
  refunds: RefundService;
  /**
   * Aborted, with the reason as a message, when this instance must stop serving:
   * another database's instance claimed the Redis key prefix after Redis lost its data.
   */
  halted: AbortSignal;
  /** Redis and the database answer, and the key prefix is still this database's; migrations ran at start. */
  checkReady(): Promise<{ redis: boolean; database: boolean; keyPrefix: boolean }>;
  /** Stops background work, commits what the journal holds, closes connections. */
  close(): Promise<void>;
}

/** TEST_HANG_AFTER_DRAW_RESERVATIONS (config.ts): the first `count` calls go on, every later one never does. */
function hangAfter(count: number | undefined): (() => Promise<void>) | undefined {
  if (count === undefined) return undefined;
  let calls = 0;
  return () => (++calls > count ? new Promise<void>(() => {}) : Promise.resolve());
}

/**
 * How long /ready waits for each store: a hung Redis or a saturated pool answers 503 at once,
 * rather than after the command or pool timeout (a probe gives up sooner, and sees no cause).
 */
const READY_PING_TIMEOUT_MS = 1_500;

/** True when `ping` resolves within `ms`; false when it fails or takes longer. */
async function answersWithin(ms: number, ping: Promise<unknown>): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([
      ping.then(
        () => true,
        () => false,
      ),
      late,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

export async function createApp(config: Config, log: Logger): Promise<App> {
  const redisOptions = {
    url: config.REDIS_URL,
    keyPrefix: config.REDIS_KEY_PREFIX,
    clusterNodes: config.REDIS_CLUSTER_NODES,
    connectTimeoutMs: config.REDIS_CONNECT_TIMEOUT_MS,
    commandTimeoutMs: config.REDIS_COMMAND_TIMEOUT_MS,
  };
  const redis = createRedis(redisOptions, 'commands');
  const scripts = new Scripts(redis);
  await connectRedis(redis, redisOptions);
  const publisher = createRedis(redisOptions, 'publisher');
  const subscriber = createRedis(redisOptions, 'subscriber', { subscriber: true });
  let db: Database | undefined;
  let claim: PrefixClaim;
  try {
    await checkRedisServer(redis, log);
    await Promise.all([connectRedis(publisher, redisOptions), connectRedis(subscriber, redisOptions)]);
    db = await openDatabase(config);
    const { createdNow } = await applyMigrations(db, log);
    claim = { redis, scripts, keyPrefix: config.REDIS_KEY_PREFIX, databaseId: await databaseIdentity(db.prisma, db.kind), log };
    await claimKeyPrefix({ ...claim, mayTakeOver: createdNow && db.kind === 'pglite' });
    await settleBucketCount({ redis, prisma: db.prisma, log }, config.POINTS_SHOP_BUCKETS);
  } catch (error) {
    for (const connection of [redis, publisher, subscriber]) connection.disconnect();
    await db?.close();
    throw error;
  }
  const database = db;

  const journal = new Journal(redis, scripts, database, log, {
    batchMax: config.JOURNAL_BATCH_MAX,
    batchWaitMs: config.JOURNAL_BATCH_WAIT_MS,
    maxInFlight: config.JOURNAL_MAX_INFLIGHT,
    sweepAfterMs: config.JOURNAL_SWEEP_AFTER_MS,
  });
  const events = new LiveEvents(publisher, subscriber, config.REDIS_KEY_PREFIX, log);
  const rateLimits: RateLimits = {
    mutations: new RateLimiter(scripts, config.RATE_LIMIT_MUTATIONS, config.RATE_LIMIT_WINDOW_MS),
    anonymous: new RateLimiter(scripts, config.RATE_LIMIT_ANONYMOUS, config.RATE_LIMIT_WINDOW_MS),
    cost: new RateLimiter(scripts, config.RATE_LIMIT_COST, config.RATE_LIMIT_WINDOW_MS),
    wsConnections: new RateLimiter(scripts, config.RATE_LIMIT_WS_CONNECTIONS, config.RATE_LIMIT_WINDOW_MS),
  };
  const lockTtlMs = config.TEST_LOCK_TTL_MS;
  const redPackets = new RedPacketService({ prisma: database.prisma, redis, scripts, journal, events, log, lockTtlMs });
  const points = new PointsService({
    prisma: database.prisma,
    redis,
    scripts,
    journal,
    events,
    log,
    lockTtlMs,
    notifier: config.POINTS_DELIVERY_WEBHOOK_URL
      ? new WebhookVoucherNotifier(config.POINTS_DELIVERY_WEBHOOK_URL, config.POINTS_DELIVERY_WEBHOOK_SECRET!, config.POINTS_DELIVERY_TIMEOUT_MS)
      : new LogVoucherNotifier(database.prisma, events, log),
    // The lease outlasts a notifier call (its timeout) with room to record the outcome.
    delivery: { leaseMs: 3 * config.POINTS_DELIVERY_TIMEOUT_MS, retryBaseMs: config.POINTS_DELIVERY_RETRY_MS },
    drawPayments: { releaseAfterMs: config.DRAW_RESERVATION_TIMEOUT_MS },
    buckets: config.POINTS_SHOP_BUCKETS,
    afterStockTake: hangAfter(config.TEST_HANG_AFTER_STOCK_TAKES),
  });
  const teams = new TeamService({ prisma: database.prisma, redis, scripts, journal, events, log, lockTtlMs });
  const payments = new PaymentService({
    prisma: database.prisma,
    query: (sql) => database.query(sql),
    log,
    teams,
    provider: new SignedNotifyProvider(config.paymentWebhookSecret),
    sandboxSecret: config.sandboxPayments ? config.paymentWebhookSecret : null,
  });
  const clock = new ScriptClock(redis, config.TEST_CLOCK === '1');
  const wallets = new WalletService(database.prisma, log);
  const refunds = new RefundService(
    database.prisma,
    config.REFUND_WEBHOOK_URL ? new WebhookRefundProvider(config.REFUND_WEBHOOK_URL, config.REFUND_WEBHOOK_SECRET!, config.REFUND_WEBHOOK_TIMEOUT_MS) : null,
    // The lease outlasts a webhook call (its timeout) with room to record the outcome.
    { leaseMs: 3 * config.REFUND_WEBHOOK_TIMEOUT_MS, retryBaseMs: config.REFUND_RETRY_MS },
    log,
  );
  const lottery = new LotteryService({
    prisma: database.prisma,
    redis,
    scripts,
    journal,
    events,
    clock,
    log,
    lockTtlMs,
    payments: points.draws,
    scheduleIntervalMs: config.LOTTERY_SCHEDULE_INTERVAL_MS,
    afterReservation: hangAfter(config.TEST_HANG_AFTER_DRAW_RESERVATIONS),
  });

  const halt = new AbortController();
  const stopBackgroundTasks = [
    every(
      config.SWEEP_INTERVAL_MS,
      'key prefix claim',
      async () => {
        const reason = (await recheckKeyPrefix(claim)) ?? (await recheckBucketCount(redis, config.POINTS_SHOP_BUCKETS));
        if (reason) halt.abort(reason);
      },
      log,
    ),
    every(config.SWEEP_INTERVAL_MS, 'journal sweep', () => journal.sweep(), log),
    every(config.SWEEP_INTERVAL_MS, 'red packet refunds', () => redPackets.refundExpired(), log),
    every(config.SWEEP_INTERVAL_MS, 'stock transfers', () => points.mendTransfers(), log),
    every(config.SWEEP_INTERVAL_MS, 'voucher delivery', (stopping) => points.deliverDue(stopping), log),
    every(config.SWEEP_INTERVAL_MS, 'refund delivery', (stopping) => refunds.deliverDue(stopping), log),
    every(config.TEAM_SWEEP_INTERVAL_MS, 'team seat expiry', () => teams.expireDueLocks(), log),
    every(config.SWEEP_INTERVAL_MS, 'team deadlines', () => teams.failOverdue(), log),
    every(config.LOTTERY_SCHEDULE_INTERVAL_MS, 'lottery release schedule', () => lottery.scheduleDue(), log),
    every(config.SWEEP_INTERVAL_MS, 'draw payments', () => lottery.sweepPayments(), log),
  ];
  // Sweeping, settling or delivering on keys another database shares would carry its state into this one.
  halt.signal.addEventListener('abort', () => stopBackgroundTasks.forEach((stop) => void stop()), { once: true });

  return {
    config,
    log,
    db: database,
    prisma: database.prisma,
    redis,
    scripts,
    journal,
    events,
    rateLimits,
    tokens: new TokenVerifier({
      secret: config.jwtSecret,
      jwksUrl: config.JWT_JWKS_URL,
      issuer: config.JWT_ISSUER,
      audience: config.JWT_AUDIENCE,
      maxLifetimeSeconds: config.JWT_MAX_LIFETIME_SECONDS,
    }),
    userAliases: new UserAliases(config.userAliasSecret),
    redPackets,
    points,
    teams,
    payments,
    lottery,
    history: new UserHistory(database.prisma),
    wallets,
    refunds,
    halted: halt.signal,
    async checkReady() {
      const [redisUp, databaseUp] = await Promise.all([answersWithin(READY_PING_TIMEOUT_MS, redis.ping()), answersWithin(READY_PING_TIMEOUT_MS, database.ping())]);
      return { redis: redisUp, database: databaseUp, keyPrefix: !halt.signal.aborted };
    },
    async close() {
      await Promise.all(stopBackgroundTasks.map((stop) => stop()));
      await journal.drain();
      await points.stopDelivery();
      // Closing the pub/sub also quits its two connections.
      await events.close();
      await redis.quit().catch(() => undefined);
      await database.close();
    },
  };
}
