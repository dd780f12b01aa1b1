import { expect } from 'vitest';
import { replayWeightedDraw } from '../../src/domain/lottery/choice.ts';
import type { LotterySettings } from '../../src/domain/lottery/settings.ts';
import { localDate, localDay } from '../../src/domain/lottery/timezone.ts';
import type { Stores } from './stores.ts';

export interface DrawRow {
  id: string;
  user_id: string;
  request_id: string | null;
  local_day: string;
  draw_seq: number;
  prize_id: string | null;
  stock_unit: number | null;
  daily_unit: number | null;
  win_seq: number | null;
  release_at: Date | null;
  random_input: string | null;
  weight_total: number | null;
  roll: number | null;
  pool: number[];
  settings_version: number;
  prize_snapshot: Record<string, unknown> | null;
  drawn_at: Date;
}

const keysOf = (activityId: string) => {
  const tag = `{lot:${activityId}}`;
  return { meta: `${tag}:meta`, stock: `${tag}:stock`, daily: `${tag}:daily`, requests: `${tag}:requests`, releases: `${tag}:releases`, hours: `${tag}:hours`, journal: `${tag}:journal` };
};

const countBy = <T>(items: T[], keyOf: (item: T) => string) => {
  const counts = new Map<string, number>();
  for (const item of items) counts.set(keyOf(item), (counts.get(keyOf(item)) ?? 0) + 1);
  return counts;
};

export async function loadSettingsHistory(stores: Stores, activityId: string): Promise<Map<number, LotterySettings>> {
  const { rows } = await stores.sql.query<{ version: number; settings: LotterySettings }>('SELECT version, settings FROM lottery_settings WHERE activity_id = $1', [activityId]);
  return new Map(rows.map((row) => [row.version, row.settings]));
}

export async function loadDraws(stores: Stores, activityId: string): Promise<DrawRow[]> {
  const { rows } = await stores.sql.query<DrawRow>(
    `SELECT id, user_id, request_id, to_char(local_day, 'YYYY-MM-DD') AS local_day, draw_seq, prize_id, stock_unit, daily_unit, win_seq, release_at,
       random_input::text, weight_total, roll, pool, settings_version, prize_snapshot, drawn_at
     FROM lottery_draw WHERE activity_id = $1 ORDER BY drawn_at, id`,
    [activityId],
  );
  return rows;
}

/**
 * Every lottery invariant of docs/architecture.md, checked in PostgreSQL and Redis: no unit of a
 * prize granted twice or beyond its stock (total and daily), no user beyond the daily
 * limits of the settings their draw ran under, every draw consistent with the settings
 * of its version (snapshot and, for WEIGHTED, a replay of its random input), TIMED
 * prizes never drawn before their release, and Redis agreeing with PostgreSQL once
 * the journal is drained. Returns the durable draws.
 */
export async function expectLotteryInvariants(stores: Stores, activityId: string): Promise<DrawRow[]> {
  const history = await loadSettingsHistory(stores, activityId);
  expect(history.size, `settings of ${activityId} in PostgreSQL`).toBeGreaterThan(0);
  const current = history.get(Math.max(...history.keys()))!;
  const draws = await loadDraws(stores, activityId);
  const { rows: releases } = await stores.sql.query<{ prize_id: string; stock_unit: number; release_at: Date; hour_start: Date }>(
    'SELECT prize_id, stock_unit, release_at, hour_start FROM lottery_release WHERE activity_id = $1',
    [activityId],
  );
  const { rows: prizeRows } = await stores.sql.query<{ id: string; total_stock: number; weight: number }>('SELECT id, total_stock, weight FROM lottery_prize WHERE activity_id = $1', [
    activityId,
  ]);
  // The prize rows follow the newest settings.
  for (const prize of current.prizes) expect(prizeRows.find((row) => row.id === prize.id)).toMatchObject({ total_stock: prize.totalStock, weight: prize.weight });

  const wins = draws.filter((draw) => draw.prize_id !== null);
  for (const draw of draws) {
    const settings = history.get(draw.settings_version);
    expect(settings, `settings version ${draw.settings_version} of draw ${draw.id}`).toBeDefined();
    const limits = settings!;
    if (limits.dailyDrawLimit > 0) expect(draw.draw_seq, `draw ${draw.id}: over the daily draw limit`).toBeLessThanOrEqual(limits.dailyDrawLimit);
    if (draw.win_seq !== null && limits.dailyWinLimit > 0) expect(draw.win_seq, `draw ${draw.id}: over the daily win limit`).toBeLessThanOrEqual(limits.dailyWinLimit);
    expect(draw.local_day).toBe(localDate(localDay(limits.utcOffsets, draw.drawn_at.getTime())));
    if (draw.prize_id !== null) {
      const prize = limits.prizes.find((candidate) => candidate.id === draw.prize_id)!;
      expect(prize, `draw ${draw.id} won a prize of the activity`).toBeDefined();
      const { hourlyQuota: _, ...snapshot } = prize;
      expect(draw.prize_snapshot).toEqual(snapshot);
      expect(draw.stock_unit).toBeGreaterThanOrEqual(1);
      expect(draw.stock_unit).toBeLessThanOrEqual(prize.totalStock);
      if (prize.dailyStock > 0) expect(draw.daily_unit, `draw ${draw.id}: over the daily stock`).toBeLessThanOrEqual(prize.dailyStock);
    }
    if (limits.strategy === 'WEIGHTED') {
      const { prizes: pool, choice } = replayWeightedDraw(limits, draw.pool, Number(draw.random_input ?? 0));
      expect(choice.kind, `draw ${draw.id} replays`).toBe('chosen');
      if (choice.kind === 'chosen') {
        expect(draw.roll).toBe(choice.roll);
        expect(draw.weight_total).toBe(choice.roll === null ? null : choice.total);
        expect(draw.prize_id, `draw ${draw.id} replays to the same prize`).toBe(choice.index === null ? null : pool[choice.index]?.id);
      }
    } else {
      expect(draw.prize_id, `TIMED draw ${draw.id} won something`).not.toBeNull();
      if (draw.release_at !== null) {
        expect(draw.release_at.getTime(), `draw ${draw.id} before its release`).toBeLessThanOrEqual(draw.drawn_at.getTime());
        expect(releases.some((release) => release.prize_id === draw.prize_id && release.stock_unit === draw.stock_unit)).toBe(true);
      }
    }
  }

  // Units, daily units and per-user sequences are unique, and the stock is never exceeded.
  const unique = (values: string[], what: string) => expect(new Set(values).size, what).toBe(values.length);
  unique(
    wins.map((draw) => `${draw.prize_id}:${draw.stock_unit}`),
    'a prize unit granted twice',
  );
  unique(
    wins.map((draw) => `${draw.prize_id}:${draw.local_day}:${draw.daily_unit}`),
    'a daily unit granted twice',
  );
  unique(
    draws.map((draw) => `${draw.user_id}:${draw.local_day}:${draw.draw_seq}`),
    'a draw counted twice',
  );
  unique(
    draws.filter((draw) => draw.win_seq !== null).map((draw) => `${draw.user_id}:${draw.local_day}:${draw.win_seq}`),
    'a win counted twice',
  );
  unique(
    draws.filter((draw) => draw.request_id !== null).map((draw) => `${draw.user_id}:${draw.request_id}`),
    'a requestId drawn twice',
  );
  unique(
    releases.map((release) => `${release.prize_id}:${release.stock_unit}`),
    'a unit released twice',
  );
  const wonPerPrize = countBy(wins, (draw) => draw.prize_id!);
  for (const prize of current.prizes) expect(wonPerPrize.get(prize.id) ?? 0, `wins of ${prize.title}`).toBeLessThanOrEqual(prize.totalStock);
  for (const release of releases) expect(release.release_at.getTime() - release.hour_start.getTime()).toBeLessThan(3_600_000);

  // Redis, when it holds the activity and its journal is drained: the same books.
  const keys = keysOf(activityId);
  if ((await stores.redis.exists(keys.meta)) === 1 && (await stores.redis.xlen(keys.journal)) === 0) {
    const settings = JSON.parse((await stores.redis.hget(keys.meta, 'settings'))!) as LotterySettings;
    expect(settings).toEqual(current);
    const stock = await stores.redis.hgetall(keys.stock);
    for (const prize of settings.prizes) {
      const units = [
        ...wins.filter((draw) => draw.prize_id === prize.id).map((draw) => draw.stock_unit!),
        ...releases.filter((release) => release.prize_id === prize.id).map((release) => release.stock_unit),
      ];
      expect(Number(stock[prize.id]), `stock of ${prize.title} in Redis`).toBe(prize.totalStock - Math.max(0, ...units));
    }
    const daily = await stores.redis.hgetall(keys.daily);
    if (daily.day) {
      const today = draws.filter((draw) => draw.local_day === localDate(Number(daily.day)));
      const expected: Record<string, string> = { day: daily.day };
      for (const draw of today) {
        expected[`d:${draw.user_id}`] = String(Math.max(Number(expected[`d:${draw.user_id}`] ?? 0), draw.draw_seq));
        if (draw.win_seq !== null) expected[`w:${draw.user_id}`] = String(Math.max(Number(expected[`w:${draw.user_id}`] ?? 0), draw.win_seq));
        if (draw.prize_id !== null) expected[`s:${draw.prize_id}`] = String(Math.max(Number(expected[`s:${draw.prize_id}`] ?? 0), draw.daily_unit!));
      }
      expect(daily).toEqual(expected);
    }
    const requests = await stores.redis.hgetall(keys.requests);
    const expectedRequests = Object.fromEntries(
      draws
        .filter((draw) => draw.request_id !== null)
        .map((draw) => [`${draw.user_id}\n${draw.request_id}`, `${draw.id}|${draw.prize_id ?? ''}|${draw.drawn_at.getTime()}|${draw.settings_version}`]),
    );
    expect(requests).toEqual(expectedRequests);
    if (settings.strategy === 'TIMED') {
      const drawn = new Set(wins.map((draw) => `${draw.prize_id}:${draw.stock_unit}`));
      const pending = releases.filter((release) => !drawn.has(`${release.prize_id}:${release.stock_unit}`)).map((release) => `${release.prize_id}:${release.stock_unit}`);
      expect((await stores.redis.zrange(keys.releases, 0, -1)).sort()).toEqual(pending.sort());
      const { rows: hours } = await stores.sql.query<{ hour_start: Date }>('SELECT hour_start FROM lottery_scheduled_hour WHERE activity_id = $1', [activityId]);
      expect((await stores.redis.smembers(keys.hours)).map(Number).sort()).toEqual(hours.map((row) => row.hour_start.getTime()).sort());
    }
  }
  return draws;
}
