import { beforeAll, describe, expect, it } from 'vitest';
import {
  CreateLotteryDocument,
  type CreateLotteryInput,
  DrawLotteryDocument,
  LotteryActivityDocument,
  LotteryDrawAuditDocument,
  UpdateLotteryDocument,
  type UpdateLotteryInput,
} from './gql/generated.ts';
import { type GraphqlResponse, errorCodes, gql } from './support/client.ts';
import { testEnv } from './support/env.ts';
import { startedServer } from './support/lifecycle.ts';
import { type LotteryClient, lotteryAt, runningWindow } from './support/lottery.ts';
import { stateKeys } from './support/stores.ts';
import { tokenOf } from './support/tokens.ts';

const env = testEnv('lot_input');
const lot = startedServer(env);
const OPERATOR = 'lot_input-op';
const PLAYER = 'input-player';
let lottery: LotteryClient;
/** A live WEIGHTED and a live TIMED activity that refused requests must leave alone. */
let weighted: { id: string; prizeIds: string[] };
let timed: { id: string; prizeIds: string[] };
let drawId: string;

const now = Date.now();
const window = runningWindow();
const valid: CreateLotteryInput = { title: 'valid', ...window, noPrizeWeight: 10, prizes: [{ title: 'a', weight: 5, totalStock: 10 }] };
const quota = Array(24).fill(1);
const validTimed: CreateLotteryInput = {
  title: 'timed',
  ...window,
  strategy: 'TIMED',
  prizes: [
    { title: 'gold', totalStock: 10, hourlyQuota: quota },
    { title: 'thanks', kind: 'CONSOLATION', totalStock: 100 },
  ],
};

beforeAll(async () => {
  lottery = lotteryAt(lot.server.url);
  const created = await lottery.create(OPERATOR, valid);
  weighted = { id: created.id, prizeIds: created.prizes.map((prize) => prize.id) };
  const createdTimed = await lottery.create(OPERATOR, validTimed);
  timed = { id: createdTimed.id, prizeIds: createdTimed.prizes.map((prize) => prize.id) };
  const drawn = await lottery.draw(PLAYER, weighted.id);
  if (drawn.__typename !== 'LotteryWin' && drawn.__typename !== 'LotteryLose') throw new Error(JSON.stringify(drawn));
  drawId = drawn.drawId;
});

const TABLES = ['lottery_activity', 'lottery_prize', 'lottery_settings', 'lottery_draw', 'lottery_release', 'lottery_scheduled_hour', 'operator_request'];

/** Every row of every lottery table, every Redis key under the prefix, and the live activities' Redis state. */
async function state() {
  const rows = await Promise.all(TABLES.map(async (table) => (await lot.stores.sql.query(`SELECT * FROM ${table} ORDER BY 1, 2`)).rows));
  const keys = (await stateKeys(lot.stores.redis, env.keyPrefix)).filter((key) => !key.includes('journal:streams'));
  const live = await Promise.all(
    [weighted.id, timed.id].flatMap((id) => [lot.stores.redis.hgetall(`{lot:${id}}:meta`), lot.stores.redis.hgetall(`{lot:${id}}:stock`), lot.stores.redis.hgetall(`{lot:${id}}:daily`)]),
  );
  return { rows, keys, live };
}

async function unchanged<T>(request: () => Promise<T>): Promise<T> {
  const before = await state();
  const result = await request();
  expect(await state()).toEqual(before);
  return result;
}

const expectBadInput = (response: GraphqlResponse<unknown>, what: string) => expect(errorCodes(response), `${what}: ${JSON.stringify(response.body.errors)}`).toEqual(['BAD_USER_INPUT']);

/** The first month of 30 days after this one (YYYY-MM), soon enough for a lottery's window: its 31st does not exist. */
function aMonthOf30Days(): string {
  const month = new Date(now);
  do month.setUTCMonth(month.getUTCMonth() + 1, 1);
  while (new Date(Date.UTC(month.getUTCFullYear(), month.getUTCMonth() + 1, 0)).getUTCDate() !== 30);
  return month.toISOString().slice(0, 7);
}

describe('createLotteryActivity refuses malformed input with BAD_USER_INPUT and changes nothing', () => {
  const prize = valid.prizes[0]!;
  const bad: [string, Record<string, unknown>][] = [
    ['a negative weight', { ...valid, prizes: [{ ...prize, weight: -1 }] }],
    ['a negative noPrizeWeight', { ...valid, noPrizeWeight: -5 }],
    ['an empty prize list', { ...valid, prizes: [] }],
    ['endsAt equal to startsAt', { ...valid, endsAt: valid.startsAt }],
    ['endsAt before startsAt', { ...valid, endsAt: new Date(now - 120_000).toISOString() }],
    ['a window over 400 days', { ...valid, endsAt: new Date(now + 401 * 86_400_000).toISOString() }],
    ['a window already over', { ...valid, startsAt: new Date(now - 7_200_000).toISOString(), endsAt: new Date(now - 1_000).toISOString() }],
    ['no positive weight at all', { ...valid, noPrizeWeight: 0, prizes: [{ ...prize, weight: 0 }] }],
    ['a weight above the maximum', { ...valid, prizes: [{ ...prize, weight: 1_000_001 }] }],
    ['a negative totalStock', { ...valid, prizes: [{ ...prize, totalStock: -1 }] }],
    ['a dailyStock of 0', { ...valid, prizes: [{ ...prize, dailyStock: 0 }] }],
    ['a negative dailyDrawLimit', { ...valid, dailyDrawLimit: -1 }],
    ['an unknown timezone', { ...valid, timezone: 'Mars/Olympus_Mons' }],
    ['an empty title', { ...valid, title: '   ' }],
    ['a title of 65 characters', { ...valid, title: 'x'.repeat(65) }],
    ['21 prizes', { ...valid, prizes: Array(21).fill(prize) }],
    ['a POINTS prize without points', { ...valid, prizes: [{ ...prize, kind: 'POINTS' }] }],
    ['points on a GOODS prize', { ...valid, prizes: [{ ...prize, points: 10 }] }],
    ['an hourlyQuota on a WEIGHTED prize', { ...valid, prizes: [{ ...prize, hourlyQuota: quota }] }],
    ['an hourlyQuota of 23 numbers', { ...validTimed, prizes: [{ ...validTimed.prizes[0]!, hourlyQuota: quota.slice(1) }, validTimed.prizes[1]!] }],
    ['a negative hourly quota', { ...validTimed, prizes: [{ ...validTimed.prizes[0]!, hourlyQuota: [-1, ...quota.slice(1)] }, validTimed.prizes[1]!] }],
    ['TIMED without a CONSOLATION prize', { ...validTimed, prizes: [validTimed.prizes[0]!] }],
    ['TIMED with two CONSOLATION prizes', { ...validTimed, prizes: [...validTimed.prizes, validTimed.prizes[1]!] }],
    ['TIMED with a prize without hourlyQuota', { ...validTimed, prizes: [{ title: 'x', totalStock: 1 }, validTimed.prizes[1]!] }],
    ['TIMED with a noPrizeWeight', { ...validTimed, noPrizeWeight: 5 }],
    ['TIMED with soldOutOdds NO_PRIZE', { ...validTimed, soldOutOdds: 'NO_PRIZE' }],
    ['an unknown soldOutOdds', { ...valid, soldOutOdds: 'LUCKY' }],
    // Its past hours would all be released at once.
    ['TIMED starting two hours ago', { ...validTimed, startsAt: new Date(now - 7_200_000).toISOString() }],
    ['TIMED with a weight', { ...validTimed, prizes: [{ ...validTimed.prizes[0]!, weight: 3 }, validTimed.prizes[1]!] }],
    ['TIMED with a dailyStock', { ...validTimed, prizes: [{ ...validTimed.prizes[0]!, dailyStock: 3 }, validTimed.prizes[1]!] }],
    ['an unknown strategy', { ...valid, strategy: 'LUCKY' }],
    ['an unknown prize kind', { ...valid, prizes: [{ ...prize, kind: 'CAR' }] }],
    ['a startsAt that is not a date', { ...valid, startsAt: 'tomorrow' }],
    // Read in the server's own zone, a time without one would move with where it is deployed.
    ['an endsAt without its zone', { ...valid, endsAt: valid.endsAt.replace(/Z$/, '') }],
    ['an endsAt of free-form text', { ...valid, endsAt: new Date(valid.endsAt).toString() }],
    ['an endsAt on a day that does not exist', { ...valid, endsAt: `${aMonthOf30Days()}-31T00:00:00Z` }],
    ['an endsAt that is only a date', { ...valid, endsAt: new Date(now + 10 * 86_400_000).toISOString().slice(0, 10) }],
    ['a string for an Int', { ...valid, noPrizeWeight: 'ten' }],
    ['a float weight', { ...valid, prizes: [{ ...prize, weight: 1.5 }] }],
    ['a missing totalStock', { ...valid, prizes: [{ title: 'a', weight: 1 }] }],
    ['a missing title', { ...valid, title: undefined }],
    ['an unknown field', { ...valid, bonus: 1 }],
  ];

  it.each(bad)('%s', async (_name, input) => {
    const response = await unchanged(() => lottery.raw(CreateLotteryDocument, { input: input as unknown as CreateLotteryInput }, OPERATOR, { admin: true }));
    expect(response.body.data?.createLotteryActivity ?? null).toBeNull();
    expectBadInput(response, _name);
  });

  it('reports which field is wrong', async () => {
    const response = await lottery.raw(CreateLotteryDocument, { input: { ...valid, endsAt: valid.startsAt } }, OPERATOR, { admin: true });
    expect(response.body.errors?.[0]?.extensions?.issues).toEqual([{ path: ['input', 'endsAt'], message: 'endsAt must be after startsAt', code: 'ENDS_BEFORE_STARTS' }]);
  });
});

describe('createLotteryActivity with a requestId', () => {
  it('creates once, even concurrently, and refuses the requestId for other terms, changing nothing', async () => {
    const input = { ...valid, title: 'retried wheel', requestId: 'console-7' };
    const answers = await Promise.all(Array.from({ length: 8 }, () => lottery.create(OPERATOR, input)));
    expect(new Set(answers.map((activity) => activity.id)).size).toBe(1);
    expect((await lottery.create(OPERATOR, input)).id).toBe(answers[0]!.id);
    const { rows } = await lot.stores.sql.query('SELECT id FROM lottery_activity WHERE title = $1', [input.title]);
    expect(rows).toHaveLength(1);

    const other = await unchanged(() => lottery.raw(CreateLotteryDocument, { input: { ...input, noPrizeWeight: 11 } }, OPERATOR, { admin: true }));
    expectBadInput(other, 'another activity under the requestId');
    expect(other.body.errors?.[0]?.extensions?.issues).toMatchObject([{ path: ['input', 'requestId'], code: 'REQUEST_ID_OF_ANOTHER_CREATE' }]);
    // The same bound as every other requestId.
    const longest = { ...input, title: 'longest requestId', requestId: 'r'.repeat(128) };
    expect((await lottery.create(OPERATOR, longest)).id).toBe((await lottery.create(OPERATOR, longest)).id);
    for (const requestId of ['', 'r'.repeat(129)])
      expectBadInput(await unchanged(() => lottery.raw(CreateLotteryDocument, { input: { ...input, requestId } }, OPERATOR, { admin: true })), requestId);
  });
});

describe('a DateTime', () => {
  it('with an offset is the same instant as in UTC, and is answered in UTC', async () => {
    const endsAt = new Date(valid.endsAt);
    const shanghai = new Date(endsAt.getTime() + 8 * 3_600_000).toISOString().replace('Z', '+08:00');
    const created = await lottery.create(OPERATOR, { ...valid, endsAt: shanghai });
    expect(created.endsAt).toBe(endsAt.toISOString());
  });
});

describe('a timezone', () => {
  it('is stored under its canonical name, however it was spelled', async () => {
    for (const [typed, canonical] of [
      ['asia/shanghai', 'Asia/Shanghai'],
      ['PRC', 'Asia/Shanghai'],
      ['etc/utc', 'UTC'],
    ]) {
      expect((await lottery.create(OPERATOR, { ...valid, timezone: typed })).timezone, typed).toBe(canonical);
    }
  });

  it('that is unknown is reported on its field', async () => {
    const response = await lottery.raw(CreateLotteryDocument, { input: { ...valid, timezone: 'Mars/Olympus_Mons' } }, OPERATOR, { admin: true });
    expect(response.body.errors?.[0]?.extensions?.issues).toEqual([{ path: ['input', 'timezone'], message: expect.any(String), code: 'UNKNOWN_TIMEZONE' }]);
  });
});

describe('drawLottery', () => {
  it('refuses a malformed requestId or activityId', async () => {
    for (const variables of [{ activityId: weighted.id, requestId: '' }, { activityId: weighted.id, requestId: 'r'.repeat(129) }, {}, { activityId: null }, { activityId: [weighted.id] }]) {
      const response = await unchanged(() => lottery.raw(DrawLotteryDocument, variables as { activityId: string }, PLAYER));
      expectBadInput(response, JSON.stringify(variables));
    }
  });

  it('answers NotFound for an activity that does not exist, leaving no key behind', async () => {
    for (const id of ['00000000-0000-0000-0000-000000000000', 'nope', '{lot:x}', '*']) {
      const drawLottery = await unchanged(() => lottery.draw(PLAYER, id));
      expect(drawLottery.__typename, id).toBe('NotFound');
      expect(await unchanged(() => lottery.activity(PLAYER, id))).toBeNull();
    }
  });

  it('refuses a draw after the end without counting it, long after the end too', async () => {
    const day = 86_400_000;
    const created = await lottery.create(OPERATOR, { ...valid, startsAt: new Date(now - 12 * day).toISOString() });
    const ended = await lottery.update(OPERATOR, created.id, { endsAt: new Date(now - 10 * day).toISOString() });
    expect(ended).toMatchObject({ __typename: 'LotteryActivity', status: 'ENDED' });
    const drawLottery = await unchanged(() => lottery.draw(PLAYER, created.id));
    expect(drawLottery).toMatchObject({ __typename: 'ActivityNotActive', reason: 'ENDED' });
  });

  it('takes a requestId of 128 characters, as every other mutation does, and answers its retry with the first draw', async () => {
    const requestId = 'r'.repeat(128);
    const first = await lottery.draw('long-request-player', weighted.id, requestId);
    if (first.__typename !== 'LotteryWin' && first.__typename !== 'LotteryLose') throw new Error(JSON.stringify(first));
    expect(await lottery.draw('long-request-player', weighted.id, requestId)).toMatchObject({ drawId: first.drawId });
    const { rows } = await lot.stores.sql.query('SELECT request_id FROM lottery_draw WHERE id = $1', [first.drawId]);
    expect(rows).toEqual([{ request_id: requestId }]);
  });

  it('refuses a draw before the start without counting it', async () => {
    const upcoming = await lottery.create(OPERATOR, { ...valid, startsAt: new Date(now + 3_600_000).toISOString(), endsAt: new Date(now + 7_200_000).toISOString() });
    expect(upcoming.status).toBe('UPCOMING');
    const drawLottery = await unchanged(() => lottery.draw(PLAYER, upcoming.id, 'early'));
    expect(drawLottery).toMatchObject({ __typename: 'ActivityNotActive', reason: 'NOT_STARTED', startsAt: new Date(now + 3_600_000).toISOString() });
  });
});

describe('updateLotteryActivity refuses changes that do not fit, with BAD_USER_INPUT, and changes nothing', () => {
  const cases = (): [string, string, UpdateLotteryInput][] => [
    ['nothing to change', weighted.id, {}],
    ['a negative weight', weighted.id, { prizes: [{ prizeId: weighted.prizeIds[0]!, weight: -1 }] }],
    ['endsAt before startsAt', weighted.id, { endsAt: new Date(now - 120_000).toISOString() }],
    ['endsAt equal to startsAt', weighted.id, { endsAt: window.startsAt }],
    // Refused at once, before anything is worked out for the whole window.
    ['an end in the year 9999', weighted.id, { endsAt: '9999-12-31T00:00:00Z' }],
    ['a prize of another activity', weighted.id, { prizes: [{ prizeId: timed.prizeIds[0]!, weight: 3 }] }],
    [
      'the same prize twice',
      weighted.id,
      {
        prizes: [
          { prizeId: weighted.prizeIds[0]!, weight: 3 },
          { prizeId: weighted.prizeIds[0]!, weight: 4 },
        ],
      },
    ],
    ['addStock of 0', weighted.id, { prizes: [{ prizeId: weighted.prizeIds[0]!, addStock: 0 }] }],
    ['a dailyStock of 0', weighted.id, { prizes: [{ prizeId: weighted.prizeIds[0]!, dailyStock: 0 }] }],
    ['a dailyStock set and cleared at once', weighted.id, { prizes: [{ prizeId: weighted.prizeIds[0]!, dailyStock: 3, clearDailyStock: true }] }],
    ['clearDailyStock on a TIMED prize', timed.id, { prizes: [{ prizeId: timed.prizeIds[0]!, clearDailyStock: true }] }],
    ['stock beyond the maximum', weighted.id, { prizes: [{ prizeId: weighted.prizeIds[0]!, addStock: 10_000_000 }] }],
    ['every weight to zero', weighted.id, { noPrizeWeight: 0, prizes: [{ prizeId: weighted.prizeIds[0]!, weight: 0 }] }],
    ['an hourlyQuota on a WEIGHTED prize', weighted.id, { prizes: [{ prizeId: weighted.prizeIds[0]!, hourlyQuota: quota }] }],
    ['a weight on a TIMED prize', timed.id, { prizes: [{ prizeId: timed.prizeIds[0]!, weight: 5 }] }],
    ['a noPrizeWeight on a TIMED activity', timed.id, { noPrizeWeight: 5 }],
    ['soldOutOdds NO_PRIZE on a TIMED activity', timed.id, { soldOutOdds: 'NO_PRIZE' }],
    ['an hourlyQuota on the consolation prize', timed.id, { prizes: [{ prizeId: timed.prizeIds[1]!, hourlyQuota: quota }] }],
    ['an hourlyQuota of 25 numbers', timed.id, { prizes: [{ prizeId: timed.prizeIds[0]!, hourlyQuota: [...quota, 1] }] }],
    // A requestId names a change, and is held to every other mutation's bound.
    ['a requestId alone', weighted.id, { requestId: 'nothing-else' }],
    ['an empty requestId', weighted.id, { paused: true, requestId: '' }],
    ['a requestId of 129 characters', weighted.id, { paused: true, requestId: 'r'.repeat(129) }],
  ];

  it('for each bad change', async () => {
    for (const [name, activityId, input] of cases()) {
      const response = await unchanged(() => lottery.raw(UpdateLotteryDocument, { activityId, input }, OPERATOR, { admin: true }));
      expectBadInput(response, name);
    }
  });

  it('for input of the wrong shape', async () => {
    const garbage = [{ paused: 'yes' }, { prizes: [{ weight: 1 }] }, { endsAt: 'soon' }, { dailyWinLimit: 2 ** 31 }, { color: 'red' }];
    for (const input of garbage) {
      const response = await unchanged(() => lottery.raw(UpdateLotteryDocument, { activityId: weighted.id, input: input as unknown as UpdateLotteryInput }, OPERATOR, { admin: true }));
      expectBadInput(response, JSON.stringify(input));
    }
  });

  it('answers NotFound for an activity that does not exist', async () => {
    const updateLotteryActivity = await unchanged(() => lottery.update(OPERATOR, 'nope', { paused: true }));
    expect(updateLotteryActivity.__typename).toBe('NotFound');
  });
});

describe('callers without a token, or without the role', () => {
  type Operation = [name: string, run: (token?: string) => Promise<GraphqlResponse<Record<string, unknown>>>];
  const operations = (): Operation[] => [
    ['createLotteryActivity', (token) => gql(lot.server.url, CreateLotteryDocument, { input: valid }, token)],
    ['updateLotteryActivity', (token) => gql(lot.server.url, UpdateLotteryDocument, { activityId: weighted.id, input: { paused: true } }, token)],
    ['drawLottery', (token) => gql(lot.server.url, DrawLotteryDocument, { activityId: weighted.id }, token)],
    ['lotteryActivity', (token) => gql(lot.server.url, LotteryActivityDocument, { id: weighted.id }, token)],
    ['lotteryDrawAudit', (token) => gql(lot.server.url, LotteryDrawAuditDocument, { drawId }, token)],
  ];

  it('UNAUTHENTICATED without a token or with a forged one', async () => {
    const forged = `${(await tokenOf('mallory', { admin: true })).split('.').slice(0, 2).join('.')}.forged`;
    for (const token of [undefined, 'not-a-jwt', forged]) {
      for (const [name, run] of operations()) {
        const response = await unchanged(() => run(token));
        expect(response.body.data?.[name] ?? null, name).toBeNull();
        expect(errorCodes(response), name).toEqual(['UNAUTHENTICATED']);
      }
    }
  });

  it('FORBIDDEN for a signed-in user who is not an operator', async () => {
    const player = await tokenOf(PLAYER);
    for (const [name, run] of operations().filter(([name]) => !['drawLottery', 'lotteryActivity'].includes(name))) {
      const response = await unchanged(() => run(player));
      expect(response.body.data?.[name] ?? null, name).toBeNull();
      expect(errorCodes(response), name).toEqual(['FORBIDDEN']);
    }
    const lotteryActivity = await lottery.activity(PLAYER, weighted.id);
    expect(lotteryActivity).toMatchObject({ status: 'ACTIVE', paused: false, settingsVersion: 1 });
  });
});
