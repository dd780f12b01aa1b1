import { beforeAll, describe, expect, it } from 'vitest';
import { localDay, localHourOfDay, localHourStart, nextLocalMidnight, utcOffsetTable } from '../src/domain/lottery/timezone.ts';
import { testEnv } from './support/env.ts';
import { startedServer } from './support/lifecycle.ts';
import { type LotteryClient, lotteryAt } from './support/lottery.ts';
import { expectLotteryInvariants, loadDraws } from './support/lotteryInvariants.ts';
import { pointsAt } from './support/points.ts';
import { moveClockTo } from './support/testClock.ts';

// The scripts take "now" from Redis TIME plus the test clock's offset (TEST_CLOCK=1), so
// the test crosses midnights without waiting for one.
const env = testEnv('lot_day', { TEST_CLOCK: '1' });
const lot = startedServer(env);
const OPERATOR = 'lot_day-op';
let lottery: LotteryClient;

beforeAll(() => {
  lottery = lotteryAt(lot.server.url);
});

const kinds = async (activityId: string, users: string[]) => {
  const results: string[] = [];
  for (const user of users) results.push((await lottery.draw(user, activityId)).__typename);
  return results;
};

/** An instant of the test clock, the answer a draw gets there, and the resetsAt of a DrawLimitReached. */
type ClockStep = [at: string, expected: string, resetsAt?: string];

/** One draw a day in `timezone`, and it wins. */
const oneWinADay = (title: string, timezone: string, startsAt: string, endsAt: string) =>
  lottery.create(OPERATOR, { title, startsAt, endsAt, timezone, dailyDrawLimit: 1, prizes: [{ title: 'A', weight: 1, totalStock: 100, dailyStock: 1 }] });

async function drawAtEach(user: string, activityId: string, steps: ClockStep[]) {
  for (const [at, expected, resetsAt] of steps) {
    await moveClockTo(lot.stores.redis, Date.parse(at));
    const result = await lottery.draw(user, activityId);
    expect(result.__typename, at).toBe(expected);
    if (resetsAt && result.__typename === 'DrawLimitReached') expect(result.resetsAt, at).toBe(resetsAt);
  }
}

describe('daily limits and daily stock reset at midnight in the activity’s timezone', () => {
  it('Asia/Shanghai: limits and stock hold all day, up to the last seconds before midnight, and reset at 00:00 local (16:00 UTC)', async () => {
    // One prize with a daily stock of 2 and no no-prize weight: a draw wins whenever the stock and the win limit allow.
    const activity = await lottery.create(OPERATOR, {
      title: 'shanghai day',
      startsAt: '2027-01-09T00:00:00+08:00',
      endsAt: '2027-01-13T00:00:00+08:00',
      dailyDrawLimit: 3,
      dailyWinLimit: 1,
      prizes: [{ title: 'A', weight: 1, totalStock: 100, dailyStock: 2 }],
    });

    await moveClockTo(lot.stores.redis, Date.parse('2027-01-10T12:00:00+08:00'));
    // u1: a win, then losses (win limit 1), then the draw limit (3).
    expect(await kinds(activity.id, ['u1', 'u1', 'u1'])).toEqual(['LotteryWin', 'LotteryLose', 'LotteryLose']);
    const limited = await lottery.draw('u1', activity.id);
    expect(limited).toMatchObject({ __typename: 'DrawLimitReached', dailyDrawLimit: 3, resetsAt: '2027-01-10T16:00:00.000Z' });
    // u2 takes the last unit of today's stock; u3 can only lose.
    expect(await kinds(activity.id, ['u2', 'u3'])).toEqual(['LotteryWin', 'LotteryLose']);

    await moveClockTo(lot.stores.redis, Date.parse('2027-01-10T23:59:55.000+08:00'));
    expect(await kinds(activity.id, ['u1', 'u3'])).toEqual(['DrawLimitReached', 'LotteryLose']);

    await moveClockTo(lot.stores.redis, Date.parse('2027-01-11T00:00:00.500+08:00'));
    expect(await kinds(activity.id, ['u1', 'u3', 'u2', 'u1', 'u1'])).toEqual(['LotteryWin', 'LotteryWin', 'LotteryLose', 'LotteryLose', 'LotteryLose']);
    expect(await lottery.draw('u1', activity.id)).toMatchObject({ __typename: 'DrawLimitReached', resetsAt: '2027-01-11T16:00:00.000Z' });

    const draws = await expectLotteryInvariants(lot.stores, activity.id);
    // Refused draws were not counted.
    expect(draws.map((row) => `${row.local_day} ${row.user_id} #${row.draw_seq} ${row.prize_id ? 'win' : 'lose'}`)).toEqual([
      '2027-01-10 u1 #1 win',
      '2027-01-10 u1 #2 lose',
      '2027-01-10 u1 #3 lose',
      '2027-01-10 u2 #1 win',
      '2027-01-10 u3 #1 lose',
      '2027-01-10 u3 #2 lose',
      '2027-01-11 u1 #1 win',
      '2027-01-11 u3 #1 win',
      '2027-01-11 u2 #1 lose',
      '2027-01-11 u1 #2 lose',
      '2027-01-11 u1 #3 lose',
    ]);
    expect(draws.filter((row) => row.prize_id).map((row) => `${row.local_day} unit ${row.stock_unit} daily ${row.daily_unit}`)).toEqual([
      '2027-01-10 unit 1 daily 1',
      '2027-01-10 unit 2 daily 2',
      '2027-01-11 unit 3 daily 1',
      '2027-01-11 unit 4 daily 2',
    ]);
  });

  it('America/New_York across the start of DST: midnight is 05:00 UTC, then 04:00 UTC after a 23-hour day', async () => {
    const activity = await oneWinADay('new york dst', 'America/New_York', '2027-03-13T00:00:00-05:00', '2027-03-16T00:00:00-04:00');
    const steps: ClockStep[] = [
      ['2027-03-14T04:59:50.000Z', 'LotteryWin'], // 23:59:50 EST, Saturday the 13th
      ['2027-03-14T04:59:55.000Z', 'DrawLimitReached', '2027-03-14T05:00:00.000Z'],
      ['2027-03-14T05:00:00.500Z', 'LotteryWin'], // 00:00:00.5 EST, Sunday the 14th; clocks go forward at 07:00 UTC
      ['2027-03-14T12:00:00.000Z', 'DrawLimitReached', '2027-03-15T04:00:00.000Z'],
      ['2027-03-15T03:59:55.000Z', 'DrawLimitReached', '2027-03-15T04:00:00.000Z'], // 23:59:55 EDT
      ['2027-03-15T04:00:00.500Z', 'LotteryWin'], // 00:00:00.5 EDT, Monday the 15th
    ];
    await drawAtEach('ny', activity.id, steps);
    await expectLotteryInvariants(lot.stores, activity.id);
    expect((await loadDraws(lot.stores, activity.id)).map((row) => row.local_day)).toEqual(['2027-03-13', '2027-03-14', '2027-03-15']);
  });

  it('America/Santiago, where DST begins at midnight: the day that skips 00:00 begins at 01:00, 04:00 UTC', async () => {
    const activity = await oneWinADay('santiago dst', 'America/Santiago', '2027-09-04T00:00:00-04:00', '2027-09-07T00:00:00-03:00');
    const steps: ClockStep[] = [
      ['2027-09-05T03:00:00.500Z', 'LotteryWin'], // 23:00:00.5 -04, Saturday the 4th
      ['2027-09-05T03:30:00.000Z', 'DrawLimitReached', '2027-09-05T04:00:00.000Z'],
      ['2027-09-05T04:00:00.500Z', 'LotteryWin'], // 01:00:00.5 -03, Sunday the 5th: 00:00 was skipped
      ['2027-09-05T12:00:00.000Z', 'DrawLimitReached', '2027-09-06T03:00:00.000Z'],
    ];
    await drawAtEach('santiago', activity.id, steps);
    expect((await loadDraws(lot.stores, activity.id)).map((row) => row.local_day)).toEqual(['2027-09-04', '2027-09-05']);
  });

  it('Redis time stepping back across midnight: the draw counts in the newer day and is dated at its start', async () => {
    // A prize that weighs nothing: every draw loses, and only counts.
    const activity = await lottery.create(OPERATOR, {
      title: 'step back',
      startsAt: '2027-10-09T00:00:00+08:00',
      endsAt: '2027-10-13T00:00:00+08:00',
      dailyDrawLimit: 2,
      noPrizeWeight: 1,
      prizes: [{ title: 'A', weight: 0, totalStock: 1 }],
    });
    await drawAtEach('stepper', activity.id, [
      ['2027-10-10T23:59:58.000+08:00', 'LotteryLose'],
      ['2027-10-11T00:00:00.500+08:00', 'LotteryLose'],
    ]);
    // Back 2 s, before midnight again: the 11th's count and limit hold, and the draw is
    // dated at the 11th's start, not on the 10th.
    await moveClockTo(lot.stores.redis, Date.parse('2027-10-10T23:59:58.500+08:00'));
    expect(await lottery.draw('stepper', activity.id)).toMatchObject({ __typename: 'LotteryLose', drawnAt: '2027-10-10T16:00:00.000Z' });
    expect(await lottery.draw('stepper', activity.id)).toMatchObject({ __typename: 'DrawLimitReached', resetsAt: '2027-10-11T16:00:00.000Z' });

    // In time order: the 11th's second draw is dated before its first, which the clock put later.
    const draws = await expectLotteryInvariants(lot.stores, activity.id);
    expect(draws.map((row) => `${row.local_day} #${row.draw_seq}`)).toEqual(['2027-10-10 #1', '2027-10-11 #2', '2027-10-11 #1']);
    expect(draws[1]!.drawn_at.toISOString()).toBe('2027-10-10T16:00:00.000Z');
  });

  it("a paid draw once the day's stock is gone: SOLD_OUT_TODAY until tomorrow, SOLD_OUT on the last day", async () => {
    const activity = await lottery.create(OPERATOR, {
      title: 'last day',
      startsAt: '2027-12-09T00:00:00+08:00',
      endsAt: '2027-12-11T20:00:00+08:00',
      drawCostPoints: 1,
      noPrizeWeight: 0,
      prizes: [{ title: 'A', weight: 1, totalStock: 100, dailyStock: 1 }],
    });
    await pointsAt(lot.server.url).award(OPERATOR, { userId: 'last-day', amount: 10 });
    await moveClockTo(lot.stores.redis, Date.parse('2027-12-10T12:00:00+08:00'));
    expect((await lottery.draw('last-day', activity.id)).__typename).toBe('LotteryWin');
    expect(await lottery.draw('last-day', activity.id)).toMatchObject({ __typename: 'ActivityNotActive', reason: 'SOLD_OUT_TODAY', availableAt: '2027-12-10T16:00:00.000Z' });
    // The next midnight comes after the end: nothing is left to win in this activity.
    await moveClockTo(lot.stores.redis, Date.parse('2027-12-11T12:00:00+08:00'));
    expect((await lottery.draw('last-day', activity.id)).__typename).toBe('LotteryWin');
    expect(await lottery.draw('last-day', activity.id)).toMatchObject({ __typename: 'ActivityNotActive', reason: 'SOLD_OUT', availableAt: null });
    await expectLotteryInvariants(lot.stores, activity.id);
  });
});

describe('local days and hours from the stored offset table', () => {
  it('finds the DST transitions of the window to the millisecond', () => {
    const table = utcOffsetTable('America/New_York', Date.parse('2027-03-01T00:00:00Z'), Date.parse('2027-11-30T00:00:00Z'));
    expect(table.slice(1)).toEqual([
      [Date.parse('2027-03-14T07:00:00Z'), -240],
      [Date.parse('2027-11-07T06:00:00Z'), -300],
    ]);
    expect(table[0]).toEqual([0, -300]);
    expect(utcOffsetTable('Asia/Shanghai', Date.parse('2027-01-01T00:00:00Z'), Date.parse('2027-12-31T00:00:00Z'))).toEqual([[0, 480]]);
  });

  it('numbers local days and hours, half-hour zones included', () => {
    const shanghai = utcOffsetTable('Asia/Shanghai', Date.parse('2027-01-01T00:00:00Z'), Date.parse('2027-01-31T00:00:00Z'));
    expect(localDay(shanghai, Date.parse('2027-01-10T15:59:59.999Z')) + 1).toBe(localDay(shanghai, Date.parse('2027-01-10T16:00:00Z')));
    expect(nextLocalMidnight(shanghai, localDay(shanghai, Date.parse('2027-01-10T03:00:00Z')))).toBe(Date.parse('2027-01-10T16:00:00Z'));
    // Santiago: DST begins at midnight (the 5th starts at 01:00 -03) and ends there (clocks go back
    // from 00:00 -03 to 23:00 -04, so the 4th of April starts at 00:00 -04).
    const santiago = utcOffsetTable('America/Santiago', Date.parse('2027-03-01T00:00:00Z'), Date.parse('2027-10-01T00:00:00Z'));
    expect(nextLocalMidnight(santiago, localDay(santiago, Date.parse('2027-09-04T12:00:00Z')))).toBe(Date.parse('2027-09-05T04:00:00Z'));
    expect(nextLocalMidnight(santiago, localDay(santiago, Date.parse('2027-04-03T12:00:00Z')))).toBe(Date.parse('2027-04-04T04:00:00Z'));
    const kolkata = utcOffsetTable('Asia/Kolkata', Date.parse('2027-01-01T00:00:00Z'), Date.parse('2027-01-31T00:00:00Z'));
    const hour = localHourStart(kolkata, Date.parse('2027-01-10T10:45:00Z'));
    expect(new Date(hour).toISOString()).toBe('2027-01-10T10:30:00.000Z');
    expect(localHourOfDay(kolkata, hour)).toBe(16);
  });
});
