import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { answerKey, balanceKeys, goodsKeys } from '../src/domain/points/store.ts';
import { RedeemPointsDocument } from './gql/generated.ts';
import { errorCodes } from './support/client.ts';
import { testEnv } from './support/env.ts';
import { stopAll } from './support/lifecycle.ts';
import { type PointsClient, type RedeemResult, pointsAt, voucherCodes } from './support/points.ts';
import { type RedemptionRow, expectPointsInvariants } from './support/pointsInvariants.ts';
import { type ServerProcess, startServerProcess } from './support/server.ts';
import { type Stores, openStores } from './support/stores.ts';
import { signAhead } from './support/tokens.ts';

const env = testEnv('points_storm');
let server: ServerProcess;
let stores: Stores;
let points: PointsClient;

beforeAll(async () => {
  server = await startServerProcess(env.vars);
  stores = openStores(env);
  points = pointsAt(server.url);
});

afterAll(async () => {
  await stopAll(server);
  await stores?.cleanup();
});

const redeemed = (result: RedeemResult | undefined) => (result?.__typename === 'Redemption' ? result : undefined);

async function durableBalance(userId: string): Promise<number> {
  const { rows } = await stores.sql.query<{ balance: number }>('SELECT balance FROM points_account WHERE user_id = $1', [userId]);
  return rows[0]?.balance ?? 0;
}

async function redemptionsOf(where: string, params: unknown[]): Promise<RedemptionRow[]> {
  const { rows } = await stores.sql.query<RedemptionRow>(`SELECT * FROM redemption WHERE ${where}`, params);
  return rows;
}

describe('an overdraw attack', () => {
  it('50 parallel redemptions with points for exactly 3: 3 succeed and the balance is exactly 0 in Redis and PostgreSQL', async () => {
    const goods = await points.createGoods('operator', { title: 'gift card 50', pointsCost: 100, stock: 1_000 });
    expect(await points.award('operator', { userId: 'attacker', amount: 300 })).toBe(300);

    // Watch the cached balance while the attack runs: it must never dip below zero.
    const seen: number[] = [];
    let attacking = true;
    const watching = (async () => {
      while (attacking) seen.push(Number(await stores.redis.get(balanceKeys('attacker').meta)));
    })();
    const results = await Promise.all(Array.from({ length: 50 }, (_, i) => points.tryRedeem('attacker', goods.id, `attack-${i}`)));
    attacking = false;
    await watching;
    expect(seen.length).toBeGreaterThan(1);
    expect(Math.min(...seen)).toBeGreaterThanOrEqual(0);
    for (const { errors, failed } of results) expect(errors ?? failed).toBeUndefined();
    const won = results.filter(({ result }) => redeemed(result));
    expect(won).toHaveLength(3);
    const refused = results.filter(({ result }) => result?.__typename === 'InsufficientPoints');
    expect(refused).toHaveLength(47);
    for (const { result } of refused) expect(result).toMatchObject({ pointsCost: 100, balance: expect.any(Number) });
    for (const { result } of won) expect(result).toMatchObject({ pointsSpent: 100, status: 'PENDING', voucherCode: null, goodsId: goods.id });

    expect(await stores.redis.get(balanceKeys('attacker').meta)).toBe('0');
    expect(await durableBalance('attacker')).toBe(0);
    expect(await redemptionsOf('user_id = $1', ['attacker'])).toHaveLength(3);
    // Each refusal is durable too, so a retry gets it even after Redis forgets.
    const { rows: refusals } = await stores.sql.query<{ answer: string }>('SELECT answer FROM redemption_refusal WHERE user_id = $1', ['attacker']);
    expect(refusals).toHaveLength(47);
    for (const { answer } of refusals) expect(answer).toMatch(/^insufficient:\d+:100$/);
    const me = await points.me('attacker');
    expect(me.pointsBalance).toBe(0);
    expect(me.redemptions.map((redemption) => redemption.id).sort()).toEqual(won.map(({ result }) => redeemed(result)!.id).sort());
    await expectPointsInvariants(stores);
  });
});

describe('a stock storm', () => {
  it('1,000 users race for 100 voucher codes: exactly 100 win, every code once', async () => {
    const codes = voucherCodes('JD100', 100);
    const goods = await points.createGoods('operator', { title: 'JD card 100', pointsCost: 10, stock: 100, voucherCodes: codes });
    expect(goods).toMatchObject({ pooled: true, stock: 100, remainingStock: 100 });
    const users = Array.from({ length: 1_000 }, (_, i) => `stormer-${i}`);
    await Promise.all(users.map((user) => points.award('operator', { userId: user, amount: 25 })));

    const results = await Promise.all(users.map((user) => points.tryRedeem(user, goods.id, 'storm')));
    for (const { errors, failed } of results) expect(errors ?? failed).toBeUndefined();
    const won = results.flatMap(({ result }) => redeemed(result) ?? []);
    expect(won).toHaveLength(100);
    expect(results.filter(({ result }) => result?.__typename === 'OutOfStock')).toHaveLength(900);
    const handedOut = won.map((redemption) => redemption.voucherCode);
    expect(new Set(handedOut).size).toBe(100);
    expect([...handedOut].sort()).toEqual(codes);

    // Each code is in exactly one durable redemption, the one its winner was told about.
    const durable = await redemptionsOf('goods_id = $1', [goods.id]);
    expect(new Map(durable.map((row) => [row.voucher_code, row.user_id]))).toEqual(new Map(won.map((redemption) => [redemption.voucherCode, redemption.userId])));
    for (const redemption of won) expect(await durableBalance(redemption.userId)).toBe(15);
    expect((await points.goods('stormer-0', goods.id))?.remainingStock).toBe(0);
    expect(await stores.redis.llen(goodsKeys(goods.id).codes)).toBe(0);
    await expectPointsInvariants(stores);
  });
});

describe('a flash sale', () => {
  it('240 buyers across its opening instant: none redeems before it, 60 units sold exactly once after it', async () => {
    const STOCK = 60;
    const buyers = Array.from({ length: 240 }, (_, i) => `flash-${i}`);
    await Promise.all(buyers.map((userId) => points.award('operator', { userId, amount: 10 })));
    const opensAtMs = Date.now() + 1_000;
    const opensAt = new Date(opensAtMs).toISOString();
    const goods = await points.createGoods('operator', { title: 'flash sale', pointsCost: 5, stock: STOCK, perUserLimit: 1, saleStartsAt: opensAt });

    // Each buyer first taps somewhere in the second around the opening, then again until served.
    const wait = (ms: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
    const early: RedeemResult[] = [];
    const finals = await Promise.all(
      buyers.map(async (userId, i) => {
        await wait(opensAtMs - 500 + (i % 100) * 10 - Date.now());
        for (;;) {
          const { result, errors, failed } = await points.tryRedeem(userId, goods.id, 'tap');
          expect(errors ?? failed).toBeUndefined();
          if (result?.__typename !== 'GoodsOffSale') return result;
          early.push(result);
          await wait(100);
        }
      }),
    );
    expect(early.length).toBeGreaterThan(0);
    for (const refusal of early) expect(refusal).toMatchObject({ __typename: 'GoodsOffSale', opensAt });
    expect(finals.filter(redeemed)).toHaveLength(STOCK);
    expect(finals.filter((result) => result?.__typename === 'OutOfStock')).toHaveLength(buyers.length - STOCK);

    const rows = await redemptionsOf('goods_id = $1', [goods.id]);
    expect(rows).toHaveLength(STOCK);
    expect(new Set(rows.map((row) => row.user_id)).size).toBe(STOCK);
    const { rows: first } = await stores.sql.query<{ at: Date }>('SELECT min(created_at) AS at FROM redemption WHERE goods_id = $1', [goods.id]);
    expect(first[0]!.at.getTime()).toBeGreaterThanOrEqual(opensAtMs);
    expect(await stores.redis.hget(goodsKeys(goods.id).meta, 'remaining')).toBe('0');
    await expectPointsInvariants(stores);
  });
});

describe('the per-user limit', () => {
  it('holds when every user fires many redemptions at once', async () => {
    const goods = await points.createGoods('operator', { title: 'coupon', pointsCost: 5, stock: 1_000, perUserLimit: 2 });
    const users = Array.from({ length: 20 }, (_, i) => `limited-${i}`);
    await Promise.all(users.map((user) => points.award('operator', { userId: user, amount: 100 })));

    const results = await Promise.all(users.flatMap((user) => Array.from({ length: 10 }, async (_, i) => ({ userId: user, ...(await points.tryRedeem(user, goods.id, `limited-${i}`)) }))));
    for (const { errors, failed } of results) expect(errors ?? failed).toBeUndefined();
    for (const user of users) {
      const ofUser = results.filter(({ userId }) => userId === user);
      expect(ofUser.filter(({ result }) => redeemed(result))).toHaveLength(2);
      const limited = ofUser.filter(({ result }) => result?.__typename === 'PerUserLimitReached');
      expect(limited).toHaveLength(8);
      for (const { result } of limited) expect(result).toMatchObject({ perUserLimit: 2 });
      expect(await durableBalance(user)).toBe(90);
    }
    expect(await redemptionsOf('goods_id = $1', [goods.id])).toHaveLength(40);
    await expectPointsInvariants(stores);
  });
});

describe('a requestId', () => {
  it('retried concurrently makes one redemption and one deduction, and every retry gets it', async () => {
    const goods = await points.createGoods('operator', { title: 'mug', pointsCost: 100, stock: 10, voucherCodes: voucherCodes('MUG', 10) });
    await points.award('operator', { userId: 'retrier', amount: 1_000 });
    const results = await Promise.all(Array.from({ length: 30 }, () => points.tryRedeem('retrier', goods.id, 'once')));
    for (const { errors, failed } of results) expect(errors ?? failed).toBeUndefined();
    const answers = results.map(({ result }) => redeemed(result));
    expect(new Set(answers.map((answer) => answer?.id)).size).toBe(1);
    expect(new Set(answers.map((answer) => answer?.voucherCode)).size).toBe(1);
    expect(answers[0]).toMatchObject({ pointsSpent: 100, requestId: 'once' });

    const later = redeemed((await points.tryRedeem('retrier', goods.id, 'once')).result);
    expect(later).toMatchObject({ id: answers[0]!.id, voucherCode: answers[0]!.voucherCode });
    expect(await durableBalance('retrier')).toBe(900);
    expect(await stores.redis.get(balanceKeys('retrier').meta)).toBe('900');
    expect(await redemptionsOf('user_id = $1', ['retrier'])).toHaveLength(1);
    await expectPointsInvariants(stores);
  });

  it('retried after Redis forgot its answer gets the same redemption from PostgreSQL, and nothing is deducted again', async () => {
    const goods = await points.createGoods('operator', { title: 'cap', pointsCost: 30, stock: 5, voucherCodes: voucherCodes('CAP', 5) });
    await points.award('operator', { userId: 'forgotten', amount: 100 });
    const first = redeemed((await points.tryRedeem('forgotten', goods.id, 'r1')).result)!;
    expect(first).toBeDefined();

    // The remembered answer expires (or is lost alone); concurrent retries reach PostgreSQL's unique (user, requestId).
    expect(await stores.redis.del(answerKey('forgotten', 'r1'))).toBe(1);
    const retries = await Promise.all(Array.from({ length: 5 }, () => points.tryRedeem('forgotten', goods.id, 'r1')));
    for (const { result, errors } of retries) {
      expect(errors).toBeUndefined();
      expect(result).toMatchObject({ __typename: 'Redemption', id: first.id, voucherCode: first.voucherCode });
    }
    expect(await durableBalance('forgotten')).toBe(70);
    const me = await points.me('forgotten');
    expect(me.pointsBalance).toBe(70);
    expect((await points.goods('forgotten', goods.id))?.remainingStock).toBe(4);
    expect(await redemptionsOf('user_id = $1', ['forgotten'])).toHaveLength(1);
    await expectPointsInvariants(stores);
  });

  it('keeps its refusal even after the balance grows, and is refused when reused for another goods item', async () => {
    const cheap = await points.createGoods('operator', { title: 'sticker', pointsCost: 10, stock: 100 });
    const dear = await points.createGoods('operator', { title: 'headphones', pointsCost: 500, stock: 100 });
    await points.award('operator', { userId: 'refused', amount: 100 });
    const refusal = (await points.tryRedeem('refused', dear.id, 'try-1')).result;
    expect(refusal).toMatchObject({ __typename: 'InsufficientPoints', balance: 100, pointsCost: 500 });
    await points.award('operator', { userId: 'refused', amount: 1_000 });
    expect((await points.tryRedeem('refused', dear.id, 'try-1')).result).toEqual(refusal);
    expect(redeemed((await points.tryRedeem('refused', dear.id, 'try-2')).result)).toMatchObject({ goodsId: dear.id, pointsSpent: 500 });

    const sticker = redeemed((await points.tryRedeem('refused', cheap.id, 'try-3')).result)!;
    expect(errorCodes(await points.raw(RedeemPointsDocument, { goodsId: dear.id, requestId: 'try-3' }, 'refused'))).toEqual(['BAD_USER_INPUT']);
    expect((await points.tryRedeem('refused', cheap.id, 'try-3')).result).toMatchObject({ __typename: 'Redemption', id: sticker.id, goodsId: cheap.id });
    expect(await durableBalance('refused')).toBe(590);
    await expectPointsInvariants(stores);
  });
});

describe('awards', () => {
  it('racing the rebuild of a balance that Redis does not hold are counted once, corrections included', async () => {
    const users = Array.from({ length: 100 }, (_, i) => `awarded-${i}`);
    const balanceOf = async (userId: string) => (await points.me(userId)).pointsBalance;
    // Each `me` finds no cached balance and rebuilds it from the ledger while the award commits.
    const awardWhileRebuilding = (amount: number) =>
      Promise.all(users.map((user) => Promise.all([points.award('operator', { userId: user, amount: amount }), balanceOf(user), balanceOf(user), balanceOf(user)])));

    await signAhead(users);
    const firsts = await awardWhileRebuilding(100);
    for (const [awarded] of firsts) expect(awarded).toBe(100);
    await stores.redis.del(...users.map((user) => balanceKeys(user).meta));
    const corrections = await awardWhileRebuilding(-40);
    for (const [awarded] of corrections) expect(awarded).toBe(60);

    for (const user of users) {
      expect(await durableBalance(user), user).toBe(60);
      expect(await stores.redis.get(balanceKeys(user).meta), user).toBe('60');
    }
    await expectPointsInvariants(stores);
  });
});
