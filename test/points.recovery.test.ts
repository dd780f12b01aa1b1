import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PointsStore, SHOP_JOURNAL, answerKey, balanceKeys, goodsKeys } from '../src/domain/points/store.ts';
import { Scripts } from '../src/infra/redis/scripts.ts';
import { unlessCutOff } from './support/client.ts';
import { testEnv } from './support/env.ts';
import { stopAll } from './support/lifecycle.ts';
import { type PointsClient, type RedeemResult, pointsAt, voucherCodes } from './support/points.ts';
import { type RedemptionRow, expectPointsInvariants } from './support/pointsInvariants.ts';
import { sleep, waitFor } from './support/poll.ts';
import { type ServerProcess, startServerProcess } from './support/server.ts';
import { type Stores, loseKeysAtOnce, openStores } from './support/stores.ts';

// The sweeper of a restarted server persists what a killed one left in the journal.
const env = testEnv('points_recovery', { JOURNAL_SWEEP_AFTER_MS: '500', SWEEP_INTERVAL_MS: '200' });
let stores: Stores;
let server: ServerProcess | undefined;
const killed: ServerProcess[] = [];
let points: PointsClient;

/** Starts a server (the first one, or a restart) and points the client at it. */
async function start(): Promise<ServerProcess> {
  const started = await startServerProcess(env.vars);
  points = pointsAt(started.url);
  return started;
}

beforeAll(() => {
  stores = openStores(env);
});

afterAll(async () => {
  await stopAll(server, ...killed);
  await stores?.cleanup();
});

const redeemed = (result: RedeemResult | undefined) => (result?.__typename === 'Redemption' ? result : undefined);
const requestKey = (userId: string, requestId: string) => `${userId}\u0000${requestId}`;

async function durableRedemptions(goodsId: string): Promise<Map<string, RedemptionRow>> {
  const { rows } = await stores.sql.query<RedemptionRow>('SELECT * FROM redemption WHERE goods_id = $1', [goodsId]);
  return new Map(rows.map((row) => [requestKey(row.user_id, row.request_id), row]));
}

async function durableBalances(users: string[]): Promise<Map<string, number>> {
  const { rows } = await stores.sql.query<{ user_id: string; balance: number }>('SELECT user_id, balance FROM points_account WHERE user_id = ANY($1)', [users]);
  return new Map(rows.map((row) => [row.user_id, row.balance]));
}

/**
 * Holds the goods row's lock, which every group commit of its redemptions waits for,
 * until `pending` redemptions wait in the journal; then runs `then` and lets go.
 */
async function whileCommitsAreStuck<T>(goodsId: string, pending: number, then: () => Promise<T>): Promise<T> {
  const blocker = await stores.sql.connect();
  try {
    await blocker.query('BEGIN');
    await blocker.query('SELECT id FROM goods WHERE id = $1 FOR UPDATE', [goodsId]);
    await waitFor('redemptions waiting in the journal', async () => (await stores.redis.xlen(SHOP_JOURNAL)) >= pending, { timeoutMs: 5_000, intervalMs: 10 });
    return await then();
  } finally {
    await blocker.query('ROLLBACK');
    blocker.release();
  }
}

describe('a server killed with SIGKILL in the middle of a storm', () => {
  it('loses no acknowledged redemption, and no points or codes are lost or handed out twice after the restart', async () => {
    // Codes for every request of phase 1, so grants keep coming while the commits are stuck.
    const POOL = 1_500;
    const COST = 10;
    const AWARD = 30;
    server = await start();
    const codes = voucherCodes('CRASH', POOL);
    const goods = await points.createGoods('operator', { title: 'crash card', pointsCost: COST, stock: POOL, voucherCodes: codes });
    const users = Array.from({ length: 600 }, (_, i) => `crash-${i}`);
    await Promise.all(users.map((user) => points.award('operator', { userId: user, amount: AWARD })));
    const first = server;

    // Phase 1: every user redeems twice at once; after 60 acknowledgements the commits
    // get stuck behind the goods row's lock, and the server is killed.
    const acknowledged = new Map<string, NonNullable<ReturnType<typeof redeemed>>>();
    let crash: Promise<void> | undefined;
    const phase1 = await Promise.all(
      users.flatMap((user) =>
        ['a', 'b'].map(async (requestId) => {
          const outcome = await unlessCutOff(points.tryRedeem(user, goods.id, requestId));
          const redemption = redeemed(outcome.result);
          if (redemption) {
            acknowledged.set(requestKey(user, requestId), redemption);
            if (acknowledged.size >= 60) crash ??= whileCommitsAreStuck(goods.id, 50, () => first.kill());
          }
          return outcome;
        }),
      ),
    );
    expect(crash, 'the server was killed during the storm').toBeDefined();
    await crash;
    killed.push(first);
    server = undefined;
    expect(first.child.signalCode).toBe('SIGKILL');
    const cutOff = phase1.filter((outcome) => outcome.failed !== undefined).length;
    expect(cutOff).toBeGreaterThan(100);
    const journalAtCrash = await stores.redis.xlen(SHOP_JOURNAL);
    expect(journalAtCrash).toBeGreaterThan(0);
    console.info(`crash: ${acknowledged.size} acknowledged, ${journalAtCrash} journal entries left, ${cutOff} requests cut off`);

    // Every acknowledged redemption is already in PostgreSQL, with the code its user was given.
    const atCrash = await durableRedemptions(goods.id);
    for (const [key, redemption] of acknowledged) {
      expect(atCrash.get(key), `acknowledged ${key}`).toMatchObject({ id: redemption.id, voucher_code: redemption.voucherCode });
    }
    await expectPointsInvariants(stores);

    // The restarted server's sweeper persists what the dead one left; then Redis and PostgreSQL agree.
    server = await start();
    await waitFor('the journal to be swept', async () => (await stores.redis.xlen(SHOP_JOURNAL)) === 0, { timeoutMs: 15_000 });
    const afterSweep = await durableRedemptions(goods.id);
    expect(afterSweep.size).toBe(POOL - (await stores.redis.llen(goodsKeys(goods.id).codes)));
    await expectPointsInvariants(stores);

    // Phase 2: everyone retries both requests and asks for one more, which empties the pool.
    const phase2 = await Promise.all(
      users.flatMap((user) => ['a', 'b', 'c'].map(async (requestId) => ({ userId: user, requestId, ...(await points.tryRedeem(user, goods.id, requestId)) }))),
    );
    for (const { userId, requestId, result, errors, failed } of phase2) {
      expect(errors ?? failed, `${userId}/${requestId}`).toBeUndefined();
      const durable = afterSweep.get(requestKey(userId, requestId));
      // Acknowledged or not, what the dead server redeemed is the answer to a retry.
      if (durable) expect(result).toMatchObject({ __typename: 'Redemption', id: durable.id, voucherCode: durable.voucher_code });
      else expect(['Redemption', 'OutOfStock']).toContain(result?.__typename);
    }

    const final = await durableRedemptions(goods.id);
    expect(final.size).toBe(POOL);
    expect([...final.values()].map((row) => row.voucher_code).sort()).toEqual(codes);
    for (const { userId, requestId, result } of phase2) {
      const redemption = redeemed(result);
      if (redemption) expect(final.get(requestKey(userId, requestId))).toMatchObject({ id: redemption.id, voucher_code: redemption.voucherCode });
    }
    // Points: each user kept exactly what their durable redemptions did not spend.
    const balances = await durableBalances(users);
    const spent = new Map<string, number>();
    for (const row of final.values()) spent.set(row.user_id, (spent.get(row.user_id) ?? 0) + row.points_spent);
    for (const user of users) expect(balances.get(user), user).toBe(AWARD - (spent.get(user) ?? 0));
    await waitFor('the journal to be empty', async () => (await stores.redis.xlen(SHOP_JOURNAL)) === 0);
    await expectPointsInvariants(stores);
  });
});

describe('Redis loses its data mid-campaign', () => {
  it('rebuilds balances, stock and remembered answers from PostgreSQL', async () => {
    server ??= await start();
    const goods = await points.createGoods('operator', { title: 'flush card', pointsCost: 40, stock: 20, perUserLimit: 2, voucherCodes: voucherCodes('FLUSH', 20) });
    const users = Array.from({ length: 8 }, (_, i) => `flush-${i}`);
    await Promise.all(users.map((user) => points.award('operator', { userId: user, amount: 100 })));
    const before = await Promise.all(users.map((user) => points.tryRedeem(user, goods.id, 'first')));
    for (const { result } of before) expect(result?.__typename).toBe('Redemption');
    await points.award('operator', { userId: 'flush-poor', amount: 30 });
    const refusal = { __typename: 'InsufficientPoints', balance: 30, pointsCost: 40 };
    expect((await points.tryRedeem('flush-poor', goods.id, 'too-soon')).result).toMatchObject(refusal);

    expect(await loseKeysAtOnce(stores.redis, env.keyPrefix)).toBeGreaterThan(0);
    expect(await stores.redis.exists(balanceKeys(users[0]!).meta, goodsKeys(goods.id).meta)).toBe(0);

    expect((await points.goods(users[0]!, goods.id))?.remainingStock).toBe(12);
    // A retry is answered from PostgreSQL and deducts nothing; the per-user limit counts what PostgreSQL holds.
    for (const [i, user] of users.entries()) {
      const { id, voucherCode } = redeemed(before[i]!.result)!;
      expect((await points.tryRedeem(user, goods.id, 'first')).result).toMatchObject({ __typename: 'Redemption', id, voucherCode });
      expect((await points.me(user)).pointsBalance).toBe(60);
    }
    // A refused requestId stays refused after Redis forgot it, even once the points are there.
    await points.award('operator', { userId: 'flush-poor', amount: 100 });
    expect((await points.tryRedeem('flush-poor', goods.id, 'too-soon')).result).toMatchObject(refusal);
    await stores.redis.del(answerKey('flush-poor', 'too-soon'));
    expect((await points.tryRedeem('flush-poor', goods.id, 'too-soon')).result).toMatchObject(refusal);
    expect((await points.me('flush-poor')).pointsBalance).toBe(130);
    const second = await Promise.all(users.map((user) => points.tryRedeem(user, goods.id, 'second')));
    for (const { result } of second) expect(result?.__typename).toBe('Redemption');
    const third = await Promise.all(users.map((user) => points.tryRedeem(user, goods.id, 'third')));
    for (const { result } of third) expect(result).toMatchObject({ __typename: 'PerUserLimitReached', perUserLimit: 2 });
    expect((await points.goods(users[0]!, goods.id))?.remainingStock).toBe(4);
    await expectPointsInvariants(stores);
  });

  it('drops a balance rebuilt while a redemption Redis lost was still on its way to PostgreSQL', async () => {
    server ??= await start();
    const stuck = await points.createGoods('operator', { title: 'stuck card', pointsCost: 10, stock: 5 });
    const other = await points.createGoods('operator', { title: 'other card', pointsCost: 10, stock: 5 });
    await points.award('operator', { userId: 'lost-entry', amount: 40 });
    const journaled = (requestId: string) => async () => (await stores.redis.xrange(SHOP_JOURNAL, '-', '+')).some(([, fields]) => fields.includes(requestId));
    // The first redemption is journaled and waits for its goods row; then Redis loses
    // everything, its journal entry included.
    const blocker = await stores.sql.connect();
    let first: ReturnType<typeof points.tryRedeem>;
    let second: ReturnType<typeof points.tryRedeem>;
    try {
      await blocker.query('BEGIN');
      await blocker.query('SELECT id FROM goods WHERE id = $1 FOR UPDATE', [stuck.id]);
      first = points.tryRedeem('lost-entry', stuck.id, 'first');
      await waitFor('the first redemption in the journal', journaled('first'), { timeoutMs: 5_000, intervalMs: 10 });
      await loseKeysAtOnce(stores.redis, env.keyPrefix);
      // The second rebuilds the balance from a ledger without the first (40) and spends 10
      // of it, on other goods: no clash in PostgreSQL would drop the balance.
      second = points.tryRedeem('lost-entry', other.id, 'second');
      await waitFor('the second redemption in the journal', journaled('second'), { timeoutMs: 5_000, intervalMs: 10 });
    } finally {
      await blocker.query('ROLLBACK');
      blocker.release();
    }
    expect((await first).result?.__typename).toBe('Redemption');
    expect((await second).result?.__typename).toBe('Redemption');
    // Both are in the ledger: 20 left, which the cached balance must say too (it said 30).
    expect((await durableBalances(['lost-entry'])).get('lost-entry')).toBe(20);
    expect((await points.me('lost-entry')).pointsBalance).toBe(20);
    await expectPointsInvariants(stores);
  });

  it('keeps every invariant when all of Redis is lost while redemptions are on their way to PostgreSQL', async () => {
    server ??= await start();
    // Codes for every request, so grants keep coming while the commits are stuck.
    const POOL = 900;
    const codes = voucherCodes('LOSS', POOL);
    const goods = await points.createGoods('operator', { title: 'loss card', pointsCost: 10, stock: POOL, voucherCodes: codes });
    const users = Array.from({ length: 300 }, (_, i) => `loss-${i}`);
    await Promise.all(users.map((user) => points.award('operator', { userId: user, amount: 40 })));

    // The harsh case: Redis loses everything (balances, stock, answers, the journal)
    // while redemptions wait for PostgreSQL; the storm's own redemptions rebuild the
    // keys from a PostgreSQL that lacks them, and only then do the commits go through.
    const acknowledged = new Map<string, NonNullable<ReturnType<typeof redeemed>>>();
    let loss: Promise<number> | undefined;
    const loseRedis = () =>
      whileCommitsAreStuck(goods.id, 20, async () => {
        const lost = await loseKeysAtOnce(stores.redis, env.keyPrefix);
        // Let the storm rebuild from a PostgreSQL that lacks the stuck redemptions. A rebuild
        // may itself wait for those commits (it persists what the journal holds first), so
        // the commits are released after a while even if the goods are not rebuilt yet.
        await waitFor('the goods to be rebuilt', async () => (await stores.redis.exists(goodsKeys(goods.id).meta)) === 1, { timeoutMs: 3_000, intervalMs: 10 }).catch(() => undefined);
        await sleep(100);
        return lost;
      });
    const results = await Promise.all(
      users.flatMap((user) =>
        ['a', 'b', 'c'].map(async (requestId) => {
          const outcome = await points.tryRedeem(user, goods.id, requestId);
          const redemption = redeemed(outcome.result);
          if (redemption) {
            acknowledged.set(requestKey(user, requestId), redemption);
            if (acknowledged.size >= 40) loss ??= loseRedis();
          }
          return outcome;
        }),
      ),
    );
    expect(loss, 'Redis lost its data during the storm').toBeDefined();
    expect(await loss).toBeGreaterThan(0);
    // A redemption that kept meeting a rebuild gives up with a retryable error, never an unexpected one.
    const failed = results.filter((outcome) => outcome.errors !== undefined || outcome.failed !== undefined);
    for (const { errors } of failed) expect((errors as { extensions?: { code?: string } }[]).map((error) => error.extensions?.code)).toEqual(['SERVICE_UNAVAILABLE']);
    const conflicts = server.output().split('redemption conflicted with PostgreSQL').length - 1;
    console.info(`redis loss mid-storm: ${acknowledged.size} acknowledged, ${conflicts} conflicts, ${failed.length} asked to retry`);

    const durable = await durableRedemptions(goods.id);
    for (const [key, redemption] of acknowledged) expect(durable.get(key), key).toMatchObject({ id: redemption.id, voucher_code: redemption.voucherCode });
    await expectPointsInvariants(stores);

    // The dust settles: every user asks again until the pool is empty.
    for (let round = 0; (await stores.sql.query('SELECT 1 FROM redemption WHERE goods_id = $1', [goods.id])).rowCount! < POOL; round++) {
      expect(round, 'the pool empties').toBeLessThan(4);
      await Promise.all(users.map((user) => points.tryRedeem(user, goods.id, `after-${round}`)));
    }
    await waitFor('the journal to be empty', async () => (await stores.redis.xlen(SHOP_JOURNAL)) === 0);
    const final = await expectPointsInvariants(stores);
    expect(
      final
        .filter((row) => row.goods_id === goods.id)
        .map((row) => row.voucher_code)
        .sort(),
    ).toEqual(codes);
    // Every cached balance and the stock agree with PostgreSQL (checked above); every user's reads do too.
    const balances = await durableBalances(users);
    for (const user of users.slice(0, 50)) {
      expect((await points.me(user)).pointsBalance, user).toBe(balances.get(user));
    }
    expect((await points.goods(users[0]!, goods.id))?.remainingStock).toBe(0);
  });
});

describe('a requestId retried a day later by a process that dies before committing it', () => {
  it('is turned down when the sweeper commits it, and the points and the code the script took in Redis come back', async () => {
    server ??= await start();
    const goods = await points.createGoods('operator', { title: 'late card', pointsCost: 25, stock: 3, voucherCodes: voucherCodes('LATE', 3) });
    await points.award('operator', { userId: 'late', amount: 100 });
    const first = redeemed((await points.tryRedeem('late', goods.id, 'once')).result)!;
    // Redis forgets answers after a day; the retry's script spends again, and its process dies.
    await stores.redis.del(answerKey('late', 'once'));
    const dying = new PointsStore(stores.redis, new Scripts(stores.redis), 1);
    expect((await dying.redeem('late', goods.id, 'once', randomUUID(), false)).kind).toBe('redeemed');
    expect(await stores.redis.get(balanceKeys('late').meta)).toBe('50');

    await waitFor('the sweeper to commit the orphan', async () => (await stores.redis.xlen(SHOP_JOURNAL)) === 0);
    expect((await points.me('late')).pointsBalance).toBe(75);
    expect((await points.goods('late', goods.id))?.remainingStock).toBe(2);
    expect((await points.tryRedeem('late', goods.id, 'once')).result).toMatchObject({ __typename: 'Redemption', id: first.id, voucherCode: first.voucherCode });
    expect([...(await durableRedemptions(goods.id)).values()]).toHaveLength(1);
    await expectPointsInvariants(stores);
  });
});
