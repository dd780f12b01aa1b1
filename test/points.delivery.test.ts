import { createHmac } from 'node:crypto';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type App, createApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { type LeasedRedemption, VoucherDeliveryWorker, dueClaim } from '../src/domain/points/deliveryWorker.ts';
import { LogVoucherNotifier, VOUCHER_DELIVERED_TOPIC, type VoucherDelivery, type VoucherNotifier, WebhookVoucherNotifier } from '../src/domain/points/notifiers.ts';
import { createLogger } from '../src/infra/logger.ts';
import { RECORDED } from '../src/infra/outbox/outbox.ts';
import { TEST_JWT_SECRET, TEST_REDIS_URL, testEnv } from './support/env.ts';
import { stopAll } from './support/lifecycle.ts';
import { type PointsClient, pointsAt, voucherCodes } from './support/points.ts';
import { expectPointsInvariants } from './support/pointsInvariants.ts';
import { waitFor } from './support/poll.ts';
import { type ServerProcess, startServerProcess } from './support/server.ts';
import { type Stores, openStores } from './support/stores.ts';
import { WebhookReceiver } from './support/webhookReceiver.ts';

const RETRY_MS = 100;
const DELIVERY_SECRET = 'delivery-webhook-secret-of-at-least-32-chars';
const receiver = new WebhookReceiver<VoucherDelivery>();
// A short webhook timeout gives a short lease (3 × timeout): a dead worker's claim runs out in 3 s.
const webhookEnv = testEnv('points_webhook', { SWEEP_INTERVAL_MS: '100', POINTS_DELIVERY_TIMEOUT_MS: '1000', POINTS_DELIVERY_RETRY_MS: String(RETRY_MS) });
const noticeEnv = testEnv('points_notice', { SWEEP_INTERVAL_MS: '100' });
// No delivery round of its own: the test runs them.
const backlogEnv = testEnv('points_backlog', { SWEEP_INTERVAL_MS: '600000' });
// A long history of its own: the other tests here reset every redemption of their schema.
const historyEnv = testEnv('points_history', { SWEEP_INTERVAL_MS: '600000' });
// A longer webhook timeout than webhookEnv's: the hung first delivery holds the queue long
// enough to stop behind it. Its leases (3 × 2.5 s) outlast that stop plus an in-process
// instance's start by seconds, even on a loaded machine, so a delivery before they end shows
// the hand-back, not a lease running out.
const handBackEnv = testEnv('points_handback', { SWEEP_INTERVAL_MS: '100', POINTS_DELIVERY_TIMEOUT_MS: '2500', POINTS_DELIVERY_RETRY_MS: String(RETRY_MS) });
let webhookStores: Stores;
let noticeStores: Stores;
let backlogStores: Stores;
let handBackStores: Stores;
let historyStores: Stores;
const servers: ServerProcess[] = [];
const apps: App[] = [];

beforeAll(async () => {
  webhookEnv.vars.POINTS_DELIVERY_WEBHOOK_URL = await receiver.start('/vouchers');
  handBackEnv.vars.POINTS_DELIVERY_WEBHOOK_URL = webhookEnv.vars.POINTS_DELIVERY_WEBHOOK_URL;
  webhookEnv.vars.POINTS_DELIVERY_WEBHOOK_SECRET = DELIVERY_SECRET;
  handBackEnv.vars.POINTS_DELIVERY_WEBHOOK_SECRET = DELIVERY_SECRET;
  handBackStores = openStores(handBackEnv);
  webhookStores = openStores(webhookEnv);
  noticeStores = openStores(noticeEnv);
  backlogStores = openStores(backlogEnv);
  historyStores = openStores(historyEnv);
});

afterAll(async () => {
  for (const app of apps) await app.close().catch(() => undefined);
  await stopAll(...servers);
  await receiver.close();
  await webhookStores?.cleanup();
  await noticeStores?.cleanup();
  await backlogStores?.cleanup();
  await handBackStores?.cleanup();
  await historyStores?.cleanup();
});

async function start(vars: Record<string, string>): Promise<ServerProcess> {
  const server = await startServerProcess(vars);
  servers.push(server);
  return server;
}

/** Starts a server of `vars` the first time it is asked for, and hands out that one after. */
function sharedServer(vars: Record<string, string>): () => Promise<ServerProcess> {
  let server: Promise<ServerProcess> | undefined;
  return () => (server ??= start(vars));
}

// A server start is most of a test here. The first webhook server delivers the retried
// vouchers, then is the one that dies with deliveries in hand; backlogEnv's runs no delivery
// rounds, so the tests that only redeem through it need no fresh process each.
const firstWebhookServer = sharedServer(webhookEnv.vars);
const backlogServer = sharedServer(backlogEnv.vars);

async function statuses(stores: Stores, ids: string[]) {
  const { rows } = await stores.sql.query<{ id: string; status: string; delivery_attempts: number; delivered_at: Date | null; last_error: string | null }>(
    'SELECT id, status, delivery_attempts, delivered_at, last_error FROM redemption WHERE id = ANY($1)',
    [ids],
  );
  return new Map(rows.map((row) => [row.id, row]));
}

const allDelivered = (stores: Stores, ids: string[]) => async () => [...(await statuses(stores, ids)).values()].filter((row) => row.status === 'DELIVERED').length === ids.length;

/** Redeems one unit for each user, each awarded just enough; returns the redemptions. */
async function redeemFor(points: PointsClient, users: string[]) {
  const goods = await points.createGoods('operator', { title: 'voucher', pointsCost: 10, stock: users.length, voucherCodes: voucherCodes(`V${users[0]}`, users.length) });
  await Promise.all(users.map((user) => points.award('operator', { userId: user, amount: 10 })));
  const results = await Promise.all(users.map((user) => points.tryRedeem(user, goods.id, 'r')));
  return results.map(({ result }) => {
    if (result?.__typename !== 'Redemption') throw new Error(`expected a redemption: ${JSON.stringify(result)}`);
    expect(result.status).toBe('PENDING');
    return result;
  });
}

describe('a delivery webhook that fails', () => {
  it('is retried with growing delays until it succeeds, then the redemption is DELIVERED', async () => {
    const server = await firstWebhookServer();
    const points = pointsAt(server.url);
    receiver.answer = (_key, nth) => (nth <= 3 ? 'fail' : 'ok');
    const redemptions = await redeemFor(points, ['flaky-0', 'flaky-1', 'flaky-2']);
    const ids = redemptions.map((redemption) => redemption.id);
    await waitFor('every voucher to be delivered', allDelivered(webhookStores, ids), { timeoutMs: 15_000 });

    const rows = await statuses(webhookStores, ids);
    for (const redemption of redemptions) {
      const attempts = receiver.of(redemption.id);
      expect(attempts.map((attempt) => attempt.body.attempt)).toEqual([1, 2, 3, 4]);
      for (const { body, raw, headers } of attempts) {
        expect(body).toMatchObject({ idempotencyKey: redemption.id, userId: redemption.userId, voucherCode: redemption.voucherCode, pointsSpent: 10 });
        // Signed as a refund is: the fulfilment service can tell a delivery of ours from a forged one.
        const [, t, v1] = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(String(headers['delivery-signature']))!;
        expect(v1).toBe(createHmac('sha256', DELIVERY_SECRET).update(`${t}.${raw}`).digest('hex'));
      }
      // Backoff: RETRY_MS, then twice, then four times as long (with slack for a busy machine's timers).
      const gaps = attempts.slice(1).map((attempt, i) => attempt.atMs - attempts[i]!.atMs);
      for (const [i, gap] of gaps.entries()) expect(gap, `gap before attempt ${i + 2}`).toBeGreaterThanOrEqual(RETRY_MS * 2 ** i * 0.9);
      expect(rows.get(redemption.id)).toMatchObject({ status: 'DELIVERED', delivery_attempts: 4, last_error: null });
    }
    const me = await points.me('flaky-0');
    expect(me.redemptions).toEqual([expect.objectContaining({ id: ids[0], status: 'DELIVERED', deliveryAttempts: 4, deliveredAt: expect.any(String) })]);
    await expectPointsInvariants(webhookStores);
  });

  it('is not delivered again after a restart once it was marked DELIVERED; a delivery cut off by the crash is retried with the same key', async () => {
    const first = await firstWebhookServer();
    const points = pointsAt(first.url);
    receiver.answer = () => 'ok';
    const done = (
      await redeemFor(
        points,
        Array.from({ length: 20 }, (_, i) => `done-${i}`),
      )
    ).map((redemption) => redemption.id);
    await waitFor('the first vouchers to be delivered', allDelivered(webhookStores, done));

    // The next vouchers' first requests never get an answer: the server dies while it waits.
    receiver.answer = (_key, nth) => (nth === 1 ? 'hang' : 'ok');
    const cutOff = (
      await redeemFor(
        points,
        Array.from({ length: 10 }, (_, i) => `cut-${i}`),
      )
    ).map((redemption) => redemption.id);
    await waitFor('the next vouchers to be requested', () => cutOff.every((id) => receiver.of(id).length === 1));
    await first.kill();
    expect([...(await statuses(webhookStores, cutOff)).values()].map((row) => row.status)).toEqual(Array(10).fill('PENDING'));

    await start(webhookEnv.vars);
    await waitFor('the cut-off vouchers to be delivered after the restart', allDelivered(webhookStores, cutOff), { timeoutMs: 15_000 });
    // Marked DELIVERED before the crash: never requested again.
    for (const id of done) expect(receiver.of(id), id).toHaveLength(1);
    // Cut off by the crash: requested again once the dead worker's lease ran out, with the same key and voucher.
    for (const id of cutOff) {
      const attempts = receiver.of(id);
      expect(attempts).toHaveLength(2);
      expect(attempts[1]!.body).toEqual({ ...attempts[0]!.body, attempt: 2 });
    }
    await expectPointsInvariants(webhookStores);
  });
});

describe('the default notifier', () => {
  it('marks, logs and announces each voucher once, with two instances delivering', async () => {
    const subscriber = new Redis(TEST_REDIS_URL);
    const announced: VoucherDelivery[] = [];
    await subscriber.subscribe(`${noticeEnv.keyPrefix}${VOUCHER_DELIVERED_TOPIC}`);
    subscriber.on('message', (_channel, message: string) => announced.push(JSON.parse(message) as VoucherDelivery));
    try {
      const [a] = await Promise.all([start(noticeEnv.vars), start(noticeEnv.vars)]);
      const redemptions = await redeemFor(
        pointsAt(a!.url),
        Array.from({ length: 60 }, (_, i) => `notice-${i}`),
      );
      const ids = redemptions.map((redemption) => redemption.id);
      await waitFor('every voucher to be delivered', allDelivered(noticeStores, ids));
      await waitFor('every voucher to be announced', () => announced.length >= ids.length);

      expect(announced.map((delivery) => delivery.idempotencyKey).sort()).toEqual([...ids].sort());
      for (const row of (await statuses(noticeStores, ids)).values()) expect(row).toMatchObject({ delivery_attempts: 1, delivered_at: expect.any(Date), last_error: null });

      // A worker that died after the mark and before its outcome was recorded calls again,
      // concurrently with another: nothing is announced twice, and both calls count as done.
      const config = loadConfig({ ...noticeEnv.vars, REDIS_KEY_PREFIX: noticeEnv.keyPrefix, LOG_LEVEL: 'silent', SWEEP_INTERVAL_MS: '600000', JWT_SECRET: TEST_JWT_SECRET });
      const app = await createApp(config, createLogger(config.LOG_LEVEL));
      apps.push(app);
      const notifier = new LogVoucherNotifier(app.prisma, app.events, app.log);
      const again = announced[0]!;
      const outcomes = await Promise.all([
        notifier.deliver([
          { ...again, attempt: 2 },
          { ...again, attempt: 2 },
        ]),
        notifier.deliver([{ ...again, attempt: 2 }]),
      ]);
      expect(outcomes.flat()).toEqual(Array(3).fill({ status: 'fulfilled', value: RECORDED }));
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(announced).toHaveLength(ids.length);
      await expectPointsInvariants(noticeStores);
    } finally {
      subscriber.disconnect();
    }
  });
});

describe('a delivery worker told to stop', () => {
  it('finishes the batch in hand and leaves the rest of the backlog PENDING', async () => {
    const server = await backlogServer();
    const ids = (
      await redeemFor(
        pointsAt(server.url),
        Array.from({ length: 120 }, (_, i) => `backlog-${i}`),
      )
    ).map((redemption) => redemption.id);
    await waitFor('the fresh deliveries', allDelivered(backlogStores, ids));
    // A backlog, as a long fulfilment outage leaves one.
    await backlogStores.sql.query("UPDATE redemption SET status = 'PENDING', delivery_attempts = 0, locked_until = NULL, next_attempt_at = now(), delivered_at = NULL");
    const config = loadConfig({ ...backlogEnv.vars, LOG_LEVEL: 'silent', JWT_SECRET: TEST_JWT_SECRET });
    const app = await createApp(config, createLogger(config.LOG_LEVEL));
    apps.push(app);
    const worker = (notifier: VoucherNotifier) => new VoucherDeliveryWorker(app.prisma, notifier, { leaseMs: 30_000, retryBaseMs: 1_000 }, app.log);
    const accept = (deliveries: VoucherDelivery[]) => deliveries.map((): PromiseSettledResult<void> => ({ status: 'fulfilled', value: undefined }));

    const stopped = new AbortController();
    stopped.abort();
    expect(await worker({ deliver: async (deliveries) => accept(deliveries) }).deliverDue(stopped.signal)).toBe(0);

    const stopping = new AbortController();
    const stopDuringFirstBatch = async (deliveries: VoucherDelivery[]) => {
      stopping.abort();
      return accept(deliveries);
    };
    const attempted = await worker({ deliver: stopDuringFirstBatch }).deliverDue(stopping.signal);
    const rows = [...(await statuses(backlogStores, ids)).values()];
    expect(rows.filter((row) => row.status === 'DELIVERED')).toHaveLength(attempted);
    expect(attempted).toBeGreaterThan(0);
    expect(rows.filter((row) => row.status === 'PENDING' && row.delivery_attempts === 0)).toHaveLength(ids.length - attempted);
  });
});

describe('an instance that stops with fresh deliveries queued', () => {
  it('finishes the one in hand and hands the rest back, so another instance delivers them without waiting for the leases to run out', async () => {
    const config = loadConfig({ ...handBackEnv.vars, LOG_LEVEL: 'silent', JWT_SECRET: TEST_JWT_SECRET });
    const app = await createApp(config, createLogger(config.LOG_LEVEL));
    apps.push(app);
    const users = Array.from({ length: 6 }, (_, i) => `queued-${i}`);
    const goods = await app.points.createGoods('ops', { title: 'voucher', pointsCost: 10, stock: users.length, perUserLimit: 0, voucherCodes: voucherCodes('QUEUED', users.length) });
    for (const [i, user] of users.entries()) await app.points.award({ userId: user, amount: 10, reason: 'test', requestId: `queued-award-${i}` });
    // The first delivery gets no answer until its timeout; the next ones queue behind it, one commit each.
    receiver.answer = () => 'hang';
    const ids: string[] = [];
    for (const user of users) ids.push((await app.points.redeem(user, goods.id, 'r')).id);
    await waitFor('the first delivery to be requested', () => receiver.of(ids[0]!).length === 1);
    const queued = ids.slice(1);
    const { rows: leases } = await handBackStores.sql.query<{ locked_until: Date }>('SELECT locked_until FROM redemption WHERE id = ANY($1)', [queued]);
    const firstLeaseEndMs = Math.min(...leases.map((row) => row.locked_until.getTime()));

    await app.close();
    const { rows } = await handBackStores.sql.query<{ id: string; status: string; delivery_attempts: number; locked_until: Date | null }>(
      'SELECT id, status, delivery_attempts, locked_until FROM redemption WHERE id = ANY($1)',
      [queued],
    );
    expect(rows).toHaveLength(queued.length);
    for (const row of rows) {
      expect(receiver.of(row.id), row.id).toHaveLength(0);
      expect(row).toMatchObject({ status: 'PENDING', delivery_attempts: 0, locked_until: null });
    }

    // Another instance takes them at once, as first attempts, before their leases would have run
    // out. In process: a server process's start can take most of a lease on a loaded machine.
    receiver.answer = () => 'ok';
    apps.push(await createApp(config, createLogger(config.LOG_LEVEL)));
    await waitFor('the handed-back vouchers to be delivered', allDelivered(handBackStores, queued), { timeoutMs: 15_000 });
    for (const id of queued) {
      const [request] = receiver.of(id);
      expect(request!.body.attempt).toBe(1);
      expect(request!.atMs, id).toBeLessThan(firstLeaseEndMs);
    }
    await expectPointsInvariants(handBackStores);
  });
});

describe('a delivery that fails after its lease ran out', () => {
  it('leaves the retry to the worker that holds the lease now', async () => {
    const server = await backlogServer();
    const [id] = (await redeemFor(pointsAt(server.url), ['late-0'])).map((redemption) => redemption.id);
    await waitFor('the fresh delivery', allDelivered(backlogStores, [id!]));
    await backlogStores.sql.query("UPDATE redemption SET status = 'PENDING', delivery_attempts = 0, locked_until = NULL, next_attempt_at = now(), delivered_at = NULL WHERE id = $1", [id]);
    const config = loadConfig({ ...backlogEnv.vars, LOG_LEVEL: 'silent', JWT_SECRET: TEST_JWT_SECRET });
    const app = await createApp(config, createLogger(config.LOG_LEVEL));
    apps.push(app);
    const othersLease = new Date(Date.now() + 60_000);
    // The call outlasts the lease and another worker claims the redemption meanwhile.
    const slowAndFailing: VoucherNotifier = {
      async deliver(deliveries) {
        await backlogStores.sql.query('UPDATE redemption SET locked_until = $2, delivery_attempts = 2 WHERE id = $1', [id, othersLease]);
        return deliveries.map((): PromiseSettledResult<void> => ({ status: 'rejected', reason: new Error('timed out') }));
      },
    };
    const attempted = await new VoucherDeliveryWorker(app.prisma, slowAndFailing, { leaseMs: 30_000, retryBaseMs: 1_000 }, app.log).deliverDue();
    expect(attempted).toBeGreaterThanOrEqual(1);
    const {
      rows: [row],
    } = await backlogStores.sql.query<{ locked_until: Date; last_error: string | null; status: string }>('SELECT locked_until, last_error, status FROM redemption WHERE id = $1', [id]);
    expect(row).toEqual({ locked_until: othersLease, last_error: null, status: 'PENDING' });
  });
});

describe('a delivery that fails with an error quoting its URL', () => {
  it('stores and logs the error without the credentials or the query string of the URL', async () => {
    const server = await backlogServer();
    const [id] = (await redeemFor(pointsAt(server.url), ['quoted-0'])).map((redemption) => redemption.id);
    await waitFor('the fresh delivery', allDelivered(backlogStores, [id!]));
    await backlogStores.sql.query("UPDATE redemption SET status = 'PENDING', delivery_attempts = 0, locked_until = NULL, next_attempt_at = now(), delivered_at = NULL WHERE id = $1", [id]);
    const config = loadConfig({ ...backlogEnv.vars, LOG_LEVEL: 'silent', JWT_SECRET: TEST_JWT_SECRET });
    const app = await createApp(config, createLogger(config.LOG_LEVEL));
    apps.push(app);
    const lines: string[] = [];
    const log = pino({ level: 'info' }, { write: (line: string) => lines.push(line) });
    // Configuration refuses such a URL (test/startup.test.ts); fetch would quote it whole in its error.
    const notifier = new WebhookVoucherNotifier('http://hookuser:hookpass@127.0.0.1:9/vouchers?key=SECRETQUERY', DELIVERY_SECRET, 1_000);
    expect(await new VoucherDeliveryWorker(app.prisma, notifier, { leaseMs: 30_000, retryBaseMs: 60_000 }, log).deliverDue()).toBeGreaterThanOrEqual(1);

    const row = (await statuses(backlogStores, [id!])).get(id!)!;
    expect(lines.join('\n')).toContain('voucher delivery failed; will retry');
    for (const text of [row.last_error, ...lines]) expect(text).not.toMatch(/hookuser|hookpass|SECRETQUERY/);
    // What an operator reads as lastError still says what failed, and where.
    expect(row).toMatchObject({ status: 'PENDING', last_error: expect.stringMatching(/^the delivery webhook could not be reached: .*http:\/\/127\.0\.0\.1:9\/vouchers/) });
  });
});

/**
 * Three redemptions as the commit inserts them (ids `<prefix>-0` … `-2`): a first attempt
 * under a lease of `leaseMs`, for a worker the test builds on an instance without delivery rounds.
 */
async function freshlyInserted(prefix: string, leaseMs: number) {
  const config = loadConfig({ ...backlogEnv.vars, LOG_LEVEL: 'silent', JWT_SECRET: TEST_JWT_SECRET });
  const app = await createApp(config, createLogger(config.LOG_LEVEL));
  apps.push(app);
  const codes = voucherCodes(prefix.toUpperCase(), 3);
  const goods = await app.points.createGoods('ops', { title: 'voucher', pointsCost: 10, stock: codes.length, perUserLimit: 0, voucherCodes: codes });
  const { rows: leased } = await backlogStores.sql.query<LeasedRedemption>(
    `INSERT INTO redemption (id, user_id, goods_id, request_id, points_spent, voucher_code, created_at, next_attempt_at, delivery_attempts, locked_until)
     SELECT $1 || '-' || i, $1 || '-user-' || i, $2, 'r', 10, ($3::text[])[i + 1], now(), now() + $4 * interval '1 millisecond', 1, now() + $4 * interval '1 millisecond'
     FROM generate_series(0, 2) AS i
     RETURNING id, user_id, goods_id, voucher_code, points_spent, delivery_attempts, locked_until`,
    [prefix, goods.id, codes, leaseMs],
  );
  return { app, leased };
}

describe('a fresh delivery that waited half its lease in the queue', () => {
  it('is handed back to the due rounds instead of being started', async () => {
    const leaseMs = 400;
    const { app, leased } = await freshlyInserted('half', leaseMs);
    const called: string[] = [];
    // The first call takes longer than half the lease.
    const slowFirst: VoucherNotifier = {
      async deliver(deliveries) {
        called.push(...deliveries.map((delivery) => delivery.idempotencyKey));
        await new Promise((resolve) => setTimeout(resolve, (leaseMs * 3) / 4));
        return deliveries.map((): PromiseSettledResult<void> => ({ status: 'fulfilled', value: undefined }));
      },
    };
    const worker = new VoucherDeliveryWorker(app.prisma, slowFirst, { leaseMs, retryBaseMs: 1_000 }, app.log);
    worker.deliverFresh(leased.slice(0, 1));
    worker.deliverFresh(leased.slice(1));
    await waitFor('the queued deliveries to be handed back', async () => {
      const { rows } = await backlogStores.sql.query('SELECT 1 FROM redemption WHERE id = ANY($1) AND locked_until IS NULL', [['half-1', 'half-2']]);
      return rows.length === 2;
    });
    await worker.stop();

    expect(called).toEqual(['half-0']);
    const rows = await statuses(
      backlogStores,
      leased.map((row) => row.id),
    );
    expect(rows.get('half-0')).toMatchObject({ status: 'DELIVERED', delivery_attempts: 1 });
    for (const id of ['half-1', 'half-2']) expect(rows.get(id), id).toMatchObject({ status: 'PENDING', delivery_attempts: 0 });
  });
});

describe('fresh deliveries beyond the backlog limit', () => {
  it('are handed back at once while the ones within it wait their turn', async () => {
    const { app, leased } = await freshlyInserted('over', 30_000);
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const called: string[] = [];
    const heldUntilReleased: VoucherNotifier = {
      async deliver(deliveries) {
        called.push(...deliveries.map((delivery) => delivery.idempotencyKey));
        await released;
        return deliveries.map((): PromiseSettledResult<void> => ({ status: 'fulfilled', value: undefined }));
      },
    };
    const worker = new VoucherDeliveryWorker(app.prisma, heldUntilReleased, { leaseMs: 30_000, retryBaseMs: 1_000, freshBacklogMax: 1 }, app.log);
    worker.deliverFresh([leased[0]!]); // in hand
    worker.deliverFresh([leased[1]!]); // waits: the backlog holds one
    worker.deliverFresh([leased[2]!]); // overflows
    await waitFor('the overflow to be handed back', async () => {
      const { rows } = await backlogStores.sql.query("SELECT 1 FROM redemption WHERE id = 'over-2' AND locked_until IS NULL AND delivery_attempts = 0");
      return rows.length === 1;
    });
    release();
    await waitFor('the rest to be delivered', allDelivered(backlogStores, ['over-0', 'over-1']));
    await worker.stop();
    expect(called).toEqual(['over-0', 'over-1']);
    expect((await statuses(backlogStores, ['over-2'])).get('over-2')).toMatchObject({ status: 'PENDING', delivery_attempts: 0 });
  });
});

describe('the due claim of every delivery round', () => {
  it('reads only the PENDING redemptions through redemption_due_idx, however long the history', async () => {
    const config = loadConfig({ ...historyEnv.vars, LOG_LEVEL: 'silent', JWT_SECRET: TEST_JWT_SECRET });
    const app = await createApp(config, createLogger(config.LOG_LEVEL));
    apps.push(app);
    const goods = await app.points.createGoods('ops', { title: 'badge', pointsCost: 10, stock: 100_000, perUserLimit: 0 });
    await app.close();
    // A shop some months in: everything delivered but a few retries.
    await historyStores.sql.query(
      `INSERT INTO redemption (id, user_id, goods_id, request_id, points_spent, stock_unit, status, created_at, next_attempt_at, delivered_at)
       SELECT 'history-' || i, 'user-' || i, $1, 'r', 10, i, CASE WHEN i % 10000 = 0 THEN 'PENDING' ELSE 'DELIVERED' END::"RedemptionStatus",
              now() - interval '1 day', now() - interval '1 day', CASE WHEN i % 10000 = 0 THEN NULL ELSE now() - interval '1 day' END
       FROM generate_series(0, 49999) AS i`,
      [goods.id],
    );
    await historyStores.sql.query('ANALYZE redemption');

    const claim = dueClaim(30_000);
    const { rows } = await historyStores.sql.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${claim.text}`, claim.values);
    const plan = rows.map((row) => row['QUERY PLAN']).join('\n');
    expect(plan).toContain('redemption_due_idx');
    expect(plan).not.toMatch(/Seq Scan on redemption\b/);
  });
});
