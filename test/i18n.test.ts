import { isObjectType } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OpenTeamLimitReached, SeatLockLimitReached, TeamLimitReached } from '../src/domain/teams/problems.ts';
import { LOCALES, boundMessages, errorMessages, localeOf, problemMessage, problemMessages, ruleMessages } from '../src/i18n/messages.ts';
import { schema } from '../src/schema/index.ts';
import {
  AwardPointsDocument,
  CreateGoodsDocument,
  CreateGroupBuyActivityDocument,
  CreateLotteryDocument,
  CreateRedPacketDocument,
  CreditWalletDocument,
  DrawLotteryProblemDocument,
  GrabRedPacketDocument,
  LockTeamSeatProblemDocument,
  MyPointsLedgerDocument,
  type MyPointsLedgerQueryVariables,
  RedeemPointsDocument,
  ReleaseTeamSeatDocument,
  ServerTimeDocument,
  TeamsLimitedDocument,
  UpdateLotteryDocument,
} from './gql/generated.ts';
import { type GraphqlResponse, gql, openWs } from './support/client.ts';
import { testEnv } from './support/env.ts';
import { startedServer } from './support/lifecycle.ts';
import { type ServerProcess, startServerProcess } from './support/server.ts';
import { type Stores, openStores } from './support/stores.ts';
import { tokenOf } from './support/tokens.ts';

const env = testEnv('i18n');
const started = startedServer(env);
const ZH = { 'accept-language': 'zh-CN,zh;q=0.9,en;q=0.8' };

describe('the message catalog', () => {
  it('words every problem type of the schema in every locale, under its CONSTANT_CASE code', () => {
    const problemTypes = schema.getPossibleTypes(schema.getType('Problem') as never).filter(isObjectType);
    expect(problemTypes.length).toBeGreaterThan(10);
    for (const type of problemTypes) {
      const code = type.name.replace(/(?<=[a-z0-9])(?=[A-Z])/g, '_').toUpperCase();
      for (const locale of LOCALES) expect(problemMessages[code]?.[locale], `${type.name} in ${locale}`).toBeTypeOf('function');
    }
  });

  it('counts in English as English counts: one of a thing, two things', () => {
    const limits = [new OpenTeamLimitReached(1), new TeamLimitReached(1), new SeatLockLimitReached(1)];
    expect(limits.map((problem) => problemMessage(problem, 'en'))).toEqual([
      'you lead 1 open team of this group-buy, as many as it allows',
      'you joined 1 team of this group-buy, as many as it allows',
      'you took 1 seat lock in this team, as many as one user may',
    ]);
    expect(problemMessage(new TeamLimitReached(2), 'en')).toBe('you joined 2 teams of this group-buy, as many as it allows');
  });

  it('picks the language the caller ranks highest, English by default', () => {
    expect(localeOf('zh-CN,zh;q=0.9,en;q=0.8')).toBe('zh-CN');
    expect(localeOf('zh-TW')).toBe('zh-CN');
    expect(localeOf('en-US,zh;q=0.5')).toBe('en');
    expect(localeOf('fr-FR,zh;q=0.4')).toBe('zh-CN');
    expect(localeOf('zh;q=0, en')).toBe('en');
    expect(localeOf('fr')).toBe('en');
    expect(localeOf(';;q=x,,')).toBe('en');
    expect(localeOf(undefined)).toBe('en');
  });
});

describe('over HTTP', () => {
  it('answers serverTime from the shared clock', async () => {
    const before = Date.now();
    const { body } = await gql(started.server.url, ServerTimeDocument);
    expect(Math.abs(Date.parse(body.data!.serverTime as string) - before)).toBeLessThan(5000);
  });

  it('gives a problem its stable code and words it by Accept-Language', async () => {
    const token = await tokenOf('i18n-user');
    const english = await gql(started.server.url, LockTeamSeatProblemDocument, { teamId: 'no-such-team' }, token);
    expect(english.body.data?.lockTeamSeat).toEqual({ __typename: 'NotFound', code: 'NOT_FOUND', message: 'team no-such-team does not exist' });
    const chinese = await gql(started.server.url, LockTeamSeatProblemDocument, { teamId: 'no-such-team' }, token, ZH);
    expect(chinese.body.data?.lockTeamSeat).toEqual({ __typename: 'NotFound', code: 'NOT_FOUND', message: '拼团 no-such-team 不存在' });
  });

  it('gives a validation issue a machine code and its limits, worded by Accept-Language', async () => {
    const token = await tokenOf('i18n-user');
    for (const [headers, message] of [
      [{}, /^limit must be at least 1$/],
      [ZH, /^不能小于 1$/],
    ] as const) {
      const { body } = await gql(started.server.url, TeamsLimitedDocument, { activityId: 'a1', limit: 0 }, token, headers);
      expect(body.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', issues: [{ code: 'TOO_SMALL', minimum: 1, message: expect.stringMatching(message) }] });
    }
    // The error's message names the field in Chinese too; an issue's leaves it to the form that shows it beside the field.
    for (const [headers, message, issueMessage] of [
      [{}, 'limit must be at most 200', 'limit must be at most 200'],
      [ZH, 'limit：不能大于 200', '不能大于 200'],
    ] as const) {
      const { body } = await gql(started.server.url, TeamsLimitedDocument, { activityId: 'a1', limit: 201 }, token, headers);
      expect(body.errors?.[0]).toMatchObject({ message, extensions: { issues: [{ path: ['limit'], code: 'TOO_BIG', maximum: 200, message: issueMessage }] } });
    }
  });

  it("words a flow's own rule by Accept-Language, coded by the rule, with the values its wording uses", async () => {
    const token = await tokenOf('i18n-user');
    const impossible = { totalAmount: 100, count: 3, minAmount: 50 };
    const english = await gql(started.server.url, CreateRedPacketDocument, { input: impossible }, token);
    expect(english.body.errors?.[0]?.extensions?.issues).toEqual([
      {
        path: ['input', 'count'],
        code: 'IMPOSSIBLE_SPLIT',
        values: { bound: 'min', product: 150, total: 100 },
        message: 'impossible split: count × minAmount (150) exceeds totalAmount (100)',
      },
    ]);
    const chinese = await gql(started.server.url, CreateRedPacketDocument, { input: { totalAmount: 100, count: 3, minAmount: 5, maxAmount: 4 } }, token, ZH);
    expect(chinese.body.errors?.[0]?.extensions?.issues).toEqual([{ path: ['input', 'maxAmount'], code: 'MAX_BELOW_MIN', message: '最大金额不能小于最小金额' }]);
    // A bound the schema words in English itself is worded from its code in zh-CN.
    const tooLong = await gql(started.server.url, CreateRedPacketDocument, { input: { totalAmount: 100, count: 2, greeting: '恭'.repeat(65) } }, token, ZH);
    expect(tooLong.body.errors?.[0]?.extensions?.issues).toEqual([{ path: ['input', 'greeting'], code: 'TOO_BIG', maximum: 64, message: '长度最多为 64' }]);
  });

  it('words a rule the service checks against the stored activity, too', async () => {
    const operator = await tokenOf('i18n-operator', { admin: true });
    const startsAt = new Date(Date.now() - 60_000).toISOString();
    const endsAt = new Date(Date.now() + 3_600_000).toISOString();
    const created = await gql(
      started.server.url,
      CreateLotteryDocument,
      { input: { title: '抽奖', startsAt, endsAt, noPrizeWeight: 1, prizes: [{ title: 'a', weight: 1, totalStock: 1 }] } },
      operator,
    );
    const activityId = created.body.data!.createLotteryActivity.id;
    const change = { prizes: [{ prizeId: 'no-such-prize', weight: 2 }] };
    const english = await gql(started.server.url, UpdateLotteryDocument, { activityId, input: change }, operator);
    expect(english.body.errors?.[0]?.extensions?.issues).toEqual([
      { path: ['input', 'prizes', 0, 'prizeId'], code: 'UNKNOWN_PRIZE', values: { prizeId: 'no-such-prize' }, message: 'prize no-such-prize is not in this activity' },
    ]);
    const chinese = await gql(started.server.url, UpdateLotteryDocument, { activityId, input: change }, operator, ZH);
    expect(chinese.body.errors?.[0]).toMatchObject({ message: '奖品 no-such-prize 不属于该活动', extensions: { code: 'BAD_USER_INPUT', issues: [{ code: 'UNKNOWN_PRIZE' }] } });
    // And a rule a creation is checked against the clock by.
    const past = {
      title: '抽奖',
      startsAt: new Date(Date.now() - 7_200_000).toISOString(),
      endsAt: new Date(Date.now() - 3_600_000).toISOString(),
      prizes: [{ title: 'a', weight: 1, totalStock: 1 }],
    };
    const ended = await gql(started.server.url, CreateLotteryDocument, { input: past }, operator, ZH);
    expect(ended.body.errors?.[0]).toMatchObject({ message: '结束时间已过，不能创建已结束的活动', extensions: { issues: [{ path: ['input', 'endsAt'], code: 'ENDS_IN_THE_PAST' }] } });
  });

  it("words a page's bounds and cursors by Accept-Language, which the relay plugin's arguments get from no schema of ours", async () => {
    const token = await tokenOf('i18n-pager');
    const refusal = async (variables: MyPointsLedgerQueryVariables, headers: Record<string, string> = ZH) =>
      (await gql(started.server.url, MyPointsLedgerDocument, variables, token, headers)).body.errors?.[0];
    expect(await refusal({ first: 101 })).toMatchObject({
      message: 'first：不能大于 100',
      extensions: { code: 'BAD_USER_INPUT', issues: [{ path: ['first'], code: 'TOO_BIG', maximum: 100 }] },
    });
    expect(await refusal({ last: -1 })).toMatchObject({ message: 'last：不能小于 0', extensions: { issues: [{ code: 'TOO_SMALL', minimum: 0 }] } });
    expect(await refusal({ after: 'garbage' })).toMatchObject({ message: 'after 不是该列表的游标', extensions: { issues: [{ path: ['after'], code: 'INVALID_CURSOR' }] } });
    expect(await refusal({ after: 'garbage' }, {})).toMatchObject({ message: 'after is not a cursor of this list' });
    expect(await refusal({ first: 2, last: 1 })).toMatchObject({
      message: 'first 与 last 不能同时使用：正向翻页用 first 和 after，反向翻页用 last 和 before',
      extensions: { code: 'BAD_USER_INPUT', issues: [{ path: ['last'], code: 'MIXED_PAGING_DIRECTIONS', values: { forward: 'first', backward: 'last' } }] },
    });
  });

  it('words a NOT_FOUND error of a field without a NotFound member by Accept-Language, as the problem is', async () => {
    const token = await tokenOf('i18n-releaser');
    const chinese = await gql(started.server.url, ReleaseTeamSeatDocument, { teamId: 'no-such-team' }, token, ZH);
    expect(chinese.body.errors?.[0]).toMatchObject({ message: '拼团 no-such-team 不存在', extensions: { code: 'NOT_FOUND' } });
    const english = await gql(started.server.url, ReleaseTeamSeatDocument, { teamId: 'no-such-team' }, token);
    expect(english.body.errors?.[0]?.message).toBe('team no-such-team does not exist');
  });

  it('words every rule in every locale', () => {
    for (const [rule, words] of Object.entries(ruleMessages)) for (const locale of LOCALES) expect(words[locale]({}), `${rule} in ${locale}`).toBeTypeOf('string');
  });

  it('words every error and every bound in every locale', () => {
    for (const [key, words] of Object.entries(errorMessages)) for (const locale of LOCALES) expect(words[locale]({}), `${key} in ${locale}`).toBeTypeOf('string');
    for (const [code, words] of Object.entries(boundMessages)) {
      for (const locale of LOCALES) expect(words[locale]({ limit: 1, inclusive: true, exact: false }), `${code} in ${locale}`).toBeTypeOf('string');
    }
  });
});

/** The first error's message, extensions.code and issues, as a client reads them. */
function refusalOf(response: GraphqlResponse<unknown>) {
  const error = response.body.errors?.[0];
  return { message: error?.message, code: error?.extensions?.code, issues: error?.extensions?.issues };
}

describe('over HTTP, the refusals the catalog words since the review', () => {
  const inFuture = (ms: number) => new Date(Date.now() + ms).toISOString();

  it('words a numeric bound zod words itself as the catalog does, and keeps a bound the schema words', async () => {
    const operator = await tokenOf('i18n-operator', { admin: true });
    const input = { title: '拼团', priceCents: 100, groupPriceCents: 80, capacity: 1, startsAt: inFuture(0), endsAt: inFuture(3_600_000) };
    const english = await gql(started.server.url, CreateGroupBuyActivityDocument, { input }, operator);
    expect(refusalOf(english).issues).toEqual([{ path: ['input', 'capacity'], code: 'TOO_SMALL', minimum: 2, message: 'capacity must be 2 to 50' }]);
    const chinese = await gql(started.server.url, CreateGroupBuyActivityDocument, { input: { ...input, capacity: 2, lockSeconds: 3601 } }, operator, ZH);
    expect(refusalOf(chinese).issues).toEqual([{ path: ['input', 'lockSeconds'], code: 'TOO_BIG', maximum: 3600, message: '不能大于 3600' }]);
    const lockSeconds = await gql(started.server.url, CreateGroupBuyActivityDocument, { input: { ...input, capacity: 2, lockSeconds: 3601 } }, operator);
    expect(refusalOf(lockSeconds).issues).toEqual([{ path: ['input', 'lockSeconds'], code: 'TOO_BIG', maximum: 3600, message: 'lockSeconds must be at most 3600' }]);
  });

  it('words an activity id taken, with its own code', async () => {
    const operator = await tokenOf('i18n-operator', { admin: true });
    const input = { id: 'i18n-taken', title: '拼团', priceCents: 100, groupPriceCents: 80, capacity: 2, startsAt: inFuture(0), endsAt: inFuture(3_600_000) };
    expect(refusalOf(await gql(started.server.url, CreateGroupBuyActivityDocument, { input }, operator)).code).toBeUndefined();
    expect(refusalOf(await gql(started.server.url, CreateGroupBuyActivityDocument, { input }, operator))).toEqual({
      message: 'activity i18n-taken exists already',
      code: 'BAD_USER_INPUT',
      issues: [{ path: ['input', 'id'], code: 'ACTIVITY_ID_TAKEN', values: { id: 'i18n-taken' }, message: 'activity i18n-taken exists already' }],
    });
    expect(refusalOf(await gql(started.server.url, CreateGroupBuyActivityDocument, { input }, operator, ZH))).toMatchObject({
      message: '活动 i18n-taken 已存在',
      issues: [{ code: 'ACTIVITY_ID_TAKEN' }],
    });
  });

  it('words the points shop: a pooled voucher code, a reused requestId, a balance below zero', async () => {
    const operator = await tokenOf('i18n-operator', { admin: true });
    const buyer = await tokenOf('i18n-buyer');
    const goods = async (voucherCodes?: string[]) =>
      gql(started.server.url, CreateGoodsDocument, { input: { title: '券', pointsCost: 1, stock: voucherCodes?.length ?? 5, ...(voucherCodes ? { voucherCodes } : {}) } }, operator);
    const pooled = await goods(['i18n-code-1', 'i18n-code-2']);
    const other = await goods();
    const pooledId = pooled.body.data!.createGoods.id;
    const otherId = other.body.data!.createGoods.id;

    for (const [headers, message] of [
      [{}, "voucher code i18n-code-2 is already in a goods item's pool (this one's or another's)"],
      [ZH, '券码 i18n-code-2 已在商品的券码池中（本商品或其他商品）'],
    ] as const) {
      const again = await gql(
        started.server.url,
        CreateGoodsDocument,
        { input: { title: '券', pointsCost: 2, stock: 2, voucherCodes: ['i18n-new-code', 'i18n-code-2'] } },
        operator,
        headers,
      );
      expect(refusalOf(again)).toEqual({
        message,
        code: 'BAD_USER_INPUT',
        issues: [{ path: ['input', 'voucherCodes', 1], code: 'VOUCHER_CODE_IN_ANOTHER_POOL', values: { code: 'i18n-code-2' }, message }],
      });
    }

    const award = (amount: number, requestId: string, headers: Record<string, string> = {}) =>
      gql(started.server.url, AwardPointsDocument, { userId: 'i18n-buyer', amount, reason: 'test', requestId }, operator, headers);
    for (const [headers, message] of [
      [{}, 'the balance would go below zero'],
      [ZH, '积分余额将低于 0'],
    ] as const) {
      expect(refusalOf(await award(-5, `i18n-below-${headers === ZH}`, headers))).toEqual({
        message,
        code: 'BAD_USER_INPUT',
        issues: [{ path: ['amount'], code: 'BALANCE_BELOW_ZERO', message }],
      });
    }
    expect((await award(10, 'i18n-award')).body.data?.awardPoints).toBe(10);
    expect(refusalOf(await award(11, 'i18n-award'))).toMatchObject({
      message: 'requestId i18n-award was already used for another award',
      issues: [{ path: ['requestId'], code: 'REQUEST_ID_OF_ANOTHER_AWARD', values: { requestId: 'i18n-award' } }],
    });
    expect(refusalOf(await award(11, 'i18n-award', ZH)).message).toBe('requestId i18n-award 已用于另一笔积分发放');

    const redeemed = await gql(started.server.url, RedeemPointsDocument, { goodsId: pooledId, requestId: 'i18n-redeem' }, buyer);
    expect(redeemed.body.data?.redeemPoints.__typename).toBe('Redemption');
    for (const [headers, message] of [
      [{}, 'requestId i18n-redeem was already used to redeem another goods item'],
      [ZH, 'requestId i18n-redeem 已用于兑换其他商品'],
    ] as const) {
      const reused = await gql(started.server.url, RedeemPointsDocument, { goodsId: otherId, requestId: 'i18n-redeem' }, buyer, headers);
      expect(refusalOf(reused)).toEqual({
        message,
        code: 'BAD_USER_INPUT',
        issues: [{ path: ['requestId'], code: 'REQUEST_ID_OF_ANOTHER_ITEM', values: { requestId: 'i18n-redeem' }, message }],
      });
    }
  });

  it("words a wallet credit's reused requestId", async () => {
    const operator = await tokenOf('i18n-operator', { admin: true });
    const credit = (amountCents: number, headers: Record<string, string> = {}) =>
      gql(started.server.url, CreditWalletDocument, { userId: 'i18n-wallet', amountCents, reason: 'test', requestId: 'i18n-credit' }, operator, headers);
    expect((await credit(100)).body.data?.creditWallet).toBe(100);
    expect(refusalOf(await credit(101))).toMatchObject({
      message: 'requestId i18n-credit was already used for another credit',
      code: 'BAD_USER_INPUT',
      issues: [{ path: ['requestId'], code: 'REQUEST_ID_OF_ANOTHER_CREDIT' }],
    });
    expect(refusalOf(await credit(101, ZH)).message).toBe('requestId i18n-credit 已用于另一笔钱包入账');
  });

  it("words a rule a service checks in the caller's language, whichever mutation it refuses", async () => {
    const operator = await tokenOf('i18n-operator', { admin: true });
    const send = (totalAmount: number, headers: Record<string, string> = {}) =>
      gql(started.server.url, CreateRedPacketDocument, { input: { fundedBy: 'SHOP', totalAmount, count: 2, requestId: 'i18n-packet' } }, operator, headers);
    expect((await send(100)).body.data?.createRedPacket).toBeDefined();
    expect(refusalOf(await send(200, ZH))).toEqual({
      message: 'requestId i18n-packet 已用于另一个红包',
      code: 'BAD_USER_INPUT',
      issues: [{ path: ['input', 'requestId'], code: 'REQUEST_ID_OF_ANOTHER_PACKET', values: { requestId: 'i18n-packet' }, message: 'requestId i18n-packet 已用于另一个红包' }],
    });
    expect(refusalOf(await send(200)).message).toBe('requestId i18n-packet was already used for another red packet');
  });

  it('counts draws in English by number: once, then times', async () => {
    const operator = await tokenOf('i18n-operator', { admin: true });
    const drawer = await tokenOf('i18n-drawer');
    const input = { title: '抽奖', startsAt: inFuture(-60_000), endsAt: inFuture(3_600_000), dailyDrawLimit: 1, noPrizeWeight: 1, prizes: [{ title: 'a', weight: 1, totalStock: 100 }] };
    const activityId = (await gql(started.server.url, CreateLotteryDocument, { input }, operator)).body.data!.createLotteryActivity.id;
    await gql(started.server.url, DrawLotteryProblemDocument, { activityId }, drawer);
    const english = await gql(started.server.url, DrawLotteryProblemDocument, { activityId }, drawer);
    expect(english.body.data?.drawLottery).toEqual({ __typename: 'DrawLimitReached', code: 'DRAW_LIMIT_REACHED', message: 'you have drawn once today, the daily limit' });
    const chinese = await gql(started.server.url, DrawLotteryProblemDocument, { activityId }, drawer, ZH);
    expect(chinese.body.data?.drawLottery).toMatchObject({ message: '你今天已抽奖 1 次，已达每日上限' });
    expect(problemMessages.DRAW_LIMIT_REACHED!.en({ dailyDrawLimit: 3 } as never)).toBe('you have drawn 3 times today, the daily limit');
  });

  it('words UNAUTHENTICATED and FORBIDDEN by Accept-Language, English by default, over HTTP, SSE and graphql-ws', async () => {
    const url = started.server.url;
    const user = await tokenOf('i18n-user');
    const grab = { packetId: 'no-such-packet' };
    expect(refusalOf(await gql(url, GrabRedPacketDocument, grab))).toMatchObject({
      message:
        'sign in: send the HTTP header Authorization: Bearer <token> (in GraphiQL, {"authorization": "Bearer <token>"} in the Headers tab; from a graphql-ws client, connectionParams.authorization)',
      code: 'UNAUTHENTICATED',
    });
    expect(refusalOf(await gql(url, GrabRedPacketDocument, grab, undefined, ZH))).toMatchObject({
      message:
        '请先登录：发送 HTTP 请求头 Authorization: Bearer <token>（GraphiQL 中在 Headers 标签页填写 {"authorization": "Bearer <token>"}；graphql-ws 客户端放在 connectionParams.authorization 中）',
      code: 'UNAUTHENTICATED',
    });
    expect((await gql(url, GrabRedPacketDocument, grab, undefined, ZH)).body.errors?.[0]?.extensions?.reason).toBe('MISSING');
    expect(refusalOf(await gql(url, GrabRedPacketDocument, grab, undefined, { ...ZH, authorization: 'Basic x' }))).toMatchObject({
      message:
        '请按 HTTP 请求头 Authorization: Bearer <token> 的格式发送令牌（GraphiQL 中在 Headers 标签页填写 {"authorization": "Bearer <token>"}；graphql-ws 客户端放在 connectionParams.authorization 中）',
      code: 'UNAUTHENTICATED',
    });
    expect(refusalOf(await gql(url, GrabRedPacketDocument, grab, 'not-a-jwt'))).toMatchObject({ message: 'the token is not a well-formed JWT', code: 'UNAUTHENTICATED' });
    expect(refusalOf(await gql(url, GrabRedPacketDocument, grab, 'not-a-jwt', ZH))).toMatchObject({ message: '令牌不是格式正确的 JWT', code: 'UNAUTHENTICATED' });

    const award = { userId: 'i18n-user', amount: 1, reason: 'test', requestId: 'i18n-forbidden' };
    expect(refusalOf(await gql(url, AwardPointsDocument, award, user))).toMatchObject({ message: 'you do not have the role this operation needs', code: 'FORBIDDEN' });
    expect(refusalOf(await gql(url, AwardPointsDocument, award, user, ZH))).toMatchObject({ message: '你没有执行该操作所需的角色', code: 'FORBIDDEN' });
    const shop = await gql(url, CreateRedPacketDocument, { input: { totalAmount: 100, count: 2, fundedBy: 'SHOP' } }, user, ZH);
    expect(refusalOf(shop)).toMatchObject({ message: '只有运营人员可以创建商城出资的红包', code: 'FORBIDDEN' });

    const reserve = async (headers: Record<string, string>) => (await fetch(`${url}/stream`, { method: 'PUT', headers })).json() as Promise<GraphqlResponse<unknown>['body']>;
    expect((await reserve({})).errors?.[0]).toMatchObject({ message: 'reserving a stream needs a signed-in caller', extensions: { code: 'UNAUTHENTICATED' } });
    expect((await reserve(ZH)).errors?.[0]).toMatchObject({ message: '预留事件流需要先登录', extensions: { code: 'UNAUTHENTICATED' } });

    const query = 'subscription { redemptionUpdated(redemptionId: "no-such-redemption") { id } }';
    for (const [connectionParams, message] of [
      [
        {},
        'sign in: send the HTTP header Authorization: Bearer <token> (in GraphiQL, {"authorization": "Bearer <token>"} in the Headers tab; from a graphql-ws client, connectionParams.authorization)',
      ],
      [
        { 'Accept-Language': 'zh-CN' },
        '请先登录：发送 HTTP 请求头 Authorization: Bearer <token>（GraphiQL 中在 Headers 标签页填写 {"authorization": "Bearer <token>"}；graphql-ws 客户端放在 connectionParams.authorization 中）',
      ],
    ] as const) {
      const socket = openWs(url, connectionParams);
      try {
        const [event] = await socket.subscribe({ query }).until((events) => events.length > 0);
        expect(event?.errors?.[0]).toMatchObject({ message, extensions: { code: 'UNAUTHENTICATED' } });
      } finally {
        socket.dispose();
      }
    }
  });
});

describe('over HTTP, rate limits', () => {
  const limited = testEnv('i18n-limits', { RATE_LIMIT_MUTATIONS: '2', RATE_LIMIT_ANONYMOUS: '2', RATE_LIMIT_WINDOW_MS: '60000' });
  let server: ServerProcess;
  let stores: Stores;
  beforeAll(async () => {
    server = await startServerProcess(limited.vars);
    stores = openStores(limited);
  });
  afterAll(async () => {
    await server?.stop();
    await stores?.cleanup();
  });

  it('words RATE_LIMITED by Accept-Language', async () => {
    const grab = async (user: string, headers: Record<string, string> = {}) => gql(server.url, GrabRedPacketDocument, { packetId: 'no-such-packet' }, await tokenOf(user), headers);
    for (const [user, headers, message] of [
      ['i18n-hasty-en', {}, 'too many requests; slow down'],
      ['i18n-hasty-zh', ZH, '请求过于频繁，请放慢速度'],
    ] as const) {
      await grab(user);
      await grab(user);
      const refused = await grab(user, headers);
      expect(refusalOf(refused)).toMatchObject({ message, code: 'RATE_LIMITED' });
    }
    const three = `mutation { a: grabRedPacket(packetId: "x") { __typename } b: grabRedPacket(packetId: "x") { __typename } c: grabRedPacket(packetId: "x") { __typename } }`;
    expect(refusalOf(await gql(server.url, three, {}, await tokenOf('i18n-greedy-en')))).toMatchObject({
      message: 'this operation has 3 mutations, more than the 2 allowed per window; send fewer at once',
      code: 'RATE_LIMITED',
    });
    expect(refusalOf(await gql(server.url, three, {}, await tokenOf('i18n-greedy-zh'), ZH))).toMatchObject({
      message: '该操作包含 3 个变更，超过每个时间窗口允许的 2 个；请分开发送',
      code: 'RATE_LIMITED',
    });
    const anonymous = (headers: Record<string, string> = {}) => gql(server.url, ServerTimeDocument, undefined, undefined, headers);
    await anonymous();
    await anonymous();
    expect(refusalOf(await anonymous())).toMatchObject({ message: 'too many requests without a token from this address; slow down or sign in', code: 'RATE_LIMITED' });
    expect(refusalOf(await anonymous(ZH))).toMatchObject({ message: '该地址未登录的请求过于频繁，请放慢速度或先登录', code: 'RATE_LIMITED' });
  });
});
