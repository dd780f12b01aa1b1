import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { DrawLotteryDocument, LotteryWinnersDocument, type LotteryWinnersSubscription, TeamStatusDocument, type TeamStatusSubscription } from './gql/generated.ts';
import { type Subscription, subscribeSse, subscribeWs } from './support/client.ts';
import { testEnv } from './support/env.ts';
import { startedServer } from './support/lifecycle.ts';
import { lotteryAt } from './support/lottery.ts';
import { teamsAt } from './support/teams.ts';
import { tokenOf } from './support/tokens.ts';

// A fast deadline sweeper, so a team past its deadline is FAILED within a fraction of a second.
const env = testEnv('subs_completion', { SWEEP_INTERVAL_MS: '200' });
const started = startedServer(env);
const OPERATOR = 'subs_completion-op';

type Subscribe = typeof subscribeSse;
const transports: [string, Subscribe][] = [
  ['SSE', subscribeSse],
  ['graphql-ws', subscribeWs],
];

const activityId = () => `done-${randomUUID().slice(0, 8)}`;
const teamStates = (subscription: Subscription<TeamStatusSubscription>) => subscription.events.map((event) => event.data?.teamStatus.status ?? event.errors);
const winIds = (subscription: Subscription<LotteryWinnersSubscription>) => subscription.events.map((event) => event.data?.lotteryWinners.drawId ?? event.errors);

describe.each(transports)('streams complete at the end, over %s', (_name, subscribe) => {
  it('teamStatus completes after COMPLETE, and at once for a subscriber who comes after', async () => {
    const teams = teamsAt(started.server.url);
    const team = await teams.open('leader', { activityId: activityId(), capacity: 2 });
    const watcher = subscribe(started.server.url, TeamStatusDocument, { teamId: team.id }, await tokenOf('leader'));
    await watcher.until((events) => events.length >= 1);
    await teams.lock('buyer', team.id);
    await teams.confirm('buyer', team.id, `pay-${randomUUID()}`);
    await watcher.until(() => watcher.completed(), 10_000);
    expect(teamStates(watcher).at(-1)).toBe('COMPLETE');
    expect(
      teamStates(watcher)
        .slice(0, -1)
        .every((status) => status === 'OPEN'),
    ).toBe(true);

    const late = subscribe(started.server.url, TeamStatusDocument, { teamId: team.id }, await tokenOf('leader'));
    await late.until(() => late.completed(), 10_000);
    expect(teamStates(late)).toEqual(['COMPLETE']);
  });

  it('teamStatus completes after FAILED at the deadline', async () => {
    const team = await teamsAt(started.server.url).open('hopeful', { activityId: activityId(), capacity: 3, formationSeconds: 1 });
    const watcher = subscribe(started.server.url, TeamStatusDocument, { teamId: team.id }, await tokenOf('hopeful'));
    await watcher.until(() => watcher.completed(), 10_000);
    expect(teamStates(watcher)).toEqual(['OPEN', 'FAILED']);

    const late = subscribe(started.server.url, TeamStatusDocument, { teamId: team.id }, await tokenOf('hopeful'));
    await late.until(() => late.completed(), 10_000);
    expect(teamStates(late)).toEqual(['FAILED']);
  });

  it('lotteryWinners completes once the activity has ENDED, after every win drawn before the end', async () => {
    const now = Date.now();
    const endsAt = now + 2_000;
    const lottery = lotteryAt(started.server.url);
    const activity = await lottery.create(OPERATOR, {
      title: 'last call',
      startsAt: new Date(now - 60_000).toISOString(),
      endsAt: new Date(endsAt).toISOString(),
      prizes: [{ title: 'mug', weight: 1, totalStock: 10_000 }],
    });
    const watcher = subscribe(started.server.url, LotteryWinnersDocument, { activityId: activity.id }, await tokenOf(OPERATOR, { admin: true }));
    await new Promise((resolve) => setTimeout(resolve, 300));
    // A crowd draws across the end: some draws are in flight when it comes.
    const draws: Promise<unknown>[] = [];
    while (Date.now() < endsAt + 200) {
      for (let i = 0; i < 10; i++) draws.push(lottery.raw(DrawLotteryDocument, { activityId: activity.id, requestId: randomUUID() }, 'crowd'));
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await watcher.until(() => watcher.completed(), 10_000);
    const completedAfterMs = Date.now() - endsAt;
    await Promise.all(draws);
    const { rows } = await started.stores.sql.query<{ id: string }>('SELECT id FROM lottery_draw WHERE activity_id = $1 AND prize_id IS NOT NULL ORDER BY id', [activity.id]);
    expect(rows.length).toBeGreaterThan(0);
    expect([...(winIds(watcher) as string[])].sort()).toEqual(rows.map((row) => row.id));
    expect(completedAfterMs).toBeLessThan(5_000);

    const late = subscribe(started.server.url, LotteryWinnersDocument, { activityId: activity.id, recent: 3 }, await tokenOf(OPERATOR, { admin: true }));
    await late.until(() => late.completed(), 10_000);
    expect(winIds(late)).toHaveLength(3);
  }, 30_000);

  it('lotteryWinners completes when an operator brings the end forward, not at the end it had', async () => {
    const now = Date.now();
    const lottery = lotteryAt(started.server.url);
    const activity = await lottery.create(OPERATOR, {
      title: 'cut short',
      startsAt: new Date(now - 60_000).toISOString(),
      endsAt: new Date(now + 3_600_000).toISOString(),
      prizes: [{ title: 'mug', weight: 1, totalStock: 100 }],
    });
    const watcher = subscribe(started.server.url, LotteryWinnersDocument, { activityId: activity.id }, await tokenOf(OPERATOR, { admin: true }));
    await new Promise((resolve) => setTimeout(resolve, 300));
    const endsAt = Date.now() + 1_000;
    expect(await lottery.update(OPERATOR, activity.id, { endsAt: new Date(endsAt).toISOString() })).toMatchObject({ __typename: 'LotteryActivity' });
    await watcher.until(() => watcher.completed(), 10_000);
    expect(Date.now() - endsAt).toBeLessThan(3_000);
  }, 30_000);
});
