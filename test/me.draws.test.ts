import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { DrawNotActiveDocument, LotteryActivitiesDocument, type LotteryStatus, MyDrawsDocument, type MyDrawsQuery, ServerTimesDocument } from './gql/generated.ts';
import { errorCodes, gql, requestsAt } from './support/client.ts';
import { testEnv } from './support/env.ts';
import { startedServer } from './support/lifecycle.ts';
import { lotteryAt } from './support/lottery.ts';
import { cursorOf, expectInvalidCursor } from './support/paging.ts';
import { waitFor } from './support/poll.ts';
import { redPacketsAt } from './support/redPackets.ts';
import { teamsAt } from './support/teams.ts';
import { tokenOf } from './support/tokens.ts';

const env = testEnv('me_draws');
const started = startedServer(env);
const OPERATOR = 'draws-operator';

/** A lottery running from a minute ago (unless told), for an hour. */
function lotteryInput(title: string, prizes: { weight: number; totalStock: number }[], noPrizeWeight: number, window: { startsInMs?: number; endsInMs?: number } = {}) {
  const now = Date.now();
  return {
    title,
    startsAt: new Date(now + (window.startsInMs ?? -60_000)).toISOString(),
    endsAt: new Date(now + (window.endsInMs ?? 3_600_000)).toISOString(),
    noPrizeWeight,
    prizes: prizes.map((prize, i) => ({ title: `${title} prize ${i}`, ...prize })),
  };
}

/** Within a few seconds of this machine's clock, which Redis shares. */
function expectNearNow(iso: string | null | undefined) {
  expect(Math.abs(Date.parse(iso ?? '') - Date.now())).toBeLessThan(5_000);
}

// Created first, once: every test of the file reads the same catalog.
let catalog: Promise<Record<'winning' | 'losing' | 'upcoming' | 'paused' | 'ending', string>> | undefined;
function lotteries() {
  catalog ??= (async () => {
    const lottery = lotteryAt(started.server.url);
    const create = async (...args: Parameters<typeof lotteryInput>) => (await lottery.create(OPERATOR, lotteryInput(...args))).id;
    const winning = await create('always wins', [{ weight: 1, totalStock: 100 }], 0);
    const losing = await create('never wins', [{ weight: 0, totalStock: 1 }], 1);
    const upcoming = await create('starts later', [{ weight: 1, totalStock: 1 }], 0, { startsInMs: 3_600_000, endsInMs: 7_200_000 });
    const paused = await create('paused', [{ weight: 1, totalStock: 1 }], 0);
    await lottery.update(OPERATOR, paused, { paused: true });
    const ending = await create('ends soon', [{ weight: 1, totalStock: 1 }], 0, { endsInMs: 1_000 });
    return { winning, losing, upcoming, paused, ending };
  })();
  return catalog;
}

describe('Me.draws', () => {
  it('pages my draws, won and lost, newest first, forwards and backwards, and nobody else’s', async () => {
    const { winning, losing } = await lotteries();
    const lottery = lotteryAt(started.server.url);
    const made = [];
    for (const activityId of [winning, losing, winning, losing, winning]) {
      const drawn = await lottery.draw('gina', activityId);
      if (drawn.__typename !== 'LotteryWin' && drawn.__typename !== 'LotteryLose') throw new Error(`drawLottery answered ${drawn.__typename}`);
      made.push({ id: drawn.drawId, activityId, won: drawn.__typename === 'LotteryWin' });
    }
    await lottery.draw('someone-else', winning);
    const newestFirst = [...made].reverse();

    const { data, raw } = requestsAt(started.server.url);
    const listed = [];
    let after: string | null = null;
    for (;;) {
      const page: MyDrawsQuery['me']['draws'] = (await data(MyDrawsDocument, { first: 2, after }, 'gina')).me.draws;
      listed.push(...page.edges.map((edge) => edge.node));
      if (!page.pageInfo.hasNextPage) break;
      after = page.pageInfo.endCursor ?? null;
    }
    expect(listed.map(({ id, activityId, won }) => ({ id, activityId, won }))).toEqual(newestFirst);
    expect(listed.map((draw) => draw.won)).toEqual([true, false, true, false, true]);
    for (const draw of listed) {
      expect(draw.prize?.title ?? null).toBe(draw.won ? 'always wins prize 0' : null);
      expect(draw.activity?.id).toBe(draw.activityId);
      expect(draw.costPoints).toBe(0);
      expectNearNow(draw.drawnAt);
    }

    const oldest = (await data(MyDrawsDocument, { last: 2 }, 'gina')).me.draws;
    expect(oldest.edges.map((edge) => edge.node.id)).toEqual(newestFirst.slice(-2).map((draw) => draw.id));
    expect(oldest.pageInfo).toMatchObject({ hasPreviousPage: true, hasNextPage: false });
    const before = (await data(MyDrawsDocument, { last: 2, before: oldest.pageInfo.startCursor }, 'gina')).me.draws;
    expect(before.edges.map((edge) => edge.node.id)).toEqual(newestFirst.slice(1, 3).map((draw) => draw.id));
    expect((await data(MyDrawsDocument, { first: 10 }, 'nobody-at-all')).me.draws.edges).toEqual([]);

    expect(errorCodes(await raw(MyDrawsDocument, { first: 5 }))).toEqual(['UNAUTHENTICATED']);
    for (const page of [{ first: 101 }, { last: 101 }, { first: -1 }]) {
      expect(errorCodes(await raw(MyDrawsDocument, page, 'gina')), JSON.stringify(page)).toEqual(['BAD_USER_INPUT']);
    }
    expect(errorCodes(await raw(MyDrawsDocument, { first: 5, after: 'garbage' }, 'gina'))).toEqual(['BAD_USER_INPUT']);
  });

  it("narrows to one activity's draws, keeping the place of a cursor from the whole list, and takes no one else's cursor", async () => {
    const { winning, losing } = await lotteries();
    const lottery = lotteryAt(started.server.url);
    const drawIds: Record<string, string[]> = { [winning]: [], [losing]: [] };
    for (const activityId of [losing, winning, losing, winning, losing]) {
      const drawn = await lottery.draw('hana', activityId);
      if (drawn.__typename !== 'LotteryWin' && drawn.__typename !== 'LotteryLose') throw new Error(`drawLottery answered ${drawn.__typename}`);
      drawIds[activityId]!.unshift(drawn.drawId);
    }
    const { data, raw } = requestsAt(started.server.url);
    const ofLosing = (await data(MyDrawsDocument, { activityId: losing, first: 10 }, 'hana')).me.draws;
    expect(ofLosing.edges.map((edge) => edge.node.id)).toEqual(drawIds[losing]);
    expect(ofLosing.edges.every((edge) => edge.node.activityId === losing)).toBe(true);
    // Newest first: the last losing draw, then the last winning one; narrowed after that
    // winning draw, the list goes on with the losing draws made before it.
    const newest = (await data(MyDrawsDocument, { first: 1 }, 'hana')).me.draws;
    expect(newest.edges[0]?.node.id).toBe(drawIds[losing]![0]);
    const second = (await data(MyDrawsDocument, { first: 1, after: newest.pageInfo.endCursor }, 'hana')).me.draws;
    expect(second.edges[0]?.node.id).toBe(drawIds[winning]![0]);
    const narrowed = (await data(MyDrawsDocument, { activityId: losing, first: 10, after: second.pageInfo.endCursor }, 'hana')).me.draws;
    expect(narrowed.edges.map((edge) => edge.node.id)).toEqual(drawIds[losing]!.slice(1));
    expect((await data(MyDrawsDocument, { activityId: 'no-such-activity', first: 10 }, 'hana')).me.draws.edges).toEqual([]);
    // A cursor naming someone else's draw is no cursor of my list, in the caller's language.
    expect(errorCodes(await raw(MyDrawsDocument, { first: 5, after: newest.pageInfo.endCursor }, 'gina'))).toEqual(['BAD_USER_INPUT']);
    const chinese = await gql(started.server.url, MyDrawsDocument, { first: 5, after: newest.pageInfo.endCursor }, await tokenOf('gina'), { 'accept-language': 'zh-CN' });
    expect(chinese.body.errors?.[0]?.message).toBe('after 不是该列表的游标');
    expectInvalidCursor(await raw(MyDrawsDocument, { first: 5, after: cursorOf(randomUUID()) }, 'hana'), 'no draw');
  });
});

describe('lotteryActivities', () => {
  it('lists the catalog newest first, by status now', async () => {
    const { winning, losing, upcoming, paused, ending } = await lotteries();
    const { data, raw } = requestsAt(started.server.url);
    const list = async (status: LotteryStatus | null, first = 10) => (await data(LotteryActivitiesDocument, { status, first }, 'browser')).lotteryActivities;

    await waitFor('the short lottery to end', async () => (await list('ENDED')).edges.length === 1, { timeoutMs: 5_000 });
    const all = await list(null);
    expect(all.edges.map((edge) => edge.node.id)).toEqual([ending, paused, upcoming, losing, winning]);
    for (const { node } of all.edges) expectNearNow(node.serverTime);
    const byStatus = {
      ACTIVE: [losing, winning],
      UPCOMING: [upcoming],
      PAUSED: [paused],
      ENDED: [ending],
    } as const;
    for (const [status, ids] of Object.entries(byStatus)) {
      const listed = await list(status as LotteryStatus);
      expect(
        listed.edges.map((edge) => edge.node.id),
        status,
      ).toEqual(ids);
      expect(new Set(listed.edges.map((edge) => edge.node.status)), status).toEqual(new Set([status]));
    }

    const firstTwo = await list(null, 2);
    expect(firstTwo.pageInfo.hasNextPage).toBe(true);
    const rest = (await data(LotteryActivitiesDocument, { first: 10, after: firstTwo.pageInfo.endCursor }, 'browser')).lotteryActivities;
    expect(rest.edges.map((edge) => edge.node.id)).toEqual([upcoming, losing, winning]);
    const lastActive = (await data(LotteryActivitiesDocument, { status: 'ACTIVE', last: 1 }, 'browser')).lotteryActivities;
    expect(lastActive.edges.map((edge) => edge.node.id)).toEqual([winning]);

    // The cursor's activity leaves the status between two pages: the next page still starts after it.
    const firstActive = await list('ACTIVE', 1);
    expect(firstActive.edges.map((edge) => edge.node.id)).toEqual([losing]);
    await lotteryAt(started.server.url).update(OPERATOR, losing, { paused: true });
    const nextActive = (await data(LotteryActivitiesDocument, { status: 'ACTIVE', first: 10, after: firstActive.pageInfo.endCursor }, 'browser')).lotteryActivities;
    expect(nextActive.edges.map((edge) => edge.node.id)).toEqual([winning]);
    await lotteryAt(started.server.url).update(OPERATOR, losing, { paused: false });
    const unknown = Buffer.from(`c1:${randomUUID()}`).toString('base64url');
    expect(errorCodes(await raw(LotteryActivitiesDocument, { first: 5, after: unknown }, 'browser'))).toEqual(['BAD_USER_INPUT']);

    expect(errorCodes(await raw(LotteryActivitiesDocument, { first: 5 }))).toEqual(['UNAUTHENTICATED']);
    expect(errorCodes(await raw(LotteryActivitiesDocument, { first: 101 }, 'browser'))).toEqual(['BAD_USER_INPUT']);
    expect(errorCodes(await raw(LotteryActivitiesDocument, { status: 'SOMETIME' as LotteryStatus }, 'browser'))).toEqual(['BAD_USER_INPUT']);
  });
});

describe('serverTime', () => {
  it('comes with every type a client counts down on', async () => {
    const { upcoming } = await lotteries();
    const packet = await redPacketsAt(started.server.url).create('sender', { totalAmount: 300, count: 3 });
    const teams = teamsAt(started.server.url);
    await teams.activity('server-time');
    const { data } = requestsAt(started.server.url);
    const times = await data(ServerTimesDocument, { packetId: packet.id, groupBuyId: 'server-time', lotteryId: upcoming }, 'viewer');
    expectNearNow(times.redPacket?.serverTime);
    expectNearNow(times.groupBuyActivity?.serverTime);
    expectNearNow(times.lotteryActivity?.serverTime);

    const refused = (await data(DrawNotActiveDocument, { activityId: upcoming }, 'viewer')).drawLottery;
    if (refused.__typename !== 'ActivityNotActive') throw new Error(`drawLottery answered ${refused.__typename}`);
    expect(refused.reason).toBe('NOT_STARTED');
    expectNearNow(refused.serverTime);
    expect(Date.parse(refused.startsAt)).toBeGreaterThan(Date.parse(refused.serverTime));
  });
});
