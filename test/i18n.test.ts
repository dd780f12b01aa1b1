import { isObjectType } from 'graphql';
import { describe, expect, it } from 'vitest';
import { LOCALES, localeOf, problemMessages, ruleMessages } from '../src/i18n/messages.ts';
import { schema } from '../src/schema/index.ts';
import {
  CreateLotteryDocument,
  CreateRedPacketDocument,
  LockTeamSeatProblemDocument,
  MyPointsLedgerDocument,
  type MyPointsLedgerQueryVariables,
  ReleaseTeamSeatDocument,
  ServerTimeDocument,
  TeamsLimitedDocument,
  UpdateLotteryDocument,
} from './gql/generated.ts';
import { gql } from './support/client.ts';
import { testEnv } from './support/env.ts';
import { startedServer } from './support/lifecycle.ts';
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
      [{}, /too small/i],
      [ZH, /不能小于 1/],
    ] as const) {
      const { body } = await gql(started.server.url, TeamsLimitedDocument, { activityId: 'a1', limit: 0 }, token, headers);
      expect(body.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', issues: [{ code: 'TOO_SMALL', minimum: 1, message: expect.stringMatching(message) }] });
    }
    const { body } = await gql(started.server.url, TeamsLimitedDocument, { activityId: 'a1', limit: 201 }, token);
    expect(body.errors?.[0]?.extensions).toMatchObject({ issues: [{ code: 'TOO_BIG', maximum: 200 }] });
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
      { path: ['prizes', 0, 'prizeId'], code: 'UNKNOWN_PRIZE', values: { prizeId: 'no-such-prize' }, message: 'prize no-such-prize is not in this activity' },
    ]);
    const chinese = await gql(started.server.url, UpdateLotteryDocument, { activityId, input: change }, operator, ZH);
    expect(chinese.body.errors?.[0]).toMatchObject({ message: '奖品 no-such-prize 不属于该活动', extensions: { code: 'BAD_USER_INPUT', issues: [{ code: 'UNKNOWN_PRIZE' }] } });
  });

  it("words a page's bounds and cursors by Accept-Language, which the relay plugin's arguments get from no schema of ours", async () => {
    const token = await tokenOf('i18n-pager');
    const refusal = async (variables: MyPointsLedgerQueryVariables, headers: Record<string, string> = ZH) =>
      (await gql(started.server.url, MyPointsLedgerDocument, variables, token, headers)).body.errors?.[0];
    expect(await refusal({ first: 101 })).toMatchObject({ message: '不能大于 100', extensions: { code: 'BAD_USER_INPUT', issues: [{ path: ['first'], code: 'TOO_BIG', maximum: 100 }] } });
    expect(await refusal({ last: -1 })).toMatchObject({ message: '不能小于 0', extensions: { issues: [{ code: 'TOO_SMALL', minimum: 0 }] } });
    expect(await refusal({ after: 'garbage' })).toMatchObject({ message: 'after 不是该列表的游标', extensions: { issues: [{ path: ['after'], code: 'INVALID_CURSOR' }] } });
    expect(await refusal({ after: 'garbage' }, {})).toMatchObject({ message: 'after is not a cursor of this list' });
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
});
