import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { answerKey } from '../src/domain/points/store.ts';
import { signToken } from '../src/infra/auth/tokens.ts';
import {
  AwardPointsDocument,
  type AwardPointsMutationVariables,
  CreateGoodsDocument,
  type CreateGoodsInput,
  GoodsDocument,
  GoodsRedemptionsDocument,
  MeDocument,
  RedeemPointsDocument,
} from './gql/generated.ts';
import { type GraphqlResponse, errorCodes, gql } from './support/client.ts';
import { testEnv } from './support/env.ts';
import { stopAll } from './support/lifecycle.ts';
import { type PointsClient, pointsAt, voucherCodes } from './support/points.ts';
import { expectPointsInvariants } from './support/pointsInvariants.ts';
import { type ServerProcess, startServerProcess } from './support/server.ts';
import { type Stores, openStores, stateKeys } from './support/stores.ts';
import { tokenOf } from './support/tokens.ts';

const env = testEnv('points_input');
let server: ServerProcess;
let stores: Stores;
let points: PointsClient;
/** An operator's token, for the requests made with a token of the test's choosing. */
let admin: string;
/** A live goods item the refused requests must leave alone. */
let goodsId: string;

beforeAll(async () => {
  server = await startServerProcess(env.vars);
  stores = openStores(env);
  points = pointsAt(server.url);
  admin = await tokenOf('operator', { admin: true });
  goodsId = (await points.createGoods('operator', { title: 'gift card', pointsCost: 50, stock: 3, perUserLimit: 1, voucherCodes: ['IN-1', 'IN-2', 'IN-3'] })).id;
  await points.award('operator', { userId: 'holder', amount: 120 });
  expect((await points.tryRedeem('holder', goodsId, 'setup')).result?.__typename).toBe('Redemption');
});

afterAll(async () => {
  await stopAll(server);
  await stores?.cleanup();
});

/** Everything a request could change: every points table, every Redis key under the prefix and its value. */
async function state() {
  const tables = await Promise.all(
    ['points_account ORDER BY user_id', 'points_ledger ORDER BY id', 'goods ORDER BY id', 'voucher_code ORDER BY code', 'redemption ORDER BY id'].map(
      async (table) => (await stores.sql.query(`SELECT * FROM ${table}`)).rows,
    ),
  );
  const keys = await stateKeys(stores.redis, env.keyPrefix);
  const values = await Promise.all(
    keys.map(async (key) => {
      switch (await stores.redis.type(key)) {
        case 'string':
          return [key, await stores.redis.get(key)];
        case 'hash':
          return [key, await stores.redis.hgetall(key)];
        case 'list':
          return [key, await stores.redis.lrange(key, 0, -1)];
        case 'zset':
          return [key, await stores.redis.zrange(key, 0, -1, 'WITHSCORES')];
        default:
          return [key, await stores.redis.xlen(key)];
      }
    }),
  );
  // Delivery moves redemptions on by itself; it is not what these requests could change.
  const [accounts, ledger, goods, codes, redemptions] = tables;
  return { accounts, ledger, goods, codes, redemptions: redemptions!.map(({ id, user_id, voucher_code }) => ({ id, user_id, voucher_code })), values };
}

async function unchanged<T>(request: () => Promise<T>): Promise<T> {
  const before = await state();
  const result = await request();
  expect(await state()).toEqual(before);
  return result;
}

const award = (variables: AwardPointsMutationVariables, token?: string) => gql(server.url, AwardPointsDocument, variables, token);
const goodAward = { userId: 'someone', amount: 10, reason: 'watched a video', requestId: 'video-1' };

describe('awardPoints', () => {
  const badAwards: [string, Record<string, unknown>][] = [
    ['amount 0', { amount: 0 }],
    ['a float amount', { amount: 1.5 }],
    ['a string amount', { amount: '10' }],
    ['an amount beyond 32 bits', { amount: 2 ** 31 }],
    ['an empty reason', { reason: '' }],
    ['a blank reason', { reason: '   ' }],
    ['a reason of 201 characters', { reason: 'x'.repeat(201) }],
    ['an empty requestId', { requestId: '' }],
    ['a requestId of 129 characters', { requestId: 'r'.repeat(129) }],
    ['an empty userId', { userId: '' }],
    ['a userId of 129 characters', { userId: 'u'.repeat(129) }],
    ['no reason', { reason: undefined }],
    ['a null amount', { amount: null }],
  ];

  it.each(badAwards)('with %s is BAD_USER_INPUT and changes nothing', async (_name, change) => {
    const response = await unchanged(() => award({ ...goodAward, ...change } as AwardPointsMutationVariables, admin));
    expect(response.body.data?.awardPoints ?? null).toBeNull();
    expect(errorCodes(response), JSON.stringify(response.body.errors)).toEqual(['BAD_USER_INPUT']);
  });

  it('refuses a correction below zero, and a balance beyond 32 bits, changing nothing', async () => {
    for (const variables of [
      { ...goodAward, userId: 'holder', amount: -71, requestId: 'too-much' },
      { ...goodAward, userId: 'nobody-yet', amount: -1, requestId: 'negative-first' },
      { ...goodAward, userId: 'holder', amount: 2 ** 31 - 1, requestId: 'overflow' },
    ]) {
      const response = await unchanged(() => award(variables, admin));
      expect(errorCodes(response), JSON.stringify(response.body.errors)).toEqual(['BAD_USER_INPUT']);
    }
    expect((await points.me('holder')).pointsBalance).toBe(70);
  });

  it('UNAUTHENTICATED without a token or with a bad one, FORBIDDEN for a user who is not an operator', async () => {
    const forged = await signToken('another-secret-that-is-also-32-characters-long', { userId: 'mallory', roles: ['admin'] });
    for (const [token, code] of [
      [undefined, 'UNAUTHENTICATED'],
      ['not-a-jwt', 'UNAUTHENTICATED'],
      [forged, 'UNAUTHENTICATED'],
      [await tokenOf('mallory'), 'FORBIDDEN'],
    ] as const) {
      const response = await unchanged(() => award({ ...goodAward, userId: 'mallory', amount: 1_000_000 }, token));
      expect(response.body.data?.awardPoints ?? null).toBeNull();
      expect(errorCodes(response)).toEqual([code]);
    }
  });

  it('is idempotent per requestId, even concurrently, and refuses a requestId reused for another award', async () => {
    const answers = await Promise.all(Array.from({ length: 10 }, () => points.award('operator', { ...goodAward, userId: 'viewer', requestId: 'video-7' })));
    expect(answers).toEqual(Array(10).fill(10));
    const { rows } = await stores.sql.query('SELECT delta FROM points_ledger WHERE user_id = $1', ['viewer']);
    expect(rows).toEqual([{ delta: 10 }]);
    const reused = await unchanged(() => award({ ...goodAward, userId: 'viewer', amount: 99, requestId: 'video-7' }, admin));
    expect(errorCodes(reused)).toEqual(['BAD_USER_INPUT']);
    // A correction takes points back, down to exactly zero.
    expect(await points.award('operator', { ...goodAward, userId: 'viewer', amount: -10, requestId: 'undo-7' })).toBe(0);
    expect((await points.me('viewer')).pointsBalance).toBe(0);
    await expectPointsInvariants(stores);
  });
});

describe('createGoods', () => {
  const good: CreateGoodsInput = { title: 'mug', pointsCost: 10, stock: 2 };
  const badGoods: [string, Record<string, unknown>][] = [
    ['a negative cost', { pointsCost: -10 }],
    ['a zero cost', { pointsCost: 0 }],
    ['a negative stock', { stock: -1 }],
    ['a zero stock', { stock: 0 }],
    ['a stock of 1,000,001', { stock: 1_000_001 }],
    ['a negative per-user limit', { perUserLimit: -1 }],
    ['an empty title', { title: '' }],
    ['a title of 101 characters', { title: 't'.repeat(101) }],
    ['a stock other than the number of codes', { stock: 3, voucherCodes: ['A', 'B'] }],
    ['a code twice', { stock: 2, voucherCodes: ['A', 'A'] }],
    ['an empty code', { stock: 2, voucherCodes: ['A', ' '] }],
    ['an empty pool', { voucherCodes: [] }],
    ['10,001 codes', { stock: 10_001, voucherCodes: voucherCodes('MANY', 10_001) }],
    ['a code already in another pool', { stock: 2, voucherCodes: ['NEW-1', 'IN-2'] }],
    ['a float cost', { pointsCost: 2.5 }],
    ['no title', { title: undefined }],
  ];

  it.each(badGoods)('with %s is BAD_USER_INPUT and changes nothing', async (_name, change) => {
    const response = await unchanged(() => gql(server.url, CreateGoodsDocument, { input: { ...good, ...change } as CreateGoodsInput }, admin));
    expect(response.body.data?.createGoods ?? null).toBeNull();
    expect(errorCodes(response), JSON.stringify(response.body.errors)).toEqual(['BAD_USER_INPUT']);
  });

  it('takes the largest pool, 10,000 codes, in hand-out order', async () => {
    const codes = voucherCodes('FULL', 10_000);
    const goods = await points.createGoods('operator', { title: 'big pool', pointsCost: 1, stock: codes.length, voucherCodes: codes });
    const { rows } = await stores.sql.query<{ code: string }>('SELECT code FROM voucher_code WHERE goods_id = $1 ORDER BY position', [goods.id]);
    expect(rows.map((row) => row.code)).toEqual(codes);
  });

  it('UNAUTHENTICATED without a token, FORBIDDEN for a user who is not an operator', async () => {
    for (const [token, code] of [
      [undefined, 'UNAUTHENTICATED'],
      [await tokenOf('mallory'), 'FORBIDDEN'],
    ] as const) {
      const response = await unchanged(() => gql(server.url, CreateGoodsDocument, { input: good }, token));
      expect(errorCodes(response)).toEqual([code]);
    }
  });
});

describe('redeemPoints and the reads', () => {
  it('NotFound for goods that do not exist, leaving no key behind', async () => {
    for (const id of ['00000000-0000-0000-0000-000000000000', 'nope', '{shop}:goods', '*', 'a:b']) {
      const { result } = await unchanged(() => points.tryRedeem('holder', id, `missing-${id}`));
      expect(result?.__typename, id).toBe('NotFound');
      expect(await unchanged(() => points.goods('operator', id, { admin: true }))).toBeNull();
    }
  });

  it('BAD_USER_INPUT for a missing, empty or oversized goodsId or requestId', async () => {
    for (const variables of [{}, { goodsId }, { requestId: 'r' }, { goodsId, requestId: '' }, { goodsId, requestId: 'r'.repeat(129) }, { goodsId: 'g'.repeat(129), requestId: 'r' }]) {
      const response = await unchanged(() => points.raw(RedeemPointsDocument, variables as { goodsId: string; requestId: string }, 'holder'));
      expect(new Set(errorCodes(response)), JSON.stringify(variables)).toEqual(new Set(['BAD_USER_INPUT']));
    }
  });

  it('BAD_USER_INPUT for a requestId reused for another goods item, from Redis and, once Redis forgot it, from PostgreSQL', async () => {
    const other = (await points.createGoods('operator', { title: 'pen', pointsCost: 1_000, stock: 5 })).id;
    // 'setup' redeemed goodsId; 'too-poor' was refused for the other item.
    expect((await points.tryRedeem('holder', other, 'too-poor')).result?.__typename).toBe('InsufficientPoints');
    for (const [requestId, item] of [
      ['setup', other],
      ['too-poor', goodsId],
    ] as const) {
      const reuse = () => points.raw(RedeemPointsDocument, { goodsId: item, requestId }, 'holder');
      const refused = (response: GraphqlResponse<unknown>) => {
        expect(errorCodes(response), requestId).toEqual(['BAD_USER_INPUT']);
        expect(response.body.errors?.[0]?.message).toContain('already used to redeem another goods item');
      };
      refused(await unchanged(reuse));
      // Forgotten by Redis, the script tries the item; PostgreSQL's first answer refuses the
      // entry, and the keys it touched are dropped to be rebuilt: nothing durable changes.
      await stores.redis.del(answerKey('holder', requestId));
      const { values: _cached, ...durable } = await state();
      refused(await reuse());
      const { values: _rebuilt, ...after } = await state();
      expect(after).toEqual(durable);
      expect((await points.me('holder')).pointsBalance).toBe(70);
    }
  });

  it('UNAUTHENTICATED without a token for every operation; FORBIDDEN for goodsRedemptions to a user', async () => {
    const operations: [string, (token?: string) => Promise<GraphqlResponse<unknown>>][] = [
      ['redeemPoints', (token) => gql(server.url, RedeemPointsDocument, { goodsId, requestId: 'anon' }, token)],
      ['me', (token) => gql(server.url, MeDocument, {}, token)],
      ['goods', (token) => gql(server.url, GoodsDocument, { id: goodsId }, token)],
      ['goodsRedemptions', (token) => gql(server.url, GoodsRedemptionsDocument, { goodsId }, token)],
    ];
    for (const [name, run] of operations) expect(errorCodes(await unchanged(() => run())), name).toEqual(['UNAUTHENTICATED']);
    expect(errorCodes(await unchanged(() => points.raw(GoodsRedemptionsDocument, { goodsId }, 'holder')))).toEqual(['FORBIDDEN']);
  });

  it('lets operators page through a goods item by status, with bounded pages', async () => {
    await points.award('operator', { userId: 'second', amount: 50 });
    const second = (await points.tryRedeem('second', goodsId, 's')).result;
    expect(second?.__typename).toBe('Redemption');
    const all = await points.redemptions('operator', { goodsId });
    expect(all.map((redemption) => redemption.userId)).toEqual(['holder', 'second']);
    expect((await points.redemptions('operator', { goodsId, limit: 1, offset: 1 })).map((r) => r.userId)).toEqual(['second']);
    const byStatus = await Promise.all((['PENDING', 'DELIVERED'] as const).map((status) => points.redemptions('operator', { goodsId, status })));
    expect(
      byStatus
        .flat()
        .map((redemption) => redemption.id)
        .sort(),
    ).toEqual(all.map((redemption) => redemption.id).sort());
    for (const variables of [
      { goodsId, limit: 0 },
      { goodsId, limit: 501 },
      { goodsId, offset: -1 },
    ]) {
      expect(errorCodes(await gql(server.url, GoodsRedemptionsDocument, variables, admin)), JSON.stringify(variables)).toEqual(['BAD_USER_INPUT']);
    }
    // The per-user limit (1) holds for both; the third code is still there.
    expect((await points.tryRedeem('second', goodsId, 's2')).result).toMatchObject({ __typename: 'PerUserLimitReached', perUserLimit: 1 });
    expect(await points.goods('operator', goodsId, { admin: true })).toMatchObject({ stock: 3, remainingStock: 1, pooled: true });
    await expectPointsInvariants(stores);
  });
});
