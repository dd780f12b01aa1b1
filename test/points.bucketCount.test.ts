import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bucketOf } from '../src/domain/points/buckets.ts';
import { testEnv } from './support/env.ts';
import { stopAll, stopWithin } from './support/lifecycle.ts';
import { pointsAt, voucherCodes } from './support/points.ts';
import { expectPointsInvariants } from './support/pointsInvariants.ts';
import { waitFor } from './support/poll.ts';
import { type ServerProcess, runUntilExit, startServerProcess } from './support/server.ts';
import { type Stores, deleteKeys, openStores } from './support/stores.ts';

// One key prefix and schema, served with four buckets, then (the shop's keys deleted) with one.
const env = testEnv('points_bucket_count', { POINTS_SHOP_BUCKETS: '4' });
let stores: Stores;
const servers: ServerProcess[] = [];

beforeAll(() => {
  stores = openStores(env);
});

afterAll(async () => {
  await stopAll(...servers);
  await stores?.cleanup();
});

/** The first users of `prefix-0`, `prefix-1` … whose balances live in `bucket` of four. */
function usersOfBucket(prefix: string, bucket: number, count: number): string[] {
  const users: string[] = [];
  for (let i = 0; users.length < count; i++) if (bucketOf(`${prefix}-${i}`, 4) === bucket) users.push(`${prefix}-${i}`);
  return users;
}

describe('POINTS_SHOP_BUCKETS', () => {
  it('is refused to an instance that differs from those serving the prefix; lowered the documented way, it strands no stock', async () => {
    const four = await startServerProcess(env.vars);
    servers.push(four);
    const shop = pointsAt(four.url);
    const mugs = await shop.createGoods('operator', { title: 'mug', pointsCost: 1, stock: 40 });
    const cards = await shop.createGoods('operator', { title: 'card', pointsCost: 1, stock: 8, voucherCodes: voucherCodes('FOLD', 8) });
    // Two of each from bucket 3 (its own share), one from bucket 2: the rest of those buckets is what a lower count must not strand.
    const buyers = [...usersOfBucket('fold-3', 3, 2), ...usersOfBucket('fold-2', 2, 1)];
    for (const user of buyers) {
      await shop.award('operator', { userId: user, amount: 10 });
      for (const goods of [mugs, cards]) expect((await shop.tryRedeem(user, goods.id, `first-${goods.id}`)).result?.__typename).toBe('Redemption');
    }

    const two = await runUntilExit({ ...env.vars, POINTS_SHOP_BUCKETS: '2' });
    expect(two.code).toBe(78);
    expect(two.output).toMatch(/POINTS_SHOP_BUCKETS is 2, but the points shop on this key prefix runs with 4 buckets/);

    // The documented change: every instance stopped, the shop's keys deleted, the new value.
    expect(await stopWithin(four)).toBe(0);
    await deleteKeys(stores.redis, env.keyPrefix, '{shop}*');
    await deleteKeys(stores.redis, env.keyPrefix, '{shop:*');
    const one = await startServerProcess({ ...env.vars, POINTS_SHOP_BUCKETS: '1' });
    servers.push(one);
    const after = pointsAt(one.url);
    expect((await after.goods('viewer', mugs.id))?.remainingStock).toBe(40 - buyers.length);
    expect((await after.goods('viewer', cards.id))?.remainingStock).toBe(8 - buyers.length);

    // Every unit and code left is sold, once, and then no more.
    const rest = Array.from({ length: 40 }, (_, i) => `fold-rest-${i}`);
    for (const user of rest) await after.award('operator', { userId: user, amount: 10 });
    const answers = await Promise.all(rest.flatMap((user) => [mugs, cards].map((goods) => after.tryRedeem(user, goods.id, `rest-${goods.id}`))));
    const sold = (goodsId: string) => answers.filter((answer, i) => i % 2 === (goodsId === mugs.id ? 0 : 1) && answer.result?.__typename === 'Redemption').length;
    expect(sold(mugs.id)).toBe(40 - buyers.length);
    expect(sold(cards.id)).toBe(8 - buyers.length);
    expect(answers.every((answer) => ['Redemption', 'OutOfStock'].includes(answer.result?.__typename ?? ''))).toBe(true);
    const { rows } = await stores.sql.query<{ codes: string; units: string }>(
      'SELECT count(DISTINCT voucher_code) AS codes, count(*) FILTER (WHERE voucher_code IS NULL) AS units FROM redemption',
    );
    expect(rows[0]).toEqual({ codes: '8', units: '40' });
    await expectPointsInvariants(stores, 1);

    // Redis loses the recorded count: the running instance records it again, and a later
    // instance with another count is still refused.
    await stores.redis.del('{shop}:buckets');
    await waitFor('the count recorded again', async () => (await stores.redis.get('{shop}:buckets')) === '1');
    const three = await runUntilExit({ ...env.vars, POINTS_SHOP_BUCKETS: '3' });
    expect(three.code).toBe(78);
    expect(three.output).toMatch(/POINTS_SHOP_BUCKETS is 3, but the points shop on this key prefix runs with 1 buckets/);
  }, 120_000);
});
