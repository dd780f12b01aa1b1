import { randomInt } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type App, createApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { createLogger } from '../src/infra/logger.ts';
import { testEnv } from './support/env.ts';
import { startedServer } from './support/lifecycle.ts';
import { type LotteryClient, lotteryAt } from './support/lottery.ts';
import { expectLotteryInvariants } from './support/lotteryInvariants.ts';
import { moveClockTo } from './support/testClock.ts';

// Draws go over HTTP to a server; the schedule is run by two more instances in this
// process, on demand (their timers, and the server's, are an hour apart). All of them
// see the test clock.
const HOUR = 3_600_000;
const env = testEnv('lot_timed', { TEST_CLOCK: '1', LOTTERY_SCHEDULE_INTERVAL_MS: String(HOUR) });
const lot = startedServer(env);
const OPERATOR = 'lot_timed-op';
let lottery: LotteryClient;
const apps: App[] = [];

beforeAll(async () => {
  lottery = lotteryAt(lot.server.url);
  const config = loadConfig({ ...env.vars, LOG_LEVEL: 'silent' });
  for (let i = 0; i < 2; i++) apps.push(await createApp(config, createLogger(config.LOG_LEVEL)));
});

afterAll(async () => {
  for (const app of apps) await app.close().catch(() => undefined);
});

const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);
let drawer = 0;
const draw = (activityId: string, user = `drawer-${drawer++}`) => lottery.draw(user, activityId);

/** Draws until the consolation prize comes out; returns the titles of the prizes won before it. */
async function drawUntilConsolation(activityId: string): Promise<string[]> {
  const won: string[] = [];
  for (;;) {
    const result = await draw(activityId);
    if (result.__typename !== 'LotteryWin') throw new Error(`a TIMED draw did not win: ${JSON.stringify(result)}`);
    if (result.prize.kind === 'CONSOLATION') return won;
    won.push(result.prize.title);
  }
}

const quotas = (max: number) => Array.from({ length: 24 }, () => randomInt(0, max + 1));

describe('TIMED: prizes released over the day', () => {
  it('releases exactly the hourly quotas over a simulated day; nothing before its release time; every draw wins', async () => {
    const start = Date.parse('2027-02-01T00:00:00+08:00');
    const gold = quotas(3);
    const points = quotas(2);
    await moveClockTo(lot.stores.redis, start - 3 * HOUR);
    const activity = await lottery.create(OPERATOR, {
      title: 'a day of releases',
      strategy: 'TIMED',
      startsAt: new Date(start).toISOString(),
      // A few minutes into the next day, so the last hour's draws (which take a moment) are inside the window.
      endsAt: new Date(start + 24 * HOUR + 10 * 60_000).toISOString(),
      prizes: [
        { title: 'gold', totalStock: 1_000, hourlyQuota: gold },
        { title: 'points', kind: 'POINTS', points: 10, totalStock: 1_000, hourlyQuota: points },
        { title: 'thanks', kind: 'CONSOLATION', totalStock: 100_000 },
      ],
    });
    expect(await lot.stores.redis.zcard(`{lot:${activity.id}}:releases`), 'nothing scheduled three hours ahead').toBe(0);

    // At the last millisecond of each hour: the scheduler runs (the next hour gets
    // scheduled), and draws take everything released, then the consolation prize.
    for (let hour = 0; hour < 24; hour++) {
      await moveClockTo(lot.stores.redis, start + (hour + 1) * HOUR - 1);
      await apps[0]!.lottery.scheduleDue();
      await drawUntilConsolation(activity.id);
    }

    // Per hour of the day: released = drawn = that hour's quotas. The next day's first hour is scheduled, not drawn.
    const { rows } = await lot.stores.sql.query<{ hour: number; prize: string; released: number; drawn: number }>(
      `SELECT (extract(epoch FROM r.hour_start - to_timestamp($2 / 1000.0)) / 3600)::int AS hour, p.title AS prize,
         count(*)::int AS released, count(d.id)::int AS drawn
       FROM lottery_release r JOIN lottery_prize p ON p.id = r.prize_id
       LEFT JOIN lottery_draw d ON d.prize_id = r.prize_id AND d.stock_unit = r.stock_unit
       WHERE r.activity_id = $1 GROUP BY 1, 2`,
      [activity.id, start],
    );
    const count = (hour: number, prize: string) => rows.find((row) => row.hour === hour && row.prize === prize) ?? { released: 0, drawn: 0 };
    for (let hour = 0; hour < 24; hour++) {
      expect([count(hour, 'gold').released, count(hour, 'gold').drawn], `gold, hour ${hour}`).toEqual([gold[hour], gold[hour]]);
      expect([count(hour, 'points').released, count(hour, 'points').drawn], `points, hour ${hour}`).toEqual([points[hour], points[hour]]);
    }
    expect(count(24, 'gold').drawn + count(24, 'points').drawn).toBe(0);

    const draws = await expectLotteryInvariants(lot.stores, activity.id);
    expect(
      draws.every((row) => row.prize_id !== null),
      'every draw won something',
    ).toBe(true);
    const released = draws.filter((row) => row.release_at !== null);
    expect(released).toHaveLength(sum(gold) + sum(points));
    for (const row of released) expect(row.release_at!.getTime(), 'drawn after its release').toBeLessThanOrEqual(row.drawn_at.getTime());

    const lotteryActivity = await lottery.activity(OPERATOR, activity.id, { admin: true });
    expect(lotteryActivity?.prizes.map((prize) => prize.remainingStock)).toEqual([1_000 - sum(gold), 1_000 - sum(points), 100_000 - (draws.length - released.length)]);
  });

  it('schedules each hour once when two instances run the schedule at the same time, twice over; catches up missed hours', async () => {
    const start = Date.parse('2027-03-01T00:00:00+08:00');
    const gold = quotas(4);
    await moveClockTo(lot.stores.redis, start - 3 * HOUR);
    const activity = await lottery.create(OPERATOR, {
      title: 'two schedulers',
      strategy: 'TIMED',
      startsAt: new Date(start).toISOString(),
      endsAt: new Date(start + 6 * HOUR).toISOString(),
      prizes: [
        { title: 'gold', totalStock: 1_000, hourlyQuota: gold },
        { title: 'thanks', kind: 'CONSOLATION', totalStock: 100_000 },
      ],
    });

    // Nothing ran while the clock crossed three and a half hours: catch up, from both instances at once.
    const now = start + 3.5 * HOUR;
    await moveClockTo(lot.stores.redis, now);
    const released = await Promise.all([...apps, ...apps].map((app) => app.lottery.scheduleDue()));
    const expected = sum(gold.slice(0, 5));
    expect(sum(released)).toBe(expected);
    expect(await Promise.all(apps.map((app) => app.lottery.scheduleDue()))).toEqual([0, 0]);

    const { rows: hours } = await lot.stores.sql.query<{ hour_start: Date; released: number }>(
      'SELECT hour_start, released FROM lottery_scheduled_hour WHERE activity_id = $1 ORDER BY hour_start',
      [activity.id],
    );
    expect(hours.map((row) => [row.hour_start.getTime(), row.released])).toEqual(gold.slice(0, 5).map((n, hour) => [start + hour * HOUR, n]));
    expect(await lot.stores.redis.zcard(`{lot:${activity.id}}:releases`)).toBe(expected);

    // Everything released by now is there to be drawn, once; what is left is released later.
    const { rows: due } = await lot.stores.sql.query<{ n: number }>('SELECT count(*)::int AS n FROM lottery_release WHERE activity_id = $1 AND release_at <= to_timestamp($2 / 1000.0)', [
      activity.id,
      now,
    ]);
    expect((await drawUntilConsolation(activity.id)).length).toBeGreaterThanOrEqual(due[0]!.n);
    const [, nextRelease] = await lot.stores.redis.zrange(`{lot:${activity.id}}:releases`, 0, 0, 'WITHSCORES');
    if (nextRelease !== undefined) expect(Number(nextRelease)).toBeGreaterThan(now);
    await expectLotteryInvariants(lot.stores, activity.id);
  });

  it('takes the stock when it schedules: a short stock runs out in the schedule, a top-up and a new quota feed later hours', async () => {
    const start = Date.parse('2027-04-01T00:00:00+08:00');
    await moveClockTo(lot.stores.redis, start - 3 * HOUR);
    const activity = await lottery.create(OPERATOR, {
      title: 'short stock',
      strategy: 'TIMED',
      startsAt: new Date(start).toISOString(),
      endsAt: new Date(start + 10 * HOUR).toISOString(),
      dailyWinLimit: 1,
      prizes: [
        { title: 'gold', totalStock: 5, hourlyQuota: Array(24).fill(3) },
        { title: 'thanks', kind: 'CONSOLATION', totalStock: 1_000 },
      ],
    });
    const [gold] = activity.prizes;
    const scheduledPerHour = async () =>
      (await lot.stores.sql.query<{ released: number }>('SELECT released FROM lottery_scheduled_hour WHERE activity_id = $1 ORDER BY hour_start', [activity.id])).rows.map(
        (row) => row.released,
      );

    await moveClockTo(lot.stores.redis, start + 1.5 * HOUR);
    await apps[1]!.lottery.scheduleDue();
    expect(await scheduledPerHour()).toEqual([3, 2, 0]);

    // The daily win limit: a user who won a released prize today gets the consolation prize.
    const first = await draw(activity.id, 'limited');
    expect(first).toMatchObject({ __typename: 'LotteryWin', prize: { title: 'gold' } });
    expect(await draw(activity.id, 'limited')).toMatchObject({ __typename: 'LotteryWin', prize: { title: 'thanks' } });

    const updateLotteryActivity = await lottery.update(OPERATOR, activity.id, { prizes: [{ prizeId: gold!.id, addStock: 10, hourlyQuota: Array(24).fill(4) }] });
    expect(updateLotteryActivity).toMatchObject({ __typename: 'LotteryActivity', settingsVersion: 2 });
    await moveClockTo(lot.stores.redis, start + 3.5 * HOUR);
    await apps[1]!.lottery.scheduleDue();
    // Hours 0-2 keep what they had; 3 and 4 get the new quota from the topped-up stock (15 in all).
    expect(await scheduledPerHour()).toEqual([3, 2, 0, 4, 4]);
    const { rows } = await lot.stores.sql.query<{ total_stock: number }>('SELECT total_stock FROM lottery_prize WHERE id = $1', [gold!.id]);
    expect(rows[0]!.total_stock).toBe(15);
    await expectLotteryInvariants(lot.stores, activity.id);
  });

  it('releases nothing for the hours that begin while it is paused; a resume gives the next hours their quota', async () => {
    const start = Date.parse('2027-05-01T00:00:00+08:00');
    await moveClockTo(lot.stores.redis, start - 3 * HOUR);
    const activity = await lottery.create(OPERATOR, {
      title: 'a pause',
      strategy: 'TIMED',
      startsAt: new Date(start).toISOString(),
      endsAt: new Date(start + 10 * HOUR).toISOString(),
      prizes: [
        { title: 'gold', totalStock: 100, hourlyQuota: Array(24).fill(2) },
        { title: 'thanks', kind: 'CONSOLATION', totalStock: 1_000 },
      ],
    });
    const scheduledPerHour = async () =>
      (await lot.stores.sql.query<{ released: number }>('SELECT released FROM lottery_scheduled_hour WHERE activity_id = $1 ORDER BY hour_start', [activity.id])).rows.map(
        (row) => row.released,
      );

    // Hour 0 runs; at 0:10 hour 1 is scheduled ahead (the look-ahead), then the pause.
    await moveClockTo(lot.stores.redis, start + 10 * 60_000);
    await apps[0]!.lottery.scheduleDue();
    expect(await scheduledPerHour()).toEqual([2, 2]);
    expect(await lottery.update(OPERATOR, activity.id, { paused: true })).toMatchObject({ status: 'PAUSED' });

    // Hours 2 and 3 begin while paused: scheduled empty. Hour 4, still ahead, waits.
    await moveClockTo(lot.stores.redis, start + 3.5 * HOUR);
    await Promise.all(apps.map((app) => app.lottery.scheduleDue()));
    expect(await scheduledPerHour()).toEqual([2, 2, 0, 0]);

    // Resumed before hour 4: it gets its quota, and nothing of the paused hours comes back.
    expect(await lottery.update(OPERATOR, activity.id, { paused: false })).toMatchObject({ status: 'ACTIVE' });
    await apps[1]!.lottery.scheduleDue();
    expect(await scheduledPerHour()).toEqual([2, 2, 0, 0, 2]);
    // Released by now: hours 0 and 1 only (hour 4's instants are still ahead).
    expect(await drawUntilConsolation(activity.id)).toEqual(['gold', 'gold', 'gold', 'gold']);
    const admin = await lottery.activity(OPERATOR, activity.id, { admin: true });
    expect(admin?.prizes[0]?.remainingStock).toBe(100 - 4);
    await expectLotteryInvariants(lot.stores, activity.id);
  });

  it("answers NOTHING_RELEASED with the end of the next release's hour or endsAt, never its instant; a draw then wins it", async () => {
    // Asia/Kolkata is UTC+5:30: its hours end at half past a UTC hour. Hour 0 releases from
    // the start (0:20), hour 1 until the end (1:45).
    const start = Date.parse('2027-06-01T00:20:00+05:30');
    const end = Date.parse('2027-06-01T01:45:00+05:30');
    const hour1 = Date.parse('2027-06-01T01:00:00+05:30');
    await moveClockTo(lot.stores.redis, start - 3 * HOUR);
    const activity = await lottery.create(OPERATOR, {
      title: 'short of consolation',
      strategy: 'TIMED',
      timezone: 'Asia/Kolkata',
      startsAt: new Date(start).toISOString(),
      endsAt: new Date(end).toISOString(),
      prizes: [
        { title: 'gold', totalStock: 10, hourlyQuota: Array(24).fill(1) },
        { title: 'thanks', kind: 'CONSOLATION', totalStock: 1 },
      ],
    });
    await moveClockTo(lot.stores.redis, start);
    expect(await draw(activity.id)).toMatchObject({ __typename: 'LotteryWin', prize: { title: 'thanks' } });
    // Prizes still to come, none scheduled yet: no time to tell.
    expect(await draw(activity.id)).toMatchObject({ __typename: 'ActivityNotActive', reason: 'NOTHING_RELEASED', availableAt: null });

    await apps[0]!.lottery.scheduleDue();
    const [, first, , second] = (await lot.stores.redis.zrange(`{lot:${activity.id}}:releases`, 0, -1, 'WITHSCORES')).map(Number);
    expect(first).toBeLessThan(hour1);
    expect(second).toBeGreaterThanOrEqual(hour1);

    // Hour 0's prize: told when hour 0 ends, and there it is.
    expect(await draw(activity.id)).toMatchObject({ __typename: 'ActivityNotActive', reason: 'NOTHING_RELEASED', availableAt: new Date(hour1).toISOString() });
    await moveClockTo(lot.stores.redis, hour1);
    expect(await draw(activity.id)).toMatchObject({ __typename: 'LotteryWin', prize: { title: 'gold' } });

    // Hour 1's prize: the activity ends before the hour does, and the prize comes before the end.
    expect(await draw(activity.id)).toMatchObject({ __typename: 'ActivityNotActive', reason: 'NOTHING_RELEASED', availableAt: new Date(end).toISOString() });
    expect(second).toBeLessThan(end);
    await expectLotteryInvariants(lot.stores, activity.id);
  });
});
