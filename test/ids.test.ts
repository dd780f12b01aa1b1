import { randomUUID } from 'node:crypto';
import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AwardPointsDocument,
  CloseRedPacketDocument,
  ConfirmTeamSeatDocument,
  CreditWalletDocument,
  DrawLotteryDocument,
  GoodsDocument,
  GoodsRedemptionsDocument,
  GrabRedPacketDocument,
  GroupBuyActivityDocument,
  LockTeamSeatDocument,
  LotteryActivityDocument,
  LotteryDrawAuditDocument,
  LotteryWinnersDocument,
  LotteryWinsDocument,
  MyDrawsDocument,
  RedPacketDocument,
  RedPacketUpdatedDocument,
  ReleaseTeamSeatDocument,
  TeamDocument,
  TeamStatusDocument,
  UpdateLotteryDocument,
} from './gql/generated.ts';
import { type GraphqlResponse, errorCodes, gql, subscribeSse, subscribeWs } from './support/client.ts';
import { testEnv } from './support/env.ts';
import { type ServerProcess, startServerProcess } from './support/server.ts';
import { type Stores, openStores, stateKeys } from './support/stores.ts';
import { teamsAt } from './support/teams.ts';
import { tokenOf } from './support/tokens.ts';

const env = testEnv('ids');
let server: ServerProcess;
let stores: Stores;

beforeAll(async () => {
  server = await startServerProcess(env.vars);
  stores = openStores(env);
});

afterAll(async () => {
  await server?.stop();
  await stores?.cleanup();
});

/** Every Redis key under the prefix, and the row count and contents (a digest) of every table of the file's schema. */
async function state() {
  const { rows } = await stores.sql.query<{ table_name: string }>('SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY table_name');
  const tables = await Promise.all(
    rows.map(async ({ table_name }) => {
      const sql = `SELECT count(*)::int AS n, md5(coalesce(string_agg(t::text, ',' ORDER BY t::text), '')) AS digest FROM "${table_name}" t`;
      return [table_name, (await stores.sql.query<{ n: number; digest: string }>(sql)).rows[0]];
    }),
  );
  return { tables, keys: await stateKeys(stores.redis, env.keyPrefix) };
}

/** Ids no record can have: empty, and long enough to cost a key, a lookup and a message. */
const BAD_IDS = ['', 'x'.repeat(129), 'x'.repeat(5_000)];

type Caller = (id: string) => Promise<GraphqlResponse<unknown>>;
const as = (user: string, admin = false) => tokenOf(user, { admin });
/** A call of `document` with the id put where `variables` puts it, as `user`. */
const callerAs =
  (user: string, admin = false) =>
  <T, V>(document: TypedDocumentNode<T, V>, variables: (id: string) => V): Caller =>
  async (id) =>
    gql(server.url, document, variables(id), await as(user, admin));
const buyer = callerAs('ids-user');
const operator = callerAs('ids-ops', true);

const operations: [string, Caller][] = [
  ['lockTeamSeat', buyer(LockTeamSeatDocument, (teamId) => ({ teamId }))],
  ['releaseTeamSeat', buyer(ReleaseTeamSeatDocument, (teamId) => ({ teamId }))],
  ['confirmTeamSeat', operator(ConfirmTeamSeatDocument, (teamId) => ({ teamId, userId: 'ids-user', paymentRef: 'ids-pay' }))],
  ['team', buyer(TeamDocument, (id) => ({ id }))],
  ['groupBuyActivity', buyer(GroupBuyActivityDocument, (id) => ({ id }))],
  ['grabRedPacket', buyer(GrabRedPacketDocument, (packetId) => ({ packetId }))],
  ['closeRedPacket', operator(CloseRedPacketDocument, (packetId) => ({ packetId }))],
  ['redPacket', buyer(RedPacketDocument, (id) => ({ id }))],
  ['drawLottery', buyer(DrawLotteryDocument, (activityId) => ({ activityId, requestId: 'ids-draw' }))],
  ['updateLotteryActivity', operator(UpdateLotteryDocument, (activityId) => ({ activityId, input: { paused: true } }))],
  ['lotteryActivity', buyer(LotteryActivityDocument, (id) => ({ id }))],
  ['lotteryDrawAudit', operator(LotteryDrawAuditDocument, (drawId) => ({ drawId }))],
  ['lotteryWins', operator(LotteryWinsDocument, (activityId) => ({ activityId }))],
  ['lotteryWins(prizeId)', operator(LotteryWinsDocument, (prizeId) => ({ activityId: 'ids-lottery', prizeId }))],
  ['goods', buyer(GoodsDocument, (id) => ({ id }))],
  ['goodsRedemptions', operator(GoodsRedemptionsDocument, (goodsId) => ({ goodsId }))],
  ['me.draws', buyer(MyDrawsDocument, (activityId) => ({ activityId }))],
];

describe('an id no record can have is BAD_USER_INPUT, in the caller language, and changes nothing', () => {
  it.each(operations)('%s', async (name, call) => {
    const before = await state();
    for (const id of BAD_IDS) {
      const response = await call(id);
      expect(errorCodes(response), `${name} with ${id.length} characters: ${JSON.stringify(response.body.errors)}`).toEqual(['BAD_USER_INPUT']);
      expect(JSON.stringify(response.body).length, 'the id is not echoed').toBeLessThan(2_000);
    }
    expect(await state()).toEqual(before);
  });

  it('words the refusal in Chinese for a zh-CN caller', async () => {
    const response = await gql(server.url, GrabRedPacketDocument, { packetId: '' }, await as('ids-user'), { 'accept-language': 'zh-CN' });
    expect(errorCodes(response)).toEqual(['BAD_USER_INPUT']);
    expect(response.body.errors?.[0]?.message).toMatch(/[\u4e00-\u9fff]/);
  });

  const subscriptions = [
    ['teamStatus', TeamStatusDocument, (teamId: string) => ({ teamId })],
    ['redPacketUpdated', RedPacketUpdatedDocument, (packetId: string) => ({ packetId })],
    ['lotteryWinners', LotteryWinnersDocument, (activityId: string) => ({ activityId })],
  ] as const;
  for (const [transport, subscribe] of [
    ['SSE', subscribeSse],
    ['graphql-ws', subscribeWs],
  ] as const) {
    it.each(subscriptions)(`%s over ${transport}`, async (_name, document, variables) => {
      for (const id of ['', 'x'.repeat(129)]) {
        const subscription = subscribe(server.url, document as typeof TeamStatusDocument, variables(id) as { teamId: string }, await as('ids-user'));
        const events = await subscription.until((all) => all.length >= 1);
        subscription.close();
        expect(events[0]!.errors?.[0]?.extensions?.code, `${id.length} characters`).toBe('BAD_USER_INPUT');
      }
    });
  }
});

describe('a user id no token can carry is BAD_USER_INPUT where an operator names a user, and changes nothing', () => {
  /** What a token's `sub` is refused for: each would credit or seat an id nobody can sign in as, and the first reads as "alice". */
  const badUserIds = ['\u202Eecila', 'bob\ncarol', 'tab\there', 'zero\u200Bwidth', 'bob\u200D', ' alice', 'alice ', '', 'u'.repeat(129)];
  /** Refused before the id check, as in every String input (inputCharacters.test.ts): BAD_USER_INPUT without an issue. */
  const refusedInAnyText = new Set(['\u202Eecila', 'zero\u200Bwidth']);
  let teamId: string;
  beforeAll(async () => {
    // A team with free seats: confirmTeamSeat would seat any of these ids in it.
    teamId = (await teamsAt(server.url).open('ids-leader', { activityId: 'ids-group', capacity: 5 })).id;
  });

  const mutations: [string, Caller][] = [
    ['creditWallet', operator(CreditWalletDocument, (userId) => ({ userId, amountCents: 100, reason: 'goodwill', requestId: randomUUID() }))],
    ['awardPoints', operator(AwardPointsDocument, (userId) => ({ userId, amount: 5, reason: 'bonus', requestId: randomUUID() }))],
    ['confirmTeamSeat', operator(ConfirmTeamSeatDocument, (userId) => ({ teamId, userId, paymentRef: randomUUID() }))],
  ];

  it.each(mutations)('%s', async (name, call) => {
    const before = await state();
    for (const userId of badUserIds) {
      const response = await call(userId);
      const what = `${name} with ${JSON.stringify(userId)}: ${JSON.stringify(response.body)}`;
      expect(errorCodes(response), what).toEqual(['BAD_USER_INPUT']);
      if (!refusedInAnyText.has(userId)) expect(response.body.errors?.[0]?.extensions?.issues, what).toMatchObject([{ path: ['userId'], code: 'INVALID_USER_ID' }]);
    }
    expect(await state()).toEqual(before);
    // The same call for an id a token can carry goes through.
    expect(errorCodes(await call(`ids-payee-${name}`))).toEqual([]);
  });

  it('words the refusal in Chinese for a zh-CN caller', async () => {
    const response = await gql(server.url, AwardPointsDocument, { userId: ' alice', amount: 5, reason: 'bonus', requestId: 'zh' }, await as('ids-ops', true), { 'accept-language': 'zh-CN' });
    expect(response.body.errors?.[0]).toMatchObject({
      message: 'userId 不是有效的用户 ID：须为 1 到 128 个字符，首尾不能有空格，不能含换行、控制字符、不可见字符或双向控制字符',
      extensions: { code: 'BAD_USER_INPUT', issues: [{ path: ['userId'], code: 'INVALID_USER_ID' }] },
    });
  });
});
