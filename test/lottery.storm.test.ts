import { beforeAll, describe, expect, it } from 'vitest';
import { DrawLotteryDocument, type DrawLotteryMutation } from './gql/generated.ts';
import { testEnv } from './support/env.ts';
import { startedServer } from './support/lifecycle.ts';
import { type LotteryClient, lotteryAt, runningWindow } from './support/lottery.ts';
import { expectLotteryInvariants } from './support/lotteryInvariants.ts';
import { signAhead } from './support/tokens.ts';

const env = testEnv('lot_storm');
const lot = startedServer(env);
const OPERATOR = 'lot_storm-op';
let lottery: LotteryClient;

beforeAll(() => {
  lottery = lotteryAt(lot.server.url);
});

type DrawResult = DrawLotteryMutation['drawLottery'];

const shuffled = <T>(items: T[]) =>
  items
    .map((item) => [Math.random(), item] as const)
    .sort((a, b) => a[0] - b[0])
    .map(([, item]) => item);

describe('1,000 users drawing at once over HTTP', () => {
  it('never exceeds total or daily stock, nor any user’s daily draw or win limit; a repeated requestId counts once', async () => {
    const activity = await lottery.create(OPERATOR, {
      title: 'storm',
      ...runningWindow(),
      noPrizeWeight: 30,
      dailyDrawLimit: 3,
      dailyWinLimit: 2,
      prizes: [
        { title: 'gold', weight: 10, totalStock: 40, dailyStock: 25 },
        { title: 'silver', weight: 20, totalStock: 150 },
        { title: 'bronze', kind: 'POINTS', points: 5, weight: 40, totalStock: 100_000, dailyStock: 300 },
      ],
    });
    const [gold, silver, bronze] = activity.prizes;

    // Each user: four requestIds, the first one sent twice; 5,000 requests in flight at once.
    const users = Array.from({ length: 1000 }, (_, i) => `storm-${i}`);
    await signAhead(users);
    const requests = shuffled(users.flatMap((user) => [1, 2, 3, 4, 1].map((n) => ({ user, requestId: `${user}-r${n}` }))));
    const draw = async ({ user, requestId }: { user: string; requestId: string }) => {
      const { body } = await lottery.raw(DrawLotteryDocument, { activityId: activity.id, requestId }, user);
      expect(body.errors, JSON.stringify(body.errors)).toBeUndefined();
      return { user, requestId, result: body.data!.drawLottery };
    };
    const results = await Promise.all(requests.map(draw));

    const byRequest = new Map<string, DrawResult[]>();
    for (const { requestId, result } of results) byRequest.set(requestId, [...(byRequest.get(requestId) ?? []), result]);
    const drawIdOf = (result: DrawResult) => (result.__typename === 'LotteryWin' || result.__typename === 'LotteryLose' ? result.drawId : null);

    // The same requestId: the same draw, or refused both times.
    for (const [requestId, [first, second]] of byRequest) {
      if (second) expect(drawIdOf(second), requestId).toBe(drawIdOf(first!));
    }
    const acknowledged = new Map<string, { user: string; result: DrawResult }>();
    for (const { user, result } of results) {
      expect(['LotteryWin', 'LotteryLose', 'DrawLimitReached']).toContain(result.__typename);
      const drawId = drawIdOf(result);
      if (drawId) acknowledged.set(drawId, { user, result });
      if (result.__typename === 'DrawLimitReached') expect(result.dailyDrawLimit).toBe(3);
    }

    // Per user: at most 3 draws and 2 wins; with four requestIds each, every user hit the draw limit.
    const perUser = new Map<string, { draws: number; wins: number }>();
    for (const { user, result } of acknowledged.values()) {
      const counts = perUser.get(user) ?? { draws: 0, wins: 0 };
      counts.draws++;
      if (result.__typename === 'LotteryWin') counts.wins++;
      perUser.set(user, counts);
    }
    for (const user of users) {
      expect(perUser.get(user)?.draws, user).toBe(3);
      expect(perUser.get(user)!.wins, user).toBeLessThanOrEqual(2);
    }

    // Per prize: total and daily stock hold, and every one of them was drained.
    const wonOf = (prizeId: string) => [...acknowledged.values()].filter(({ result }) => result.__typename === 'LotteryWin' && result.prize.id === prizeId).length;
    expect(wonOf(gold!.id), 'gold: daily stock 25').toBe(25);
    expect(wonOf(silver!.id), 'silver: total stock 150').toBe(150);
    expect(wonOf(bronze!.id), 'bronze: daily stock 300').toBe(300);

    // Every acknowledged draw is in PostgreSQL, and nothing else is.
    const draws = await expectLotteryInvariants(lot.stores, activity.id);
    expect(new Set(draws.map((row) => row.id))).toEqual(new Set(acknowledged.keys()));
    for (const row of draws) {
      const { result } = acknowledged.get(row.id)!;
      expect(row.prize_id).toBe(result.__typename === 'LotteryWin' ? result.prize.id : null);
    }

    // The same 5,000 requests again: the first results, nothing counted.
    const again = await Promise.all(requests.map(draw));
    for (const { requestId, result } of again) expect(drawIdOf(result), requestId).toBe(drawIdOf(byRequest.get(requestId)![0]!));
    expect(await expectLotteryInvariants(lot.stores, activity.id)).toHaveLength(draws.length);

    const lotteryActivity = await lottery.activity(OPERATOR, activity.id, { admin: true });
    expect(lotteryActivity?.prizes.map((prize) => prize.remainingStock)).toEqual([40 - 25, 0, 100_000 - 300]);
  });
});
