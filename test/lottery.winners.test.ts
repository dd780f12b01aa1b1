import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { winnersTopic } from '../src/domain/lottery/winners.ts';
import { aliasScope } from '../src/domain/privacy.ts';
import { LotteryWinnersDocument, type LotteryWinnersSubscription } from './gql/generated.ts';
import { type Subscription, subscribeSse, subscribeWs } from './support/client.ts';
import { TEST_REDIS_URL, testEnv } from './support/env.ts';
import { twoInstances } from './support/lifecycle.ts';
import { lotteryAt } from './support/lottery.ts';
import { pointsAt } from './support/points.ts';
import { sleep } from './support/poll.ts';
import { aliasOf } from './support/privacy.ts';
import { tokenOf } from './support/tokens.ts';

// Two instances of one deployment: wins drawn on one reach subscribers of the other.
const env = testEnv('lot_winners');
const instances = twoInstances(env);
const { track } = instances;
let admin: string;
// Listens on the ticker's Redis channel: what every instance's streams are fed.
const channels = new Redis(TEST_REDIS_URL, { lazyConnect: true });

beforeAll(async () => {
  admin = await tokenOf('winners-op', { admin: true });
});

afterAll(() => {
  channels.disconnect();
});

const now = Date.now();

/** Every draw wins, until the stock runs out. */
async function createActivity(totalStock: number) {
  return lotteryAt(instances.server.url).create('winners-op', {
    title: 'ticker',
    startsAt: new Date(now - 60_000).toISOString(),
    endsAt: new Date(now + 3_600_000).toISOString(),
    prizes: [{ title: '谢谢参与大奖', weight: 1, totalStock }],
  });
}

async function draw(activityId: string, user: string, requestId?: string) {
  return lotteryAt(instances.other.url).draw(user, activityId, requestId);
}

/** The draw ids of every win the ticker announces for the activity from now on, in order. */
async function announcedWins(activityId: string): Promise<string[]> {
  const channel = env.keyPrefix + winnersTopic(activityId);
  const drawIds: string[] = [];
  channels.on('message', (from: string, message: string) => {
    if (from === channel) drawIds.push(...(JSON.parse(message) as { drawId: string }[]).map((win) => win.drawId));
  });
  await channels.subscribe(channel);
  return drawIds;
}

/** What users other than the winner (operators aside) see of them in the activity. */
const alias = (activityId: string, userId: string) => aliasOf(aliasScope.lottery(activityId), userId);

const wins = (events: { data?: LotteryWinnersSubscription | null }[]) => events.flatMap((event) => (event.data ? [event.data.lotteryWinners] : []));

describe('lotteryWinners streams wins for the "恭喜 xxx 抽中了…" ticker', () => {
  it('yields the latest wins, then every new win in order, across instances; user ids aliased for everyone but operators and the winner', async () => {
    const activity = await createActivity(100);
    for (const user of ['early-alice', 'early-bob', 'early-carol']) await draw(activity.id, user);

    const viewer = track(subscribeSse(instances.server.url, LotteryWinnersDocument, { activityId: activity.id, recent: 2 }, await tokenOf('viewer')));
    // A recent win arrives only once a subscription listens: then nothing new can be missed.
    const operator = track(subscribeWs(instances.server.url, LotteryWinnersDocument, { activityId: activity.id, recent: 1 }, admin));
    const winner = track(subscribeWs(instances.server.url, LotteryWinnersDocument, { activityId: activity.id, recent: 1 }, await tokenOf('late-0')));
    await Promise.all([viewer, operator, winner].map((subscription, i) => subscription.until((events) => wins(events).length === (i === 0 ? 2 : 1))));
    expect(wins(viewer.events).map((win) => win.userId)).toEqual([alias(activity.id, 'early-bob'), alias(activity.id, 'early-carol')]);
    expect(wins(operator.events).map((win) => win.userId)).toEqual(['early-carol']);

    const late = Array.from({ length: 5 }, (_, i) => `late-${i}`);
    const drawn: string[] = [];
    for (const user of late) {
      const result = await draw(activity.id, user);
      if (result.__typename !== 'LotteryWin') throw new Error(JSON.stringify(result));
      drawn.push(result.drawId);
    }
    await viewer.until((events) => wins(events).length === 7);
    await operator.until((events) => wins(events).length === 6);
    await winner.until((events) => wins(events).length === 6);

    expect(
      wins(viewer.events)
        .slice(2)
        .map((win) => win.drawId),
    ).toEqual(drawn);
    expect(
      wins(viewer.events)
        .slice(2)
        .map((win) => win.userId),
    ).toEqual(late.map((user) => alias(activity.id, user)));
    expect(
      wins(operator.events)
        .slice(1)
        .map((win) => win.userId),
    ).toEqual(late);
    expect(
      wins(winner.events)
        .slice(1)
        .map((win) => win.userId),
    ).toEqual(['late-0', ...late.slice(1).map((user) => alias(activity.id, user))]);
    for (const win of wins(operator.events)) expect(win).toMatchObject({ settingsVersion: 1, prize: { title: '谢谢参与大奖', kind: 'GOODS' } });
    expect(viewer.events.every((event) => event.errors === undefined)).toBe(true);
  });

  it('does not stream losses', async () => {
    const activity = await createActivity(2);
    expect((await draw(activity.id, 'first')).__typename).toBe('LotteryWin');
    const watcher = track(subscribeSse(instances.server.url, LotteryWinnersDocument, { activityId: activity.id, recent: 1 }, await tokenOf('watcher')));
    await watcher.until((events) => wins(events).length === 1);
    expect((await draw(activity.id, 'lucky')).__typename).toBe('LotteryWin');
    expect((await draw(activity.id, 'unlucky')).__typename).toBe('LotteryLose');
    expect((await draw(activity.id, 'also-unlucky')).__typename).toBe('LotteryLose');
    await watcher.until((events) => wins(events).length === 2);
    await sleep(300);
    expect(wins(watcher.events).map((win) => win.userId)).toEqual([alias(activity.id, 'first'), alias(activity.id, 'lucky')]);
  });

  it('refuses an unknown activity, a missing token and a bad recent count', async () => {
    const activity = await createActivity(1);
    const cases: [Subscription<LotteryWinnersSubscription>, string][] = [
      [track(subscribeSse(instances.server.url, LotteryWinnersDocument, { activityId: 'nope' }, admin)), 'NOT_FOUND'],
      [track(subscribeWs(instances.server.url, LotteryWinnersDocument, { activityId: 'nope' }, admin)), 'NOT_FOUND'],
      [track(subscribeSse(instances.server.url, LotteryWinnersDocument, { activityId: activity.id })), 'UNAUTHENTICATED'],
      [track(subscribeSse(instances.server.url, LotteryWinnersDocument, { activityId: activity.id, recent: 51 }, admin)), 'BAD_USER_INPUT'],
    ];
    for (const [subscription, code] of cases) {
      const [first] = await subscription.until((events) => events.length >= 1);
      expect(first!.errors?.[0]?.extensions?.code, code).toBe(code);
    }
  });

  it('announces a retried draw once: a retry answered with the first win is not a new win, on either instance; its POINTS prize is credited once', async () => {
    const activity = await lotteryAt(instances.server.url).create('winners-op', {
      title: 'retried',
      startsAt: new Date(now - 60_000).toISOString(),
      endsAt: new Date(now + 3_600_000).toISOString(),
      noPrizeWeight: 0,
      prizes: [{ title: 'five points', kind: 'POINTS', points: 5, weight: 1, totalStock: 100 }],
    });
    const announced = await announcedWins(activity.id);
    const requestId = randomUUID();
    const first = await draw(activity.id, 'retrying-winner', requestId);
    if (first.__typename !== 'LotteryWin') throw new Error(JSON.stringify(first));
    // Watching from before the retries: had the win first.
    const early = track(subscribeWs(instances.server.url, LotteryWinnersDocument, { activityId: activity.id, recent: 1 }, admin));
    await early.until((events) => wins(events).length === 1);
    const newer = await draw(activity.id, 'newer-winner');
    // Watching from after a newer win: the retried one is not among its latest.
    const late = track(subscribeSse(instances.server.url, LotteryWinnersDocument, { activityId: activity.id, recent: 1 }, admin));
    await Promise.all([early.until((events) => wins(events).length === 2), late.until((events) => wins(events).length === 1)]);

    const retry = (i: number) => lotteryAt((i % 2 === 0 ? instances.server : instances.other).url).draw('retrying-winner', activity.id, requestId);
    const retries = [];
    for (let i = 0; i < 3; i++) retries.push(await retry(i));
    retries.push(...(await Promise.all(Array.from({ length: 10 }, (_, i) => retry(i)))));
    for (const retried of retries) expect(retried).toMatchObject({ __typename: 'LotteryWin', drawId: first.drawId });

    // A win drawn after the retries comes after whatever they announced.
    const last = await draw(activity.id, 'last-winner');
    await Promise.all([early.until((events) => wins(events).length >= 3), late.until((events) => wins(events).length >= 2)]);
    await expect.poll(() => announced.length).toBeGreaterThanOrEqual(3);
    await sleep(300);
    const drawn = [first, newer, last].map((win) => (win.__typename === 'LotteryWin' ? win.drawId : win.__typename));
    expect(announced).toEqual(drawn);
    expect(wins(early.events).map((win) => win.drawId)).toEqual(drawn);
    expect(wins(late.events).map((win) => win.drawId)).toEqual(drawn.slice(1));
    expect((await pointsAt(instances.server.url).me('retrying-winner')).pointsBalance).toBe(5);
    const { rows } = await instances.stores.sql.query('SELECT delta FROM points_ledger WHERE user_id = $1', ['retrying-winner']);
    expect(rows).toEqual([{ delta: 5 }]);
  });
});
