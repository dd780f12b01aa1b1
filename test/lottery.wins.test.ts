import { beforeAll, describe, expect, it } from 'vitest';
import { LotteryWinsDocument, type LotteryWinsQuery, type LotteryWinsQueryVariables } from './gql/generated.ts';
import { errorCodes, gql, requestsAt } from './support/client.ts';
import { testEnv } from './support/env.ts';
import { startedServer } from './support/lifecycle.ts';
import { lotteryAt, runningWindow } from './support/lottery.ts';
import { cursorOf, everyPage } from './support/paging.ts';
import { tokenOf } from './support/tokens.ts';

const env = testEnv('lot_wins');
const started = startedServer(env);
const OPERATOR = 'wins-op';

type Win = LotteryWinsQuery['lotteryWins']['edges'][number]['node'];
interface WinRow {
  id: string;
  user_id: string;
  prize_id: string;
  request_id: string | null;
}

/** Every win of the list, page by page forwards. */
function everyWin(variables: Omit<LotteryWinsQueryVariables, 'after'>, after: string | null = null): Promise<Win[]> {
  const { data } = requestsAt(started.server.url);
  return everyPage(async (from) => (await data(LotteryWinsDocument, { ...variables, after: from }, OPERATOR, { admin: true })).lotteryWins, after);
}

/** The activity's wins as PostgreSQL holds them, oldest first. */
async function winsInPostgres(activityId: string, prizeId?: string): Promise<WinRow[]> {
  const { rows } = await started.stores.sql.query<WinRow>(
    `SELECT id, user_id, prize_id, request_id FROM lottery_draw
     WHERE activity_id = $1 AND prize_id IS NOT NULL AND ($2::text IS NULL OR prize_id = $2) ORDER BY drawn_at, id`,
    [activityId, prizeId ?? null],
  );
  return rows;
}

/**
 * Two prizes and no chance of losing while stock lasts: 13 units, so of 20 draws 13 win and
 * 7 lose, whatever the chooser picks. Some draws carry a requestId, some none.
 */
async function activityWithDraws(title: string, draws = 20) {
  const lottery = lotteryAt(started.server.url);
  const activity = await lottery.create(OPERATOR, {
    title,
    ...runningWindow(),
    prizes: [
      { title: '10 points', kind: 'POINTS', points: 10, weight: 1, totalStock: 7 },
      { title: 'tea set', kind: 'GOODS', weight: 1, totalStock: 6 },
    ],
  });
  const outcomes = [];
  for (let i = 0; i < draws; i++) outcomes.push(await lottery.draw(`${title}-user-${i % 6}`, activity.id, i % 3 === 0 ? undefined : `${title}-req-${i}`));
  return { activity, outcomes };
}

let main: Awaited<ReturnType<typeof activityWithDraws>>;
let other: Awaited<ReturnType<typeof activityWithDraws>>;

beforeAll(async () => {
  main = await activityWithDraws('main');
  other = await activityWithDraws('other', 4);
});

describe('lotteryWins lists every winner of an activity for operators, to ship the prizes', () => {
  it('pages every win, oldest first, with the user ids in full and the prize as won; losses and other activities are left out', async () => {
    const expected = await winsInPostgres(main.activity.id);
    expect(expected).toHaveLength(13);
    const losses = main.outcomes.filter((outcome) => outcome.__typename === 'LotteryLose');
    expect(losses).toHaveLength(7);

    const wins = await everyWin({ activityId: main.activity.id, first: 4 });
    expect(wins.map((win) => win.drawId)).toEqual(expected.map((row) => row.id));
    expect(wins.map((win) => win.userId)).toEqual(expected.map((row) => row.user_id));
    expect(wins.map((win) => win.requestId)).toEqual(expected.map((row) => row.request_id));
    expect(wins.map((win) => win.prize.id)).toEqual(expected.map((row) => row.prize_id));
    expect(wins.some((win) => win.requestId === null) && wins.some((win) => win.requestId !== null)).toBe(true);
    for (const lose of losses) expect(wins.map((win) => win.drawId)).not.toContain(lose.__typename === 'LotteryLose' ? lose.drawId : '');

    // What drawLottery answered each winner is what the operator sees.
    const answered = new Map(main.outcomes.flatMap((outcome) => (outcome.__typename === 'LotteryWin' ? [[outcome.drawId, outcome] as const] : [])));
    for (const win of wins) {
      const drawn = answered.get(win.drawId)!;
      expect(win.userId).toBe(drawn.userId);
      expect(win).toMatchObject({ drawnAt: drawn.wonAt, settingsVersion: 1, costPoints: 0 });
      expect(win.prize).toEqual(
        win.prize.kind === 'POINTS' ? { id: drawn.prize.id, title: '10 points', kind: 'POINTS', points: 10 } : { id: drawn.prize.id, title: 'tea set', kind: 'GOODS', points: null },
      );
    }
    const times = wins.map((win) => Date.parse(win.drawnAt));
    expect(times).toEqual([...times].sort((a, b) => a - b));
  });

  it('pages backwards, and narrows to one prize', async () => {
    const { data } = requestsAt(started.server.url);
    const expected = await winsInPostgres(main.activity.id);
    const last = (await data(LotteryWinsDocument, { activityId: main.activity.id, last: 5 }, OPERATOR, { admin: true })).lotteryWins;
    expect(last.edges.map((edge) => edge.node.drawId)).toEqual(expected.slice(-5).map((row) => row.id));
    expect(last.pageInfo).toMatchObject({ hasPreviousPage: true, hasNextPage: false });
    const before = (await data(LotteryWinsDocument, { activityId: main.activity.id, last: 5, before: last.pageInfo.startCursor }, OPERATOR, { admin: true })).lotteryWins;
    expect(before.edges.map((edge) => edge.node.drawId)).toEqual(expected.slice(-10, -5).map((row) => row.id));

    const [points, goods] = main.activity.prizes.map((prize) => prize.id);
    for (const prizeId of [points!, goods!]) {
      const ofPrize = await everyWin({ activityId: main.activity.id, prizeId, first: 2 });
      expect(ofPrize.map((win) => win.drawId)).toEqual((await winsInPostgres(main.activity.id, prizeId)).map((row) => row.id));
      expect(ofPrize.every((win) => win.prize.id === prizeId)).toBe(true);
    }
    expect(await winsInPostgres(main.activity.id, points!)).toHaveLength(7);

    // A cursor of the whole list keeps its place in one prize's list, even on a win of the other prize.
    for (const [i, row] of expected.entries()) {
      const rest = await everyWin({ activityId: main.activity.id, prizeId: points!, first: 3 }, cursorOf(row.id));
      expect(
        rest.map((win) => win.drawId),
        `after win ${i}`,
      ).toEqual(
        expected
          .slice(i + 1)
          .filter((later) => later.prize_id === points)
          .map((later) => later.id),
      );
    }

    // A prize of another activity, or an unknown activity, has no wins here.
    expect(await everyWin({ activityId: main.activity.id, prizeId: other.activity.prizes[0]!.id })).toEqual([]);
    expect(await everyWin({ activityId: 'no-such-activity' })).toEqual([]);
  });

  it('refuses garbage cursors and page sizes, anonymous callers and plain users', async () => {
    const { raw } = requestsAt(started.server.url);
    const activityId = main.activity.id;
    const loss = main.outcomes.find((outcome) => outcome.__typename === 'LotteryLose');
    const otherWin = other.outcomes.find((outcome) => outcome.__typename === 'LotteryWin');
    if (loss?.__typename !== 'LotteryLose' || otherWin?.__typename !== 'LotteryWin') throw new Error('expected a loss here and a win there');
    const refused: LotteryWinsQueryVariables[] = [
      { activityId, after: 'garbage' },
      { activityId, after: '' },
      { activityId, before: 'garbage' },
      { activityId, after: cursorOf('no-such-draw') },
      // A losing draw is no row of the list, nor is another activity's win.
      { activityId, after: cursorOf(loss.drawId) },
      { activityId, last: 2, before: cursorOf(otherWin.drawId) },
      { activityId, first: 101 },
      { activityId, first: -1 },
      { activityId, last: 101 },
    ];
    for (const variables of refused) {
      expect(errorCodes(await raw(LotteryWinsDocument, variables, OPERATOR, { admin: true })), JSON.stringify(variables)).toEqual(['BAD_USER_INPUT']);
    }
    const foreign = await raw(LotteryWinsDocument, { activityId, after: cursorOf(loss.drawId) }, OPERATOR, { admin: true });
    expect(foreign.body.errors?.[0]?.extensions?.issues).toEqual([{ path: ['after'], code: 'INVALID_CURSOR', message: 'after is not a cursor of this list', values: { argument: 'after' } }]);
    const inChinese = await gql(started.server.url, LotteryWinsDocument, { activityId, last: 1, before: cursorOf(loss.drawId) }, await tokenOf(OPERATOR, { admin: true }), {
      'accept-language': 'zh-CN',
    });
    expect(inChinese.body.errors?.[0]?.extensions?.issues).toMatchObject([{ path: ['before'], code: 'INVALID_CURSOR', message: 'before 不是该列表的游标' }]);

    expect(errorCodes(await raw(LotteryWinsDocument, { activityId, first: 5 }))).toEqual(['UNAUTHENTICATED']);
    // A winner may not list the winners either.
    expect(errorCodes(await raw(LotteryWinsDocument, { activityId, first: 5 }, 'main-user-0'))).toEqual(['FORBIDDEN']);
  });
});
