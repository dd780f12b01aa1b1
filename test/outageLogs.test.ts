import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.ts';
import { oweRefunds } from '../src/domain/money/refunds.ts';
import { groupBy } from '../src/infra/collections.ts';
import { openDatabase } from '../src/infra/db/database.ts';
import { startCuttableProxy, throughProxy } from './support/cuttableProxy.ts';
import { TEST_DATABASE_URL, type TestEnv, testEnv } from './support/env.ts';
import { type Outcome, grabOnce } from './support/outageStorms.ts';
import { pointsAt, voucherCodes } from './support/points.ts';
import { sleep, waitFor } from './support/poll.ts';
import { startThrowawayRedis, stopChild } from './support/redisServer.ts';
import { redPacketsAt } from './support/redPackets.ts';
import { type ServerProcess, freePort, startServerProcess } from './support/server.ts';
import { type Stores, openStores } from './support/stores.ts';
import { signAhead } from './support/tokens.ts';
import { WebhookReceiver } from './support/webhookReceiver.ts';

/*
 * A store or a webhook that is down fails every request, batch, row and tick alike: each
 * line that repeats is written once, with its error, then at most once per window
 * (REPEATED_LINE_WINDOW_MS, 10 s) with `skipped`. Each outage here lasts well under two
 * windows, so two lines of a message at most.
 */
const AT_MOST = 2;

const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
});

async function start(env: TestEnv): Promise<{ server: ServerProcess; stores: Stores }> {
  const stores = openStores(env);
  // Some tests take their Redis away; its client reconnects.
  stores.redis.on('error', () => undefined);
  cleanups.push(() => stores.cleanup());
  const server = await startServerProcess(env.vars);
  cleanups.push(() => server.stop());
  return { server, stores };
}

/** The server's pino lines with message `msg`, parsed. */
function linesOf(server: ServerProcess, msg: string): Record<string, unknown>[] {
  return server
    .output()
    .split('\n')
    .filter((line) => line.startsWith('{') && line.includes(`"msg":"${msg}"`))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

/** The first line of a run: written at once, with the error that tells the cause. */
const firstOfRun = (level: number) => ({ level, skipped: 0, err: expect.objectContaining({ message: expect.any(String), stack: expect.any(String) }) });

const unavailable = (outcomes: Outcome[]) => outcomes.filter((outcome) => outcome.codes?.includes('SERVICE_UNAVAILABLE'));

const WEBHOOK_SECRET = 'outage-logs-webhook-secret-of-32-chars-at-least';

/** `act` on every item, `wave` at a time. */
async function inWaves<T, R>(items: T[], wave: number, act: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = [];
  for (let first = 0; first < items.length; first += wave) results.push(...(await Promise.all(items.slice(first, first + wave).map(act))));
  return results;
}

describe('Redis gone', () => {
  it('logs the rate limiter that cannot count once per window, not once per request', async () => {
    const redisPort = await freePort();
    let redis: ChildProcess = await startThrowawayRedis(redisPort, []);
    cleanups.push(() => stopChild(redis));
    const env = testEnv('outage_logs_redis', { REDIS_URL: `redis://127.0.0.1:${redisPort}`, RATE_LIMIT_MUTATIONS: '1000' });
    const { server } = await start(env);
    const users = Array.from({ length: 60 }, (_, i) => `counted-${i}`);
    await signAhead(users);

    redis.kill('SIGKILL');
    await new Promise((resolve) => redis.once('exit', resolve));
    const redPackets = redPacketsAt(server.url);
    const outcomes = await Promise.all(users.map((user) => grabOnce(redPackets, randomUUID(), user)));
    expect(unavailable(outcomes)).toHaveLength(users.length);

    const lines = linesOf(server, 'cannot count a request against its rate limit');
    expect(lines.length).toBeGreaterThanOrEqual(1);
    expect(lines.length).toBeLessThanOrEqual(AT_MOST);
    expect(lines[0]).toMatchObject(firstOfRun(40));
    // Back, so the server stops cleanly and the keys can be cleaned up.
    redis = await startThrowawayRedis(redisPort, []);
  }, 60_000);
});

describe('PostgreSQL unreachable', () => {
  it('logs failed group commits and background tasks once per window each, however many batches and ticks fail', async () => {
    const proxy = await startCuttableProxy(new URL(TEST_DATABASE_URL));
    cleanups.push(() => proxy.close());
    // Sweeps every 100 ms: each PostgreSQL task fails ten times a second.
    const env = testEnv('outage_logs_pg', { JOURNAL_SWEEP_AFTER_MS: '500', SWEEP_INTERVAL_MS: '100', TEAM_SWEEP_INTERVAL_MS: '100' });
    env.vars.DATABASE_URL = throughProxy(env.vars.DATABASE_URL!, proxy.port);
    const { server, stores } = await start(env);
    const redPackets = redPacketsAt(server.url);
    const packet = await redPackets.create('outage-logs-sender', { totalAmount: 100_000, count: 1000 });
    const users = Array.from({ length: 300 }, (_, i) => `grabber-${i}`);
    await signAhead(users);

    await proxy.cut();
    const outcomes: Outcome[] = [];
    for (let first = 0; first < users.length; first += 30) {
      outcomes.push(...(await Promise.all(users.slice(first, first + 30).map((user) => grabOnce(redPackets, packet.id, user)))));
    }
    // The sweepers tick on against the outage.
    await sleep(2_000);
    const commitLines = ['group commit failed', 'journal entry could not be committed; it stays in its stream'].map((msg) => linesOf(server, msg));
    const taskLines = linesOf(server, 'background task failed');
    await proxy.restore();

    expect(unavailable(outcomes).length).toBeGreaterThan(100);
    expect(commitLines.flat().length).toBeGreaterThanOrEqual(1);
    for (const lines of commitLines) {
      expect(lines.length).toBeLessThanOrEqual(AT_MOST);
      if (lines.length > 0) expect(lines[0]).toMatchObject(firstOfRun(50));
    }
    const tasks = groupBy(taskLines, (line) => String(line.task));
    expect(tasks.size, [...tasks.keys()].join(', ')).toBeGreaterThanOrEqual(3);
    for (const [task, lines] of tasks) {
      expect(lines.length, task).toBeLessThanOrEqual(AT_MOST);
      expect(lines[0], task).toMatchObject(firstOfRun(50));
    }
    await waitFor('the journal to drain', async () => (await stores.redis.xlen(`{rp:${packet.id}}:journal`)) === 0, { timeoutMs: 20_000 });
  }, 90_000);
});

describe('PostgreSQL unreachable while fresh vouchers are delivered', () => {
  // The fulfilment service takes the vouchers; what fails is recording the outcome: marking them
  // delivered (it answered 200), or scheduling their retries (it answered 503).
  it.each([
    { answer: 'ok', msg: 'fresh voucher delivery failed', level: 50 },
    { answer: 'fail', msg: 'could not schedule voucher delivery retries', level: 40 },
  ] as const)(
    'logs $msg once per window, not once per batch',
    async ({ answer, msg, level }) => {
      const proxy = await startCuttableProxy(new URL(TEST_DATABASE_URL));
      cleanups.push(() => proxy.close());
      const fulfilment = new WebhookReceiver<unknown>();
      cleanups.push(() => fulfilment.close());
      // Its first call is held while the other redemptions are persisted and queue behind it.
      fulfilment.answer = () => 'hang';
      const env = testEnv(`outage_logs_fresh_${answer}`, {
        POINTS_DELIVERY_WEBHOOK_URL: await fulfilment.start('/vouchers'),
        POINTS_DELIVERY_WEBHOOK_SECRET: WEBHOOK_SECRET,
        // The held call must not time out, nor its lease run out.
        POINTS_DELIVERY_TIMEOUT_MS: '60000',
      });
      env.vars.DATABASE_URL = throughProxy(env.vars.DATABASE_URL!, proxy.port);
      const { server } = await start(env);
      const points = pointsAt(server.url);
      // Fresh vouchers go out 256 a call: three calls wait behind the held one.
      const users = Array.from({ length: 600 }, (_, i) => `fresh-redeemer-${i}`);
      await signAhead(users);
      const goods = await points.createGoods('operator', { title: 'voucher', pointsCost: 10, stock: users.length, voucherCodes: voucherCodes('FRESH', users.length) });
      await inWaves(users, 100, (user) => points.award('operator', { userId: user, amount: 10 }));
      const [first, ...others] = users;
      const redeemed = [await points.tryRedeem(first!, goods.id, 'r')];
      await waitFor('the first fresh voucher held', async () => fulfilment.requests.length === 1);
      redeemed.push(...(await inWaves(others, 100, (user) => points.tryRedeem(user, goods.id, 'r'))));
      expect(redeemed.map(({ result }) => result?.__typename)).toEqual(users.map(() => 'Redemption'));

      await proxy.cut();
      fulfilment.answer = () => answer;
      fulfilment.answerHanging(answer);
      await waitFor('every fresh voucher sent', async () => fulfilment.requests.length === users.length, { timeoutMs: 20_000 });
      // The last call's outcome is being recorded against the outage.
      await sleep(1_000);
      const lines = linesOf(server, msg);
      await proxy.restore();

      expect(lines.length).toBeGreaterThanOrEqual(1);
      expect(lines.length).toBeLessThanOrEqual(AT_MOST);
      expect(lines[0]).toMatchObject(firstOfRun(level));
    },
    90_000,
  );
});

describe('webhooks that nothing answers', () => {
  it('log failed voucher and refund deliveries once per window, not once per row and attempt', async () => {
    const closed = await freePort();
    const env = testEnv('outage_logs_webhooks', {
      SWEEP_INTERVAL_MS: '100',
      POINTS_DELIVERY_RETRY_MS: '100',
      REFUND_RETRY_MS: '100',
      POINTS_DELIVERY_WEBHOOK_URL: `http://127.0.0.1:${closed}/vouchers`,
      POINTS_DELIVERY_WEBHOOK_SECRET: WEBHOOK_SECRET,
      REFUND_WEBHOOK_URL: `http://127.0.0.1:${closed}/refunds`,
      REFUND_WEBHOOK_SECRET: WEBHOOK_SECRET,
    });
    const { server, stores } = await start(env);
    const points = pointsAt(server.url);
    const users = Array.from({ length: 100 }, (_, i) => `redeemer-${i}`);
    const goods = await points.createGoods('operator', { title: 'voucher', pointsCost: 10, stock: users.length, voucherCodes: voucherCodes('OUTAGE', users.length) });
    await Promise.all(users.map((user) => points.award('operator', { userId: user, amount: 10 })));
    const redeemed = await Promise.all(users.map((user) => points.tryRedeem(user, goods.id, 'r')));
    expect(redeemed.map(({ result }) => result?.__typename)).toEqual(users.map(() => 'Redemption'));
    const db = await openDatabase(loadConfig(env.vars));
    cleanups.push(() => db.close());
    await oweRefunds(
      db.prisma,
      users.map((user, i) => ({ sourceKey: `outage-logs:${i}`, userId: user, amountCents: 100, reason: 'TEAM_FAILED', paymentRef: `outage-pay-${i}` })),
    );

    // Three attempts at every row: 300 failed deliveries of each kind.
    for (const table of ['redemption', 'refund']) {
      const attempts = table === 'redemption' ? 'delivery_attempts' : 'attempts';
      await waitFor(
        `every ${table} tried three times`,
        async () => (await stores.sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table} WHERE ${attempts} >= 3 AND last_error IS NOT NULL`)).rows[0]!.n === users.length,
        { timeoutMs: 15_000 },
      );
    }
    for (const msg of ['voucher delivery failed; will retry', 'refund delivery failed; will retry']) {
      const lines = linesOf(server, msg);
      expect(lines.length, msg).toBeGreaterThanOrEqual(1);
      expect(lines.length, msg).toBeLessThanOrEqual(AT_MOST);
      expect(lines[0], msg).toMatchObject(firstOfRun(40));
    }
  }, 60_000);
});
