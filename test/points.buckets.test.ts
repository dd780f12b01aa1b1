import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allBuckets, bucketOf } from '../src/domain/points/buckets.ts';
import { goodsKeys, shopJournal } from '../src/domain/points/store.ts';
import { RedeemPointsDocument } from './gql/generated.ts';
import { unlessCutOff } from './support/client.ts';
import { testEnv } from './support/env.ts';
import { stopAll } from './support/lifecycle.ts';
import { type PointsClient, type RedeemResult, pointsAt, voucherCodes } from './support/points.ts';
import { expectPointsInvariants } from './support/pointsInvariants.ts';
import { waitFor } from './support/poll.ts';
import { type ServerProcess, startServerProcess } from './support/server.ts';
import { type Stores, loseKeysAtOnce, openStores } from './support/stores.ts';
import { stormOf, tallyOf } from './support/storm.ts';
import { tokenOf } from './support/tokens.ts';

const BUCKETS = 4;
// The sweepers of the surviving server mend what a killed one left: soon, for the test.
const env = testEnv('points_buckets', { POINTS_SHOP_BUCKETS: String(BUCKETS), JOURNAL_SWEEP_AFTER_MS: '500', SWEEP_INTERVAL_MS: '200' });
let server: ServerProcess;
let stores: Stores;
let points: PointsClient;
const killed: ServerProcess[] = [];

beforeAll(async () => {
  server = await startServerProcess(env.vars);
  stores = openStores(env);
  points = pointsAt(server.url);
});

afterAll(async () => {
  await stopAll(server, ...killed);
  await stores?.cleanup();
});

const typename = (result: RedeemResult | undefined) => result?.__typename;

/**
 * Users who hash unevenly: `weights[b]` of every ten land in bucket b, so a storm drains
 * some buckets' shares long before the others'.
 */
function skewedUsers(prefix: string, count: number, weights = [6, 2, 1.5, 0.5]): string[] {
  const byBucket = new Map<number, string[]>(allBuckets(BUCKETS).map((bucket) => [bucket, []]));
  for (let i = 0; [...byBucket.values()].some((users, bucket) => users.length < Math.ceil((count * weights[bucket]!) / 10)); i++) {
    const user = `${prefix}-${i}`;
    byBucket.get(bucketOf(user, BUCKETS))!.push(user);
  }
  return allBuckets(BUCKETS).flatMap((bucket) => byBucket.get(bucket)!.slice(0, Math.ceil((count * weights[bucket]!) / 10)));
}

async function award(users: string[], amount: number): Promise<void> {
  await Promise.all(users.map((user) => points.award('operator', { userId: user, amount })));
}

async function journalsEmpty(): Promise<boolean> {
  return (await Promise.all(allBuckets(BUCKETS).map((bucket) => stores.redis.xlen(shopJournal(bucket))))).every((length) => length === 0);
}

async function redemptionCount(goodsId: string): Promise<number> {
  return (await stores.sql.query('SELECT 1 FROM redemption WHERE goods_id = $1', [goodsId])).rowCount!;
}

/** Each item's stock share per bucket, as PostgreSQL holds it. */
async function allotments(goodsId: string): Promise<number[]> {
  const { rows } = await stores.sql.query<{ bucket: number; allotted: number }>('SELECT bucket, allotted FROM goods_bucket_stock WHERE goods_id = $1', [goodsId]);
  return allBuckets(BUCKETS).map((bucket) => rows.find((row) => row.bucket === bucket)?.allotted ?? 0);
}

describe('a storm across four buckets, users hashing unevenly', () => {
  it('gets no OutOfStock while stock remains in any bucket, then exactly OutOfStock once all is gone', async () => {
    const STOCK = 300;
    const goods = await points.createGoods('operator', { title: 'bucketed mug', pointsCost: 10, stock: STOCK, perUserLimit: 0 });
    expect(await allotments(goods.id)).toEqual([75, 75, 75, 75]);
    const users = skewedUsers('mug', 125);
    await award(users, 100);

    // About 250 at once: bucket 0's users alone ask for 150, twice its share.
    const first = await Promise.all(users.flatMap((user) => ['a', 'b'].map((requestId) => points.tryRedeem(user, goods.id, requestId))));
    for (const { errors, failed } of first) expect(errors ?? failed).toBeUndefined();
    expect(first.map(({ result }) => typename(result)).filter((name) => name !== 'Redemption')).toEqual([]);
    expect((await points.goods(users[0]!, goods.id))?.remainingStock).toBe(STOCK - 2 * users.length);
    const { rows: transfers } = await stores.sql.query('SELECT 1 FROM goods_stock_transfer WHERE goods_id = $1', [goods.id]);
    expect(transfers.length, 'stock moved to the dry buckets').toBeGreaterThan(0);

    // About 125 more for the last 50: exactly those win, wherever their users hash.
    const left = STOCK - 2 * users.length;
    const second = await Promise.all(users.map((user) => points.tryRedeem(user, goods.id, 'c')));
    for (const { errors, failed } of second) expect(errors ?? failed).toBeUndefined();
    const names = second.map(({ result }) => typename(result));
    expect(names.filter((name) => name === 'Redemption')).toHaveLength(left);
    expect(names.filter((name) => name === 'OutOfStock')).toHaveLength(users.length - left);
    expect(await redemptionCount(goods.id)).toBe(STOCK);
    expect((await points.goods(users[0]!, goods.id))?.remainingStock).toBe(0);

    await waitFor('the journals to be empty', journalsEmpty);
    await expectPointsInvariants(stores, BUCKETS);
  });

  it('hands every voucher code of a pool out once, across buckets', async () => {
    const codes = voucherCodes('BKT', 120);
    const goods = await points.createGoods('operator', { title: 'bucketed card', pointsCost: 10, stock: codes.length, voucherCodes: codes });
    const users = skewedUsers('card', 150);
    await award(users, 10);
    const results = await Promise.all(users.map((user) => points.tryRedeem(user, goods.id, 'one')));
    for (const { errors, failed } of results) expect(errors ?? failed).toBeUndefined();
    const won = results.flatMap(({ result }) => (result?.__typename === 'Redemption' ? [result.voucherCode] : []));
    expect(won).toHaveLength(120);
    expect(won.sort()).toEqual([...codes].sort());
    expect(results.filter(({ result }) => typename(result) === 'OutOfStock')).toHaveLength(users.length - codes.length);
    await waitFor('the journals to be empty', journalsEmpty);
    await expectPointsInvariants(stores, BUCKETS);
  });
});

describe('a crowd after the last unit', () => {
  it('answers every late redemption OutOfStock without queueing, and sells again right after a restock', async () => {
    const goods = await points.createGoods('operator', { title: 'sold-out kettle', pointsCost: 1, stock: 8, perUserLimit: 0 });
    const users = skewedUsers('late', 300, [2.5, 2.5, 2.5, 2.5]);
    await award(users, 10);
    const sold = await Promise.all(users.slice(0, 8).map((user) => points.tryRedeem(user, goods.id, 'early')));
    expect(sold.map(({ result }) => typename(result))).toEqual(Array(8).fill('Redemption'));
    // Signed before the clock starts: the crowd's tokens are not what is measured.
    await Promise.all(users.map((user) => tokenOf(user)));

    // Each used to wait its turn at the item's transfer lock to be told OutOfStock, about
    // 50 a second, and those past the lock's 5 s wait limit got SERVICE_UNAVAILABLE.
    const started = performance.now();
    const late = await Promise.all(users.map((user) => points.tryRedeem(user, goods.id, 'late')));
    const elapsedMs = performance.now() - started;
    const kinds = late.map(({ result, errors }) => typename(result) ?? errors?.[0]?.extensions?.code);
    expect(kinds.filter((kind) => kind !== 'OutOfStock')).toEqual([]);
    expect(elapsedMs, `300 answers took ${Math.round(elapsedMs)} ms`).toBeLessThan(3_000);

    // Sellable again at once: one unit for each bucket, and none more.
    expect(await points.restock('operator', { goodsId: goods.id, units: BUCKETS })).toMatchObject({ __typename: 'Goods' });
    const oneOfEachBucket = allBuckets(BUCKETS).map((bucket) => users.find((user) => bucketOf(user, BUCKETS) === bucket)!);
    const restocked = await Promise.all([...oneOfEachBucket, users[8]!].map((user) => points.tryRedeem(user, goods.id, 'restocked')));
    expect(restocked.map(({ result }) => typename(result)).sort()).toEqual(['OutOfStock', ...Array(BUCKETS).fill('Redemption')].sort());
    expect(await redemptionCount(goods.id)).toBe(8 + BUCKETS);
    await waitFor('the journals to be empty', journalsEmpty);
    await expectPointsInvariants(stores, BUCKETS);
  });
});

describe('per-user limits and requestIds across buckets', () => {
  it('holds each user to the limit exactly, and answers every retried requestId as the first time', async () => {
    const goods = await points.createGoods('operator', { title: 'limited pen', pointsCost: 5, stock: 200, perUserLimit: 3 });
    const users = skewedUsers('pen', 40);
    await award(users, 100);
    const requests = users.flatMap((user) => Array.from({ length: 6 }, (_, i) => ({ user, requestId: `pen-${i}` })));
    const first = await Promise.all(requests.map(({ user, requestId }) => points.tryRedeem(user, goods.id, requestId)));
    for (const { errors, failed } of first) expect(errors ?? failed).toBeUndefined();
    for (const user of users) {
      const mine = first.filter((_, i) => requests[i]!.user === user).map(({ result }) => typename(result));
      expect(
        mine.filter((name) => name === 'Redemption'),
        user,
      ).toHaveLength(3);
      expect(
        mine.filter((name) => name === 'PerUserLimitReached'),
        user,
      ).toHaveLength(3);
    }

    const retried = await Promise.all(requests.map(({ user, requestId }) => points.tryRedeem(user, goods.id, requestId)));
    for (const [i, { result }] of retried.entries()) {
      const before = first[i]!.result;
      expect(typename(result)).toBe(typename(before));
      if (result?.__typename === 'Redemption' && before?.__typename === 'Redemption') expect(result.id).toBe(before.id);
    }
    expect(await redemptionCount(goods.id)).toBe(users.length * 3);
    await waitFor('the journals to be empty', journalsEmpty);
    await expectPointsInvariants(stores, BUCKETS);
  });
});

describe('Redis lost in the middle of a bucketed storm', () => {
  it('rebuilds every bucket with its durable share: no unit sold twice, none lost, and OutOfStock only once all is sold', async () => {
    const users = skewedUsers('lamp', 200);
    // Stock for every request: none may be answered OutOfStock.
    const STOCK = 2 * users.length;
    const goods = await points.createGoods('operator', { title: 'loss lamp', pointsCost: 10, stock: STOCK, perUserLimit: 0 });
    await award(users, 100);

    let loss: Promise<number> | undefined;
    let acknowledged = 0;
    const results = await Promise.all(
      users.flatMap((user) =>
        ['a', 'b'].map(async (requestId) => {
          const outcome = await unlessCutOff(points.tryRedeem(user, goods.id, requestId));
          if (typename(outcome.result) === 'Redemption' && ++acknowledged === 60) loss = loseKeysAtOnce(stores.redis, env.keyPrefix);
          return { user, requestId, outcome };
        }),
      ),
    );
    expect(loss, 'Redis lost its data during the storm').toBeDefined();
    expect(await loss).toBeGreaterThan(0);
    // A redemption that met the loss gives up with a retryable error, never an unexpected one.
    const unanswered = results.filter(({ outcome }) => outcome.errors !== undefined || outcome.failed !== undefined);
    for (const { outcome } of unanswered) expect((outcome.errors ?? []).map((error) => error.extensions?.code)).toEqual(['SERVICE_UNAVAILABLE']);
    // Retried with the same requestIds, each is answered; nothing is ever sold out while stock remains.
    for (let round = 0; unanswered.length > 0; round++) {
      expect(round, 'every retry is answered').toBeLessThan(5);
      const again = await Promise.all(unanswered.map(({ user, requestId }) => points.tryRedeem(user, goods.id, requestId)));
      unanswered.splice(0, unanswered.length, ...unanswered.filter((_, i) => again[i]!.errors !== undefined));
    }
    expect(results.filter(({ outcome }) => typename(outcome.result) === 'OutOfStock')).toEqual([]);
    expect(await redemptionCount(goods.id)).toBe(STOCK);
    expect((await points.goods(users[0]!, goods.id))?.remainingStock).toBe(0);
    await waitFor('the journals to be empty', journalsEmpty);
    await expectPointsInvariants(stores, BUCKETS);
  });
});

describe('a server killed between the two halves of a stock transfer', () => {
  it('leaves the units in flight, durably, and the sweeper of another server gives them', async () => {
    // Its locks outlive it by 1.5 s, not 10 s: the other server's sweeper may take the item's transfer lock that much sooner.
    const hanging = await startServerProcess({ ...env.vars, TEST_HANG_AFTER_STOCK_TAKES: '0', TEST_LOCK_TTL_MS: '1500' });
    killed.push(hanging);
    const goods = await points.createGoods('operator', { title: 'crash kettle', pointsCost: 10, stock: 8, perUserLimit: 0 });
    const [user] = skewedUsers('kettle', 1, [10, 0, 0, 0]);
    await award([user!], 100);
    const atHanging = pointsAt(hanging.url);
    // Bucket 0 holds 2 units; the third redemption moves stock, and its server stops after the take.
    for (const requestId of ['one', 'two']) expect(typename((await atHanging.tryRedeem(user!, goods.id, requestId)).result)).toBe('Redemption');
    const third = unlessCutOff(atHanging.tryRedeem(user!, goods.id, 'three'));
    await waitFor('a take committed', async () => (await stores.sql.query('SELECT 1 FROM goods_stock_transfer WHERE goods_id = $1 AND given_at IS NULL', [goods.id])).rowCount === 1, {
      timeoutMs: 15_000,
    });
    await hanging.kill();
    expect((await third).failed).toBeDefined();
    // In flight: counted by no bucket, and not lost.
    await expectPointsInvariants(stores, BUCKETS);

    await waitFor(
      'the sweeper to give the units',
      async () => (await stores.sql.query('SELECT 1 FROM goods_stock_transfer WHERE goods_id = $1 AND given_at IS NULL', [goods.id])).rowCount === 0,
      { timeoutMs: 30_000 },
    );
    expect(server.output()).toContain('giving stock a transfer left in flight');
    expect((await points.goods(user!, goods.id))?.remainingStock).toBe(6);
    // The user's bucket has stock again; the rest of the item sells to the last unit.
    const after = await Promise.all(['three', 'four', 'five', 'six', 'seven', 'eight', 'nine'].map((requestId) => points.tryRedeem(user!, goods.id, requestId)));
    expect(after.filter(({ result }) => typename(result) === 'Redemption')).toHaveLength(6);
    expect(after.filter(({ result }) => typename(result) === 'OutOfStock')).toHaveLength(1);
    await waitFor('the journals to be empty', journalsEmpty);
    await expectPointsInvariants(stores, BUCKETS);
  });
});

/**
 * A redemption retried with its requestId while it is answered SERVICE_UNAVAILABLE, as a
 * client does: on a slow machine a bucket's rebuild lock, held by a restock's gives, can be
 * waited on past its bound. The retry answers the first call's outcome, never a second one.
 */
async function redeemAsClientsDo(user: string, goodsId: string, requestId: string) {
  for (let attempt = 1; ; attempt++) {
    const answer = await points.tryRedeem(user, goodsId, requestId);
    if (attempt === 5 || answer.errors?.[0]?.extensions?.code !== 'SERVICE_UNAVAILABLE') return answer;
    await new Promise((resolve) => setTimeout(resolve, 1_000));
  }
}

describe('restocks across four buckets', () => {
  it('restocks racing a storm: every unit stocked is sold exactly once, in its bucket', async () => {
    const goods = await points.createGoods('operator', { title: 'restocked lamp', pointsCost: 1, stock: 40, perUserLimit: 0 });
    // 200 redemptions for at most 120 units, the restocks landing mid-storm or after it: the
    // 100 asking once more after it outnumber the 80 units it may have left unsold.
    const users = skewedUsers('relamp', 100);
    await award(users, 100);
    // Five restocks of 20 as the storm starts, one of them sent twice: 80 units more.
    const restocks = ['r1', 'r2', 'r3', 'r4', 'r1'].map((requestId, i) =>
      new Promise((resolve) => setTimeout(resolve, 20 * i)).then(() => points.restock('operator', { goodsId: goods.id, requestId, units: 20 })),
    );
    const storm = await Promise.all(users.flatMap((user) => ['a', 'b'].map((requestId) => redeemAsClientsDo(user, goods.id, requestId))));
    for (const answer of await Promise.all(restocks)) expect(answer.__typename).toBe('Goods');
    for (const { errors, failed } of storm) expect(errors ?? failed).toBeUndefined();
    expect(storm.every(({ result }) => ['Redemption', 'OutOfStock'].includes(typename(result)!))).toBe(true);

    // What the storm left is sold to the last unit, and no further.
    const rest = await Promise.all(users.map((user) => points.tryRedeem(user, goods.id, 'c')));
    expect(await redemptionCount(goods.id)).toBe(120);
    expect(rest.filter(({ result }) => typename(result) === 'OutOfStock').length).toBeGreaterThan(0);
    expect(await points.goods(users[0]!, goods.id)).toMatchObject({ stock: 120, remainingStock: 0 });
    expect((await allotments(goods.id)).reduce((sum, units) => sum + units, 0)).toBe(120);
    await waitFor('the journals to be empty', journalsEmpty);
    await expectPointsInvariants(stores, BUCKETS);
  });

  it('a restock committed by a server that died before giving it: the sweeper gives its codes', async () => {
    const codes = voucherCodes('SWEPT', 5);
    const goods = await points.createGoods('operator', { title: 'swept card', pointsCost: 1, stock: 5, voucherCodes: codes });
    // What restockGoods commits before its gives, for two new codes (positions 5 and 6: buckets 1 and 2).
    await stores.sql.query(
      `WITH restock AS (INSERT INTO goods_restock (id, goods_id, request_id, units, codes, created_by) VALUES ('dead', $1, 'dead', 2, ARRAY['SWEPT-N5', 'SWEPT-N6'], 'operator')),
            stock AS (UPDATE goods SET stock = stock + 2 WHERE id = $1),
            pool AS (INSERT INTO voucher_code (code, goods_id, position, bucket) VALUES ('SWEPT-N5', $1, 5, NULL), ('SWEPT-N6', $1, 6, NULL))
       INSERT INTO goods_stock_transfer (id, goods_id, from_bucket, to_bucket, units, codes, taken_at)
       VALUES ('dead:1', $1, NULL, 1, 1, ARRAY['SWEPT-N5'], now()), ('dead:2', $1, NULL, 2, 1, ARRAY['SWEPT-N6'], now())`,
      [goods.id],
    );
    await waitFor(
      'the sweeper to give the restock',
      async () => (await stores.sql.query('SELECT 1 FROM goods_stock_transfer WHERE goods_id = $1 AND given_at IS NULL', [goods.id])).rowCount === 0,
      { timeoutMs: 30_000 },
    );
    expect(await points.goods('operator', goods.id, { admin: true })).toMatchObject({ stock: 7, remainingStock: 7 });
    const users = skewedUsers('swept', 40);
    await award(users, 1);
    const results = await Promise.all(users.map((user) => points.tryRedeem(user, goods.id, 'one')));
    const won = results.flatMap(({ result }) => (result?.__typename === 'Redemption' ? [result.voucherCode] : []));
    expect(won.sort()).toEqual([...codes, 'SWEPT-N5', 'SWEPT-N6'].sort());
    await waitFor('the journals to be empty', journalsEmpty);
    await expectPointsInvariants(stores, BUCKETS);
  });
});

describe('price and sale changes across four buckets', () => {
  it('leaves every bucket with the newest terms when changes race', async () => {
    const items = await Promise.all(Array.from({ length: 12 }, (_, i) => points.createGoods('operator', { title: `raced ${i}`, pointsCost: 5, stock: 40 })));
    // Every share in Redis, as redemptions of users of every bucket leave them.
    await Promise.all(items.map((item) => points.goods('operator', item.id, { admin: true })));
    await Promise.all(
      items.flatMap((item) => [
        points.updateGoods('operator', item.id, { pointsCost: 11, onSale: false }),
        points.updateGoods('operator', item.id, { pointsCost: 22, onSale: true }),
        points.updateGoods('operator', item.id, { pointsCost: 33 }),
      ]),
    );
    for (const item of items) {
      const { rows } = await stores.sql.query<{ points_cost: number; on_sale: boolean }>('SELECT points_cost, on_sale FROM goods WHERE id = $1', [item.id]);
      for (const bucket of allBuckets(BUCKETS)) {
        const terms = await stores.redis.hmget(goodsKeys(item.id, bucket).meta, 'pointsCost', 'onSale');
        expect(terms, `${item.id} in bucket ${bucket}`).toEqual([String(rows[0]!.points_cost), rows[0]!.on_sale ? '1' : '0']);
      }
    }
  });

  it('ends a sale while 400 redemptions are in flight: none is dated after the end it records, in any bucket', async () => {
    const users = skewedUsers('ending', 400, [2.5, 2.5, 2.5, 2.5]);
    await Promise.all(users.map((userId) => points.award('operator', { userId, amount: 10 })));
    const item = await points.createGoods('operator', { title: 'ending sale', pointsCost: 1, stock: 1_000 });
    const storm = stormOf(server.url, RedeemPointsDocument, { goodsId: item.id, requestId: 'ending' }, await Promise.all(users.map((user) => tokenOf(user))));
    await waitFor('the first redemptions to be answered', () => storm.progress.answered >= 50, { intervalMs: 2 });
    const ended = await points.updateGoods('operator', item.id, { saleEndsAt: '2020-01-01T00:00:00Z' });
    const kinds = await tallyOf(storm.answers, (data) => data.redeemPoints.__typename);
    expect(kinds.get('GoodsOffSale'), JSON.stringify([...kinds])).toBeGreaterThan(0);

    await expectPointsInvariants(stores);
    const { rows } = await stores.sql.query<{ sale_ends_at: Date; last: Date; redeemed: number; history_end: Date }>(
      `SELECT g.sale_ends_at, max(r.created_at) AS last, count(r.*)::int AS redeemed,
              (SELECT c.sale_ends_at FROM goods_change c WHERE c.goods_id = g.id ORDER BY c.changed_at DESC LIMIT 1) AS history_end
       FROM goods g LEFT JOIN redemption r ON r.goods_id = g.id WHERE g.id = $1 GROUP BY g.id`,
      [item.id],
    );
    const recorded = rows[0]!;
    expect(recorded.redeemed).toBe(kinds.get('Redemption') ?? 0);
    expect(recorded.sale_ends_at.toISOString()).toBe(ended.saleEndsAt);
    expect(recorded.history_end).toEqual(recorded.sale_ends_at);
    expect(recorded.last.getTime(), `last redemption ${recorded.last.toISOString()}, end ${ended.saleEndsAt}`).toBeLessThan(recorded.sale_ends_at.getTime());
  });
});
