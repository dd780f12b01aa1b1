import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PointsStore, answerKey, goodsKeys } from '../src/domain/points/store.ts';
import { signToken } from '../src/infra/auth/tokens.ts';
import { Scripts } from '../src/infra/redis/scripts.ts';
import {
  AwardPointsDocument,
  type AwardPointsMutationVariables,
  CreateGoodsDocument,
  type CreateGoodsInput,
  GoodsDocument,
  GoodsRedemptionsDocument,
  MeDocument,
  RedeemPointsDocument,
  RestockGoodsDocument,
  type RestockGoodsInput,
  UpdateGoodsDocument,
  type UpdateGoodsInput,
} from './gql/generated.ts';
import { type GraphqlResponse, errorCodes, gql } from './support/client.ts';
import { testEnv } from './support/env.ts';
import { stopAll } from './support/lifecycle.ts';
import { type PointsClient, pointsAt, voucherCodes } from './support/points.ts';
import { expectPointsInvariants } from './support/pointsInvariants.ts';
import { waitFor } from './support/poll.ts';
import { type ServerProcess, startServerProcess } from './support/server.ts';
import { type Stores, openStores, stateKeys } from './support/stores.ts';
import { tokenOf } from './support/tokens.ts';

// The journal sweeper commits an entry no request waits on 1.5 s after it was made (3 s by
// default): time enough for a price change to come first (a test below), and soon after.
const env = testEnv('points_input', { JOURNAL_SWEEP_AFTER_MS: '1500', SWEEP_INTERVAL_MS: '200' });
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

/** Every Redis key under the prefix and its value. */
async function redisValues() {
  const keys = await stateKeys(stores.redis, env.keyPrefix);
  return Promise.all(
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
}

/**
 * Everything a request could change: every points table, every Redis key under the prefix and its value.
 * Each table as one text, a row a line, made by PostgreSQL: the 10,000-code pools below would
 * otherwise be read and compared as objects, row by row, around every refused request.
 */
async function state() {
  const tables: [table: string, order: string, row?: string][] = [
    ['points_account', 'user_id'],
    ['points_ledger', 'id'],
    ['goods', 'id'],
    ['voucher_code', 'code'],
    // Delivery moves redemptions on by itself; it is not what these requests could change.
    ['redemption', 'id', '(id, user_id, voucher_code)'],
    ['goods_restock', 'id'],
    ['goods_change', 'id'],
    ['goods_stock_transfer', 'id'],
    ['goods_bucket_stock', 'goods_id'],
    ['redemption_refusal', 'user_id, request_id'],
    ['operator_request', 'request_id'],
  ];
  const [{ rows }, values] = await Promise.all([
    stores.sql.query<Record<string, string | null>>(
      `SELECT ${tables.map(([table, order, row = 't']) => `(SELECT string_agg(${row}::text, E'\\n' ORDER BY ${order}) FROM ${table} t) AS ${table}`).join(', ')}`,
    ),
    redisValues(),
  ]);
  const [accounts, ledger, goods, codes, redemptions, ...stockAndHistory] = tables.map(([table]) => rows[0]![table] ?? '');
  return { accounts, ledger, goods, codes, redemptions, stockAndHistory, values };
}

async function unchanged<T>(request: () => Promise<T>): Promise<T> {
  const before = await state();
  const result = await request();
  expect(await state()).toEqual(before);
  return result;
}

/** The callers an operator's mutation refuses, each with its code: no token, a broken one, a user who is not an operator. */
async function refusedCallers(): Promise<[string | undefined, string][]> {
  return [
    [undefined, 'UNAUTHENTICATED'],
    ['not-a-jwt', 'UNAUTHENTICATED'],
    [await tokenOf('mallory'), 'FORBIDDEN'],
  ];
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
    ['two codes that read as one (a zero-width space)', { stock: 2, voucherCodes: ['Z-1', 'Z-1\u200B'] }],
    ['a code with a space inside', { stock: 1, voucherCodes: ['Z 1'] }],
    ['a title of only a zero-width space', { title: '\u200B' }],
    ['a title of only joiners', { title: '\u200D\u200C' }],
    ['a title with a bidi override', { title: '\u202Eevil' }],
    ['an empty pool', { voucherCodes: [] }],
    ['10,001 codes', { stock: 10_001, voucherCodes: voucherCodes('MANY', 10_001) }],
    ['a code already in another pool', { stock: 2, voucherCodes: ['NEW-1', 'IN-2'] }],
    ['a float cost', { pointsCost: 2.5 }],
    ['no title', { title: undefined }],
    ['a sale that ends as it starts', { saleStartsAt: '2030-01-01T10:00:00Z', saleEndsAt: '2030-01-01T10:00:00Z' }],
    ['a sale that ends before it starts', { saleStartsAt: '2030-01-01T10:00:00Z', saleEndsAt: '2030-01-01T09:00:00Z' }],
    ['a sale start that is no instant', { saleStartsAt: 'tomorrow at ten' }],
    ['a sale that has already ended', { saleEndsAt: '2020-01-01T00:00:00Z' }],
  ];

  it.each(badGoods)('with %s is BAD_USER_INPUT and changes nothing', async (_name, change) => {
    const response = await unchanged(() => gql(server.url, CreateGoodsDocument, { input: { ...good, ...change } as CreateGoodsInput }, admin));
    expect(response.body.data?.createGoods ?? null).toBeNull();
    expect(errorCodes(response), JSON.stringify(response.body.errors)).toEqual(['BAD_USER_INPUT']);
  });

  it('creates once per requestId, even concurrently, its codes pooled once; the requestId for other terms is refused', async () => {
    const input = { title: 'retried card', pointsCost: 5, stock: 3, voucherCodes: ['RETRY-1', 'RETRY-2', 'RETRY-3'], requestId: 'console-42' };
    // A console that timed out and sent again, several times, some at once.
    const answers = await Promise.all(Array.from({ length: 8 }, () => gql(server.url, CreateGoodsDocument, { input }, admin)));
    const ids = new Set(answers.map((answer) => answer.body.data?.createGoods.id));
    expect(answers.flatMap((answer) => answer.body.errors ?? [])).toEqual([]);
    expect(ids.size).toBe(1);
    const later = await points.createGoods('operator', input);
    expect(later.id).toBe([...ids][0]);
    const { rows } = await stores.sql.query('SELECT id FROM goods WHERE title = $1', [input.title]);
    expect(rows).toHaveLength(1);

    const other = await unchanged(() => gql(server.url, CreateGoodsDocument, { input: { ...input, pointsCost: 6 } }, admin));
    expect(errorCodes(other)).toEqual(['BAD_USER_INPUT']);
    expect(other.body.errors?.[0]?.extensions?.issues).toMatchObject([{ path: ['input', 'requestId'], code: 'REQUEST_ID_OF_ANOTHER_CREATE' }]);
    // Another operator's requestId is their own.
    const theirs = await points.createGoods('operator-2', { ...input, voucherCodes: undefined, stock: 1 });
    expect(theirs.id).not.toBe(later.id);
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
    // Delivery may move a redemption from PENDING to DELIVERED between the two reads, so
    // the split is compared once no redemption moved in between.
    const allIds = JSON.stringify(all.map((redemption) => redemption.id).sort());
    await waitFor("the PENDING and DELIVERED pages to split the goods item's redemptions", async () => {
      const byStatus = [];
      for (const status of ['PENDING', 'DELIVERED'] as const) byStatus.push(...(await points.redemptions('operator', { goodsId, status })));
      return JSON.stringify(byStatus.map((redemption) => redemption.id).sort()) === allIds;
    });
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

describe('restockGoods', () => {
  const restock = (input: RestockGoodsInput, token?: string) => gql(server.url, RestockGoodsDocument, { input }, token);

  it('adds units a sold-out item hands out next, in order, once per requestId even concurrently', async () => {
    const mug = await points.createGoods('operator', { title: 'restocked mug', pointsCost: 5, stock: 2 });
    await points.award('operator', { userId: 'restock-buyer', amount: 100 });
    for (const requestId of ['m1', 'm2']) expect((await points.tryRedeem('restock-buyer', mug.id, requestId)).result?.__typename).toBe('Redemption');
    expect((await points.tryRedeem('restock-buyer', mug.id, 'm3')).result?.__typename).toBe('OutOfStock');

    const answers = await Promise.all(Array.from({ length: 10 }, () => points.restock('operator', { goodsId: mug.id, requestId: 'spring', units: 3 })));
    for (const answer of answers) expect(answer).toMatchObject({ __typename: 'Goods', stock: 5, remainingStock: 3 });
    const { rows: restocks } = await stores.sql.query('SELECT units, created_by FROM goods_restock WHERE goods_id = $1', [mug.id]);
    expect(restocks).toEqual([{ units: 3, created_by: 'operator' }]);

    // The refused requestId keeps its answer; new ones take the new units, 2, 3 and 4.
    expect((await points.tryRedeem('restock-buyer', mug.id, 'm3')).result?.__typename).toBe('OutOfStock');
    for (const requestId of ['m4', 'm5', 'm6']) expect((await points.tryRedeem('restock-buyer', mug.id, requestId)).result?.__typename).toBe('Redemption');
    expect((await points.tryRedeem('restock-buyer', mug.id, 'm7')).result?.__typename).toBe('OutOfStock');
    const { rows: units } = await stores.sql.query<{ stock_unit: number }>('SELECT stock_unit FROM redemption WHERE goods_id = $1 ORDER BY stock_unit', [mug.id]);
    expect(units.map((row) => row.stock_unit)).toEqual([0, 1, 2, 3, 4]);

    const reused = await unchanged(() => restock({ goodsId: mug.id, requestId: 'spring', units: 4 }, admin));
    expect(errorCodes(reused)).toEqual(['BAD_USER_INPUT']);
    expect(reused.body.errors?.[0]?.extensions?.issues).toEqual([expect.objectContaining({ code: 'REQUEST_ID_OF_ANOTHER_RESTOCK', path: ['input', 'requestId'] })]);
    await expectPointsInvariants(stores);
  });

  it('adds new codes to a pool, handed out after the codes it had', async () => {
    const card = await points.createGoods('operator', { title: 'restocked card', pointsCost: 1, stock: 2, voucherCodes: ['RS-1', 'RS-2'] });
    expect(await points.restock('operator', { goodsId: card.id, units: 2, voucherCodes: ['RS-3', 'RS-4'] })).toMatchObject({ stock: 4, remainingStock: 4 });
    await points.award('operator', { userId: 'card-buyer', amount: 10 });
    const codes: (string | null | undefined)[] = [];
    for (const requestId of ['c1', 'c2', 'c3', 'c4']) {
      const { result } = await points.tryRedeem('card-buyer', card.id, requestId);
      codes.push(result?.__typename === 'Redemption' ? result.voucherCode : result?.__typename);
    }
    expect(codes).toEqual(['RS-1', 'RS-2', 'RS-3', 'RS-4']);
    expect((await points.tryRedeem('card-buyer', card.id, 'c5')).result?.__typename).toBe('OutOfStock');
    await expectPointsInvariants(stores);
  });

  it('takes the largest restock, 10,000 codes into one bucket, handed out after the pool it had', async () => {
    const big = await points.createGoods('operator', { title: 'big restock', pointsCost: 1, stock: 1, voucherCodes: ['BIG-FIRST'] });
    const codes = voucherCodes('BIGRS', 10_000);
    expect(await points.restock('operator', { goodsId: big.id, units: codes.length, voucherCodes: codes })).toMatchObject({ stock: 10_001, remainingStock: 10_001 });
    expect(await stores.redis.lrange(goodsKeys(big.id).codes, 0, -1)).toEqual(['BIG-FIRST', ...codes]);
    await expectPointsInvariants(stores);
  });

  it('tells a replay from another restock by every code, whatever the codes hold', async () => {
    const card = await points.createGoods('operator', { title: 'comma card', pointsCost: 1, stock: 1, voucherCodes: ['NL-0'] });
    await points.restock('operator', { goodsId: card.id, requestId: 'nl', units: 2, voucherCodes: ['NL-1,NL-2', 'NL-3'] });
    const other = await unchanged(() => restock({ goodsId: card.id, requestId: 'nl', units: 2, voucherCodes: ['NL-1', 'NL-2,NL-3'] }, admin));
    expect(other.body.errors?.[0]?.extensions?.issues).toEqual([expect.objectContaining({ code: 'REQUEST_ID_OF_ANOTHER_RESTOCK' })]);
  });

  it('NotFound for an item that does not exist, changing nothing', async () => {
    const response = await unchanged(() => restock({ goodsId: 'no-such-goods', requestId: 'r', units: 1 }, admin));
    expect(response.body.data?.restockGoods).toMatchObject({ __typename: 'NotFound', code: 'NOT_FOUND' });
  });

  const badRestocks: [string, Record<string, unknown>, string?][] = [
    ['zero units', { units: 0 }],
    ['negative units', { units: -1 }],
    ['1,000,001 units', { units: 1_000_001 }],
    ['a float', { units: 1.5 }],
    ['an empty requestId', { requestId: '' }],
    ['a requestId of 129 characters', { requestId: 'r'.repeat(129) }],
    ['an empty goodsId', { goodsId: '' }],
    ['units other than the number of codes', { units: 2, voucherCodes: ['NEW-A'] }],
    ['a code twice', { units: 2, voucherCodes: ['NEW-A', 'NEW-A'] }],
    ['a pooled item without codes', {}, 'VOUCHER_CODES_REQUIRED'],
    ['a code already in its pool', { units: 1, voucherCodes: ['IN-1'] }, 'VOUCHER_CODE_IN_ANOTHER_POOL'],
    ['two codes that read as one (a zero-width space)', { units: 2, voucherCodes: ['NEW-A', 'NEW-A\u200B'] }],
    ['a code with a space inside', { units: 1, voucherCodes: ['NEW A'] }, 'VOUCHER_CODE_NOT_VISIBLE'],
    ['a code with a no-break space', { units: 1, voucherCodes: ['NEW\u00A0A'] }, 'VOUCHER_CODE_NOT_VISIBLE'],
    ['a code with a line break', { units: 2, voucherCodes: ['NEW-A\nNEW-B', 'NEW-C'] }, 'VOUCHER_CODE_NOT_VISIBLE'],
    ['a code with a zero-width joiner', { units: 1, voucherCodes: ['NEW-A\u200D'] }, 'VOUCHER_CODE_NOT_VISIBLE'],
    ['a code with a soft hyphen', { units: 1, voucherCodes: ['NEW\u00ADA'] }, 'VOUCHER_CODE_NOT_VISIBLE'],
    ['no units', { units: undefined }],
  ];

  it.each(badRestocks)('with %s is BAD_USER_INPUT and changes nothing', async (_name, change, issue) => {
    const input = { goodsId, requestId: 'bad-restock', units: 1, ...change } as RestockGoodsInput;
    const response = await unchanged(() => restock(input, admin));
    expect(response.body.data?.restockGoods ?? null).toBeNull();
    expect(errorCodes(response), JSON.stringify(response.body.errors)).toEqual(['BAD_USER_INPUT']);
    if (issue) expect(response.body.errors?.[0]?.extensions?.issues).toEqual([expect.objectContaining({ code: issue })]);
  });

  it('refuses codes for an item without a pool, and a stock past 32 bits', async () => {
    const plain = (await points.createGoods('operator', { title: 'plain', pointsCost: 1, stock: 1_000_000 })).id;
    const issueOf = (response: GraphqlResponse<unknown>) => {
      expect(errorCodes(response)).toEqual(['BAD_USER_INPUT']);
      return ((response.body.errors?.[0]?.extensions?.issues ?? []) as { code: string }[]).map((issue) => issue.code);
    };
    expect(issueOf(await unchanged(() => restock({ goodsId: plain, requestId: 'codes', units: 1, voucherCodes: ['PLAIN-1'] }, admin)))).toEqual(['VOUCHER_CODES_NOT_POOLED']);
    // 2,146 restocks of a million would pass 2^31 − 1, the column's bound: reached directly.
    await stores.sql.query('UPDATE goods SET stock = 2147000000 WHERE id = $1', [plain]);
    expect(issueOf(await unchanged(() => restock({ goodsId: plain, requestId: 'huge', units: 1_000_000 }, admin)))).toEqual(['STOCK_ABOVE_MAX']);
    await stores.sql.query('UPDATE goods SET stock = 1000000 WHERE id = $1', [plain]);
  });

  it('UNAUTHENTICATED without a token or with a bad one, FORBIDDEN for a user who is not an operator', async () => {
    for (const [token, code] of await refusedCallers()) {
      const response = await unchanged(() => restock({ goodsId, requestId: 'mallory', units: 1, voucherCodes: ['MAL-1'] }, token));
      expect(response.body.data?.restockGoods ?? null).toBeNull();
      expect(errorCodes(response)).toEqual([code]);
    }
  });
});

describe('updateGoods', () => {
  const update = (id: string, input: UpdateGoodsInput, token?: string) => gql(server.url, UpdateGoodsDocument, { goodsId: id, input }, token);

  it('changes the price the next redemption pays, keeping what earlier ones paid, with a history', async () => {
    const tea = await points.createGoods('operator', { title: 'tea', pointsCost: 10, stock: 5 });
    await points.award('operator', { userId: 'tea-buyer', amount: 100 });
    expect((await points.tryRedeem('tea-buyer', tea.id, 't1')).result).toMatchObject({ pointsSpent: 10 });
    expect(await points.updateGoods('operator', tea.id, { pointsCost: 25, title: 'green tea' })).toMatchObject({ pointsCost: 25, title: 'green tea', onSale: true });
    expect((await points.tryRedeem('tea-buyer', tea.id, 't2')).result).toMatchObject({ pointsSpent: 25 });
    expect((await points.me('tea-buyer')).pointsBalance).toBe(65);
    // Nothing new: no history entry. Redis lost: the rebuild keeps the new price.
    await points.updateGoods('operator', tea.id, { pointsCost: 25 });
    await stores.redis.del(goodsKeys(tea.id).meta);
    expect((await points.tryRedeem('tea-buyer', tea.id, 't3')).result).toMatchObject({ pointsSpent: 25 });
    const { rows } = await stores.sql.query('SELECT title, points_cost, on_sale, changed_by FROM goods_change WHERE goods_id = $1 ORDER BY changed_at', [tea.id]);
    expect(rows).toEqual([
      { title: 'tea', points_cost: 10, on_sale: true, changed_by: 'operator' },
      { title: 'green tea', points_cost: 25, on_sale: true, changed_by: 'operator' },
    ]);
    await expectPointsInvariants(stores);
  });

  it('commits a redemption made just before a price change at the price it was made at', async () => {
    const soap = await points.createGoods('operator', { title: 'soap', pointsCost: 10, stock: 5 });
    await points.award('operator', { userId: 'soap-buyer', amount: 100 });
    // The balance and the item in Redis, as a first request leaves them.
    expect((await points.me('soap-buyer')).pointsBalance).toBe(100);
    expect((await points.goods('soap-buyer', soap.id))?.remainingStock).toBe(5);
    // The script runs at 10 and journals; the entry waits for the journal sweeper.
    const store = new PointsStore(stores.redis, new Scripts(stores.redis), 1);
    expect((await store.redeem('soap-buyer', soap.id, 'before-change', randomUUID(), false)).kind).toBe('redeemed');
    await points.updateGoods('operator', soap.id, { pointsCost: 25 });
    expect((await stores.sql.query('SELECT 1 FROM redemption WHERE goods_id = $1', [soap.id])).rowCount, 'committed only after the price change').toBe(0);
    await waitFor('the sweeper to commit the redemption', async () => (await stores.sql.query('SELECT 1 FROM redemption WHERE goods_id = $1', [soap.id])).rowCount === 1, {
      timeoutMs: 15_000,
    });
    const { rows } = await stores.sql.query('SELECT points_spent FROM redemption WHERE goods_id = $1', [soap.id]);
    expect(rows).toEqual([{ points_spent: 10 }]);
    expect((await points.tryRedeem('soap-buyer', soap.id, 'before-change')).result).toMatchObject({ __typename: 'Redemption', pointsSpent: 10 });
    expect((await points.tryRedeem('soap-buyer', soap.id, 'after-change')).result).toMatchObject({ __typename: 'Redemption', pointsSpent: 25 });
    expect((await points.me('soap-buyer')).pointsBalance).toBe(65);
    await expectPointsInvariants(stores);
  });

  it('refuses a redemption at a price the item never had, and redeems it again at its price', async () => {
    const comb = await points.createGoods('operator', { title: 'comb', pointsCost: 10, stock: 5 });
    await points.award('operator', { userId: 'comb-buyer', amount: 100 });
    expect((await points.goods('comb-buyer', comb.id))?.remainingStock).toBe(5);
    // A copy in Redis that went stale (an operator's change that never reached it, say).
    await stores.redis.hset(goodsKeys(comb.id).meta, 'pointsCost', 1);
    expect((await points.tryRedeem('comb-buyer', comb.id, 'stale')).result).toMatchObject({ __typename: 'Redemption', pointsSpent: 10 });
    expect(await stores.redis.hget(goodsKeys(comb.id).meta, 'pointsCost')).toBe('10');
    expect((await points.me('comb-buyer')).pointsBalance).toBe(90);
    await expectPointsInvariants(stores);
  });

  it('takes an item off sale: redemptions answer GoodsOffSale and spend nothing, until it is back', async () => {
    const pen = await points.createGoods('operator', { title: 'pen', pointsCost: 3, stock: 2 });
    await points.award('operator', { userId: 'pen-buyer', amount: 10 });
    expect(await points.updateGoods('operator', pen.id, { onSale: false })).toMatchObject({ onSale: false, remainingStock: 2 });
    const refused = await unchanged(() => points.tryRedeem('pen-buyer', pen.id, 'p1'));
    expect(refused.result).toMatchObject({ __typename: 'GoodsOffSale', opensAt: null, endedAt: null, message: 'this goods item is off sale for now' });
    // Also after Redis lost the item: the rebuild reads the sale from PostgreSQL.
    await stores.redis.del(goodsKeys(pen.id).meta);
    expect((await points.tryRedeem('pen-buyer', pen.id, 'p1')).result?.__typename).toBe('GoodsOffSale');
    await points.updateGoods('operator', pen.id, { onSale: true });
    // The same requestId was never answered, so it redeems now.
    const first = (await points.tryRedeem('pen-buyer', pen.id, 'p1')).result;
    expect(first).toMatchObject({ __typename: 'Redemption', pointsSpent: 3 });
    expect((await points.me('pen-buyer')).pointsBalance).toBe(7);
    // Off sale again, with the answer forgotten by Redis (its TTL ran out): a retry still gets its redemption.
    await points.updateGoods('operator', pen.id, { onSale: false });
    await stores.redis.del(answerKey('pen-buyer', 'p1'));
    expect((await points.tryRedeem('pen-buyer', pen.id, 'p1')).result).toMatchObject({ __typename: 'Redemption', id: first?.__typename === 'Redemption' ? first.id : '' });
    await expectPointsInvariants(stores);
  });

  it('creates an item off sale, ready before its sale opens: GoodsOffSale until it is put on sale', async () => {
    const lamp = await points.createGoods('operator', { title: 'lamp', pointsCost: 4, stock: 1, onSale: false });
    expect(lamp).toMatchObject({ onSale: false, remainingStock: 1 });
    await points.award('operator', { userId: 'lamp-buyer', amount: 10 });
    expect((await unchanged(() => points.tryRedeem('lamp-buyer', lamp.id, 'l1'))).result).toMatchObject({ __typename: 'GoodsOffSale' });
    await points.updateGoods('operator', lamp.id, { onSale: true });
    expect((await points.tryRedeem('lamp-buyer', lamp.id, 'l1')).result).toMatchObject({ __typename: 'Redemption', pointsSpent: 4 });
    await expectPointsInvariants(stores);
  });

  it('opens and closes the sale at its window, by the server clock: GoodsOffSale with opensAt before, endedAt after the end', async () => {
    await points.award('operator', { userId: 'kite-buyer', amount: 10 });
    // Time for the refusals below before the start, and for a redemption before the end.
    const startsAtMs = Date.now() + 2_000;
    const window = { saleStartsAt: new Date(startsAtMs).toISOString(), saleEndsAt: new Date(startsAtMs + 1_000).toISOString() };
    const kite = await points.createGoods('operator', { title: 'kite', pointsCost: 2, stock: 3, ...window });
    expect(kite).toMatchObject({ onSale: true, ...window });
    const early = await unchanged(() => points.tryRedeem('kite-buyer', kite.id, 'k1'));
    expect(early.result).toMatchObject({ __typename: 'GoodsOffSale', opensAt: window.saleStartsAt, endedAt: null });
    // Also after Redis lost the item: the rebuild reads the window from PostgreSQL.
    await stores.redis.del(goodsKeys(kite.id).meta);
    expect((await points.tryRedeem('kite-buyer', kite.id, 'k1')).result).toMatchObject({ __typename: 'GoodsOffSale', opensAt: window.saleStartsAt });
    // A stale copy in Redis without the window sells; PostgreSQL refuses it, and the copy rebuilt answers.
    await stores.redis.hset(goodsKeys(kite.id).meta, 'saleStartsAtMs', '');
    expect((await points.tryRedeem('kite-buyer', kite.id, 'k1')).result).toMatchObject({ __typename: 'GoodsOffSale', opensAt: window.saleStartsAt });
    expect(Date.now()).toBeLessThan(startsAtMs);
    await waitFor('the sale to open', async () => (await points.tryRedeem('kite-buyer', kite.id, 'k1')).result?.__typename === 'Redemption', { timeoutMs: 5_000, intervalMs: 50 });
    const { rows } = await stores.sql.query<{ created_at: Date }>('SELECT created_at FROM redemption WHERE goods_id = $1', [kite.id]);
    expect(rows.map((row) => row.created_at.getTime() >= startsAtMs)).toEqual([true]);
    await new Promise((resolve) => setTimeout(resolve, startsAtMs + 1_000 - Date.now()));
    expect((await unchanged(() => points.tryRedeem('kite-buyer', kite.id, 'k2'))).result).toMatchObject({
      __typename: 'GoodsOffSale',
      opensAt: null,
      endedAt: window.saleEndsAt,
      message: 'the sale of this goods item has ended',
    });
    expect((await points.me('kite-buyer')).pointsBalance).toBe(8);
    await expectPointsInvariants(stores);
  });

  it('moves the sale window: a later start takes the item off sale until then, a start passed opens it, with a history', async () => {
    const yoyo = await points.createGoods('operator', { title: 'yoyo', pointsCost: 1, stock: 5 });
    await points.award('operator', { userId: 'yoyo-buyer', amount: 10 });
    const later = '2099-01-01T02:00:00.000Z';
    expect(await points.updateGoods('operator', yoyo.id, { saleStartsAt: later })).toMatchObject({ saleStartsAt: later, saleEndsAt: null });
    expect((await unchanged(() => points.tryRedeem('yoyo-buyer', yoyo.id, 'y1'))).result).toMatchObject({ __typename: 'GoodsOffSale', opensAt: later });
    // An end before the start it has is refused, and changes nothing.
    expect(errorCodes(await unchanged(() => update(yoyo.id, { saleEndsAt: '2098-01-01T00:00:00Z' }, admin)))).toEqual(['BAD_USER_INPUT']);
    await points.updateGoods('operator', yoyo.id, { saleStartsAt: '2020-01-01T00:00:00Z', saleEndsAt: '2099-01-01T00:00:00Z' });
    expect((await points.tryRedeem('yoyo-buyer', yoyo.id, 'y1')).result).toMatchObject({ __typename: 'Redemption', pointsSpent: 1 });
    // An item is not created with its sale over; an update with an end passed ends it now,
    // so no redemption made before the update is dated after the end.
    const refused = await unchanged(() => gql(server.url, CreateGoodsDocument, { input: { title: 'yoyo of 1970', pointsCost: 1, stock: 1, saleEndsAt: '1970-01-01T00:00:00Z' } }, admin));
    expect(refused.body.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', issues: [{ path: ['input', 'saleEndsAt'], code: 'SALE_ENDS_IN_THE_PAST' }] });
    const ended = await points.createGoods('operator', { title: 'yoyo of 1970', pointsCost: 1, stock: 2 });
    expect((await points.tryRedeem('yoyo-buyer', ended.id, 'y2')).result).toMatchObject({ __typename: 'Redemption' });
    const endedAt = (await points.updateGoods('operator', ended.id, { saleEndsAt: '1970-01-01T00:00:00Z' })).saleEndsAt;
    const { rows: made } = await stores.sql.query<{ created_at: Date }>('SELECT created_at FROM redemption WHERE goods_id = $1', [ended.id]);
    expect(Date.parse(endedAt!)).toBeGreaterThan(made[0]!.created_at.getTime());
    expect(Date.parse(endedAt!)).toBeLessThanOrEqual(Date.now() + 1_000);
    expect((await unchanged(() => points.tryRedeem('yoyo-buyer', ended.id, 'y3'))).result).toMatchObject({ __typename: 'GoodsOffSale', opensAt: null, endedAt });
    const { rows } = await stores.sql.query('SELECT sale_starts_at, sale_ends_at FROM goods_change WHERE goods_id = $1 ORDER BY changed_at', [yoyo.id]);
    expect(rows).toEqual([
      { sale_starts_at: null, sale_ends_at: null },
      { sale_starts_at: new Date(later), sale_ends_at: null },
      { sale_starts_at: new Date('2020-01-01T00:00:00Z'), sale_ends_at: new Date('2099-01-01T00:00:00Z') },
    ]);
    await expectPointsInvariants(stores);
  });

  it('ends a sale now with any end passed, once: a sale that has ended keeps its end', async () => {
    const cup = await points.createGoods('operator', { title: 'cup', pointsCost: 1, stock: 5, saleStartsAt: '2020-01-01T00:00:00Z' });
    const before = Date.now();
    const ended = await points.updateGoods('operator', cup.id, { saleEndsAt: '1970-01-01T00:00:00Z' });
    expect(Date.parse(ended.saleEndsAt!)).toBeGreaterThanOrEqual(before - 1_000);
    // The same change again, or another end passed, changes nothing and records nothing.
    const history = async () => (await stores.sql.query('SELECT sale_ends_at FROM goods_change WHERE goods_id = $1 ORDER BY changed_at', [cup.id])).rows;
    const recorded = await history();
    expect(recorded).toEqual([{ sale_ends_at: null }, { sale_ends_at: new Date(ended.saleEndsAt!) }]);
    for (const saleEndsAt of ['1970-01-01T00:00:00Z', '2021-01-01T00:00:00Z']) {
      expect(await points.updateGoods('operator', cup.id, { saleEndsAt })).toMatchObject({ saleEndsAt: ended.saleEndsAt });
    }
    expect(await history()).toEqual(recorded);
    expect((await points.tryRedeem('yoyo-buyer', cup.id, 'c1')).result).toMatchObject({ __typename: 'GoodsOffSale', endedAt: ended.saleEndsAt });
    // Paused too, it is still a sale that has ended.
    await points.updateGoods('operator', cup.id, { onSale: false });
    expect((await points.tryRedeem('yoyo-buyer', cup.id, 'c1')).result).toMatchObject({
      __typename: 'GoodsOffSale',
      endedAt: ended.saleEndsAt,
      message: 'the sale of this goods item has ended',
    });
  });

  it('removes an end of the sale window by its clear flag, and refuses one set and cleared at once', async () => {
    const window = { saleStartsAt: '2099-01-01T00:00:00.000Z', saleEndsAt: '2099-01-02T00:00:00.000Z' };
    const top = await points.createGoods('operator', { title: 'top', pointsCost: 1, stock: 5, ...window });
    await points.award('operator', { userId: 'top-buyer', amount: 10 });
    expect((await points.tryRedeem('top-buyer', top.id, 't1')).result).toMatchObject({ __typename: 'GoodsOffSale', opensAt: window.saleStartsAt });

    expect(await points.updateGoods('operator', top.id, { clearSaleStartsAt: true })).toMatchObject({ saleStartsAt: null, saleEndsAt: window.saleEndsAt });
    expect((await points.tryRedeem('top-buyer', top.id, 't1')).result).toMatchObject({ __typename: 'Redemption' });
    const endedAt = (await points.updateGoods('operator', top.id, { saleEndsAt: '2020-01-01T00:00:00Z' })).saleEndsAt!;
    expect((await points.tryRedeem('top-buyer', top.id, 't2')).result).toMatchObject({ __typename: 'GoodsOffSale', opensAt: null });
    expect(await points.updateGoods('operator', top.id, { clearSaleEndsAt: true })).toMatchObject({ saleStartsAt: null, saleEndsAt: null });
    expect((await points.tryRedeem('top-buyer', top.id, 't2')).result).toMatchObject({ __typename: 'Redemption' });

    const both = await unchanged(() => update(top.id, { saleEndsAt: window.saleEndsAt, clearSaleEndsAt: true }, admin));
    expect(both.body.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', issues: [{ path: ['input', 'clearSaleEndsAt'], code: 'SET_AND_CLEARED' }] });
    const { rows } = await stores.sql.query('SELECT sale_starts_at, sale_ends_at FROM goods_change WHERE goods_id = $1 ORDER BY changed_at', [top.id]);
    expect(rows).toEqual([
      { sale_starts_at: new Date(window.saleStartsAt), sale_ends_at: new Date(window.saleEndsAt) },
      { sale_starts_at: null, sale_ends_at: new Date(window.saleEndsAt) },
      { sale_starts_at: null, sale_ends_at: new Date(endedAt) },
      { sale_starts_at: null, sale_ends_at: null },
    ]);
    await expectPointsInvariants(stores);
  });

  it('NotFound for an item that does not exist, and BAD_USER_INPUT for an id no item can have, changing nothing', async () => {
    const response = await unchanged(() => update('no-such-goods', { onSale: false }, admin));
    expect(response.body.data?.updateGoods).toMatchObject({ __typename: 'NotFound', code: 'NOT_FOUND' });
    for (const id of ['', 'g'.repeat(129)]) expect(errorCodes(await unchanged(() => update(id, { onSale: false }, admin))), id).toEqual(['BAD_USER_INPUT']);
  });

  const badUpdates: [string, Record<string, unknown>][] = [
    ['nothing to change', {}],
    ['only nulls', { title: null, pointsCost: null, onSale: null, saleStartsAt: null, saleEndsAt: null, clearSaleStartsAt: null, clearSaleEndsAt: null }],
    ['only clear flags that are false', { clearSaleStartsAt: false, clearSaleEndsAt: false }],
    ['a zero price', { pointsCost: 0 }],
    ['a negative price', { pointsCost: -5 }],
    ['a price beyond 32 bits', { pointsCost: 2 ** 31 }],
    ['an empty title', { title: '' }],
    ['a blank title', { title: '   ' }],
    ['a title of 101 characters', { title: 't'.repeat(101) }],
    ['a string for onSale', { onSale: 'no' }],
    ['a sale end that is no instant', { saleEndsAt: 12 }],
    ['a sale that ends before it starts', { saleStartsAt: '2030-01-01T10:00:00Z', saleEndsAt: '2030-01-01T09:00:00Z' }],
    ['a sale start set and cleared', { saleStartsAt: '2030-01-01T10:00:00Z', clearSaleStartsAt: true }],
    ['a clear flag that is no boolean', { clearSaleEndsAt: 'yes' }],
  ];

  it.each(badUpdates)('with %s is BAD_USER_INPUT and changes nothing', async (_name, input) => {
    const response = await unchanged(() => update(goodsId, input as UpdateGoodsInput, admin));
    expect(response.body.data?.updateGoods ?? null).toBeNull();
    expect(errorCodes(response), JSON.stringify(response.body.errors)).toEqual(['BAD_USER_INPUT']);
  });

  it('UNAUTHENTICATED without a token or with a bad one, FORBIDDEN for a user who is not an operator', async () => {
    for (const [token, code] of await refusedCallers()) {
      const response = await unchanged(() => update(goodsId, { pointsCost: 1 }, token));
      expect(response.body.data?.updateGoods ?? null).toBeNull();
      expect(errorCodes(response)).toEqual([code]);
    }
  });
});
