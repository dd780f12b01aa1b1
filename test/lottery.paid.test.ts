import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { MAX_POINTS } from '../src/domain/points/input.ts';
import { AwardPointsDocument, CreateLotteryDocument, type CreateLotteryInput, DrawLotteryDocument, UpdateLotteryDocument } from './gql/generated.ts';
import { errorCodes, gql } from './support/client.ts';
import { expectDrawPaymentInvariants } from './support/drawPaymentInvariants.ts';
import { testEnv } from './support/env.ts';
import { startedServer } from './support/lifecycle.ts';
import { type LotteryClient, lotteryAt, runningWindow } from './support/lottery.ts';
import { type PointsClient, pointsAt } from './support/points.ts';
import { expectPointsInvariants } from './support/pointsInvariants.ts';
import { waitFor } from './support/poll.ts';
import { tokenOf } from './support/tokens.ts';

// The sweeper settles within a second what no request did.
const env = testEnv('lot_paid', { DRAW_RESERVATION_TIMEOUT_MS: '500', SWEEP_INTERVAL_MS: '200' });
const lot = startedServer(env);
const OPERATOR = 'lot_paid-op';
let lottery: LotteryClient;
let points: PointsClient;

const COST = 30;
/** Loses all but once in a million draws (a paid draw must be able to win): costs and wins nothing. */
const losing = (input: Partial<CreateLotteryInput> = {}): CreateLotteryInput => ({
  title: 'paid',
  ...runningWindow(),
  noPrizeWeight: 1_000_000,
  drawCostPoints: COST,
  prizes: [{ title: 'almost never', weight: 1, totalStock: 1 }],
  ...input,
});
/** Wins 7 points every time. */
const pointsPrize = (cost: number): CreateLotteryInput => ({
  title: 'points',
  ...runningWindow(),
  drawCostPoints: cost,
  prizes: [{ title: 'seven points', kind: 'POINTS', points: 7, weight: 1, totalStock: 1000 }],
});

beforeAll(() => {
  lottery = lotteryAt(lot.server.url);
  points = pointsAt(lot.server.url);
});

/** An award's refusal: its issue codes, or [] when it was applied. */
async function awardIssues(userId: string, amount: number): Promise<unknown[]> {
  const response = await points.raw(AwardPointsDocument, { userId, amount, reason: 'test', requestId: randomUUID() }, OPERATOR, { admin: true });
  return (response.body.errors ?? []).flatMap((error) => (error.extensions?.issues as { code: string }[] | undefined)?.map((issue) => issue.code) ?? [error.extensions?.code]);
}

async function ledgerOf(userId: string) {
  const { rows } = await lot.stores.sql.query<{ delta: number; reason: string; draw_id: string | null }>('SELECT delta, reason, draw_id FROM points_ledger WHERE user_id = $1 ORDER BY id', [
    userId,
  ]);
  return rows;
}

describe('drawCostPoints', () => {
  it('is refused out of bounds or of the wrong type with BAD_USER_INPUT, and creates nothing', async () => {
    for (const drawCostPoints of [-1, 1_000_001, 1.5, 'ten', 2 ** 31]) {
      const response = await lottery.raw(CreateLotteryDocument, { input: { ...losing(), drawCostPoints } as unknown as CreateLotteryInput }, OPERATOR, { admin: true });
      expect(errorCodes(response), String(drawCostPoints)).toEqual(['BAD_USER_INPUT']);
    }
    const { rows } = await lot.stores.sql.query('SELECT id FROM lottery_activity');
    expect(rows).toEqual([]);
  });

  it('is for operators only: anonymous callers get UNAUTHENTICATED, users FORBIDDEN', async () => {
    const anonymous = await gql(lot.server.url, CreateLotteryDocument, { input: losing() });
    expect(errorCodes(anonymous)).toEqual(['UNAUTHENTICATED']);
    const user = await gql(lot.server.url, CreateLotteryDocument, { input: losing() }, await tokenOf('lot_paid-user'));
    expect(errorCodes(user)).toEqual(['FORBIDDEN']);
    const created = await lottery.create(OPERATOR, losing());
    expect(created.drawCostPoints).toBe(COST);
    expect((await lottery.create(OPERATOR, { ...losing(), drawCostPoints: undefined })).drawCostPoints).toBe(0);
  });

  it('an anonymous paid draw is UNAUTHENTICATED and spends nothing', async () => {
    const activity = await lottery.create(OPERATOR, losing());
    await points.award(OPERATOR, { userId: 'anon-victim', amount: 100 });
    const response = await gql(lot.server.url, DrawLotteryDocument, { activityId: activity.id });
    expect(errorCodes(response)).toEqual(['UNAUTHENTICATED']);
    expect((await points.me('anon-victim')).pointsBalance).toBe(100);
  });
});

describe('a paid draw', () => {
  it('spends the cost once, with one ledger debit, and a retry with the same requestId spends nothing more', async () => {
    const activity = await lottery.create(OPERATOR, losing());
    await points.award(OPERATOR, { userId: 'payer', amount: 100 });
    const first = await lottery.draw('payer', activity.id, 'r1');
    expect(first.__typename).toBe('LotteryLose');
    expect((await points.me('payer')).pointsBalance).toBe(100 - COST);
    const again = await Promise.all([lottery.draw('payer', activity.id, 'r1'), lottery.draw('payer', activity.id, 'r1')]);
    for (const draw of again) expect(draw).toMatchObject({ __typename: 'LotteryLose', drawId: (first as { drawId: string }).drawId });
    expect((await points.me('payer')).pointsBalance).toBe(100 - COST);
    expect((await ledgerOf('payer')).filter((row) => row.reason === 'lottery draw')).toEqual([{ delta: -COST, reason: 'lottery draw', draw_id: (first as { drawId: string }).drawId }]);
    await expectDrawPaymentInvariants(lot.stores, { swept: true });
  });

  it('answers InsufficientPoints with the balance and the cost, and spends nothing', async () => {
    const activity = await lottery.create(OPERATOR, losing());
    await points.award(OPERATOR, { userId: 'poor', amount: COST - 1 });
    const draw = await lottery.draw('poor', activity.id);
    expect(draw).toMatchObject({ __typename: 'InsufficientPoints', balance: COST - 1, pointsCost: COST });
    const never = await lottery.draw('never-awarded', activity.id);
    expect(never).toMatchObject({ __typename: 'InsufficientPoints', balance: 0, pointsCost: COST });
    expect((await points.me('poor')).pointsBalance).toBe(COST - 1);
    const { rows } = await lot.stores.sql.query("SELECT 1 FROM draw_payment WHERE user_id IN ('poor', 'never-awarded')");
    expect(rows).toEqual([]);
  });

  it('that does not happen (the daily limit, a pause, the end) spends nothing', async () => {
    const limited = await lottery.create(OPERATOR, losing({ dailyDrawLimit: 1 }));
    const paused = await lottery.create(OPERATOR, losing());
    await lottery.update(OPERATOR, paused.id, { paused: true });
    const ended = await lottery.create(OPERATOR, losing());
    await lottery.update(OPERATOR, ended.id, { endsAt: new Date(Date.now() - 1000).toISOString() });
    await points.award(OPERATOR, { userId: 'refused', amount: 100 });
    expect((await lottery.draw('refused', limited.id)).__typename).toBe('LotteryLose');
    expect(await lottery.draw('refused', limited.id)).toMatchObject({ __typename: 'DrawLimitReached', dailyDrawLimit: 1 });
    expect(await lottery.draw('refused', paused.id)).toMatchObject({ __typename: 'ActivityNotActive', reason: 'PAUSED' });
    expect(await lottery.draw('refused', ended.id)).toMatchObject({ __typename: 'ActivityNotActive', reason: 'ENDED' });
    expect((await lottery.draw('refused', randomUUID())).__typename).toBe('NotFound');
    expect((await points.me('refused')).pointsBalance).toBe(100 - COST);
    const { rows } = await lot.stores.sql.query<{ status: string }>("SELECT status FROM draw_payment WHERE user_id = 'refused' ORDER BY status");
    expect(rows.map((row) => row.status)).toEqual(['PAID', 'RELEASED', 'RELEASED', 'RELEASED']);
    // A refused requestId may be tried again later and pays then.
    await lottery.update(OPERATOR, paused.id, { paused: false });
    expect((await lottery.draw('refused', paused.id)).__typename).toBe('LotteryLose');
    expect((await points.me('refused')).pointsBalance).toBe(100 - 2 * COST);
    await expectDrawPaymentInvariants(lot.stores, { swept: true });
  });
});

describe('a paid lottery whose prizes all weigh 0', () => {
  it('is refused when created and when changed so, with BAD_USER_INPUT, and nothing changes', async () => {
    const created = await lottery.raw(CreateLotteryDocument, { input: losing({ prizes: [{ title: 'never', weight: 0, totalStock: 1 }] }) }, OPERATOR, { admin: true });
    expect(created.body.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', issues: [{ path: ['input', 'prizes'], code: 'PAID_DRAW_CANNOT_WIN' }] });
    const activity = await lottery.create(OPERATOR, losing());
    const zeroed = await lottery.raw(UpdateLotteryDocument, { activityId: activity.id, input: { prizes: [{ prizeId: activity.prizes[0]!.id, weight: 0 }] } }, OPERATOR, { admin: true });
    expect(zeroed.body.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', issues: [{ path: ['input', 'prizes'], code: 'PAID_DRAW_CANNOT_WIN' }] });
    expect((await lottery.activity(OPERATOR, activity.id, { admin: true }))?.prizes[0]?.weight).toBe(1);
    // A free lottery may lose by design.
    expect((await lottery.create(OPERATOR, losing({ drawCostPoints: 0, prizes: [{ title: 'never', weight: 0, totalStock: 1 }] }))).drawCostPoints).toBe(0);
  });
});

describe('a paid draw that could only lose', () => {
  it("is refused and spends nothing: at the win limit, with the day's stock gone, with every prize gone", async () => {
    const wins = (input: Partial<CreateLotteryInput> & Pick<CreateLotteryInput, 'prizes'>) =>
      lottery.create(OPERATOR, { title: 'sure', ...runningWindow(), noPrizeWeight: 0, drawCostPoints: COST, ...input });
    const limited = await wins({ dailyWinLimit: 1, prizes: [{ title: 'mug', weight: 1, totalStock: 100 }] });
    // Days after today, so the day's stock comes back before the end (lottery.day: on the last day).
    const daily = await wins({ endsAt: new Date(Date.now() + 3 * 86_400_000).toISOString(), prizes: [{ title: 'mug', weight: 1, totalStock: 100, dailyStock: 1 }] });
    const single = await wins({ prizes: [{ title: 'mug', weight: 1, totalStock: 1 }] });
    // With a losing weight too: still a certain loss once nothing is left to win.
    const withLosses = await wins({ noPrizeWeight: 5, prizes: [{ title: 'mug', weight: 1, totalStock: 1 }] });
    await points.award(OPERATOR, { userId: 'sure', amount: 10 * COST });

    expect((await lottery.draw('sure', limited.id)).__typename).toBe('LotteryWin');
    const atLimit = await lottery.draw('sure', limited.id);
    expect(atLimit).toMatchObject({ __typename: 'WinLimitReached', dailyWinLimit: 1 });
    expect(Date.parse((atLimit as { resetsAt: string }).resetsAt)).toBeGreaterThan(Date.now());

    expect((await lottery.draw('sure', daily.id)).__typename).toBe('LotteryWin');
    const today = await lottery.draw('sure', daily.id);
    expect(today).toMatchObject({ __typename: 'ActivityNotActive', reason: 'SOLD_OUT_TODAY' });
    expect(Date.parse((today as { availableAt: string }).availableAt)).toBeGreaterThan(Date.now());

    expect((await lottery.draw('sure', single.id)).__typename).toBe('LotteryWin');
    expect(await lottery.draw('sure', single.id)).toMatchObject({ __typename: 'ActivityNotActive', reason: 'SOLD_OUT', availableAt: null });

    // Losses (weight 5 of 6) until the one mug is won.
    await points.award(OPERATOR, { userId: 'drainer', amount: 300 * COST });
    let last = '';
    for (let drawn = 0; drawn < 300 && last !== 'LotteryWin'; drawn++) last = (await lottery.draw('drainer', withLosses.id)).__typename;
    expect(last).toBe('LotteryWin');
    expect(await lottery.draw('sure', withLosses.id)).toMatchObject({ __typename: 'ActivityNotActive', reason: 'SOLD_OUT' });

    // Three wins paid for; the four refusals released their reservations.
    expect((await points.me('sure')).pointsBalance).toBe(10 * COST - 3 * COST);
    const { rows } = await lot.stores.sql.query<{ status: string; n: number }>("SELECT status, count(*)::int AS n FROM draw_payment WHERE user_id = 'sure' GROUP BY status ORDER BY status");
    expect(rows).toEqual([
      { status: 'PAID', n: 3 },
      { status: 'RELEASED', n: 4 },
    ]);
    await expectDrawPaymentInvariants(lot.stores, { swept: true });
  });
});

describe('a POINTS prize', () => {
  it('is credited in the draw commit, once, and me.pointsBalance shows it at once (paid and free draws)', async () => {
    const paid = await lottery.create(OPERATOR, pointsPrize(5));
    const free = await lottery.create(OPERATOR, pointsPrize(0));
    await points.award(OPERATOR, { userId: 'winner', amount: 10 });
    const win = await lottery.draw('winner', paid.id, 'w1');
    expect(win).toMatchObject({ __typename: 'LotteryWin', prize: { kind: 'POINTS' } });
    expect((await points.me('winner')).pointsBalance).toBe(10 - 5 + 7);
    expect((await lottery.draw('winner', paid.id, 'w1')).__typename).toBe('LotteryWin');
    expect((await lottery.draw('winner', free.id)).__typename).toBe('LotteryWin');
    expect((await points.me('winner')).pointsBalance).toBe(10 - 5 + 7 + 7);
    const drawId = (win as { drawId: string }).drawId;
    expect((await ledgerOf('winner')).filter((row) => row.draw_id === drawId)).toEqual([
      { delta: -5, reason: 'lottery draw', draw_id: drawId },
      { delta: 7, reason: 'lottery prize', draw_id: drawId },
    ]);
    await expectDrawPaymentInvariants(lot.stores, { swept: true });
    await expectPointsInvariants(lot.stores);
  });

  it('reaches a balance Redis does not hold: the rebuild reads it from the ledger, and is not credited twice', async () => {
    const free = await lottery.create(OPERATOR, pointsPrize(0));
    expect((await lottery.draw('cold-winner', free.id)).__typename).toBe('LotteryWin');
    await lot.stores.redis.del(`{shop}:balance:cold-winner`);
    expect((await points.me('cold-winner')).pointsBalance).toBe(7);
    expect((await lottery.draw('cold-winner', free.id)).__typename).toBe('LotteryWin');
    expect((await points.me('cold-winner')).pointsBalance).toBe(14);
    // A prize won while the balance was not cached is recorded as settled by the sweeper.
    const unsettled = "SELECT 1 FROM draw_payment WHERE user_id = 'cold-winner' AND settled_at IS NULL";
    await waitFor('the sweeper to settle the prizes', async () => (await lot.stores.sql.query(unsettled)).rowCount === 0, { timeoutMs: 10_000 });
    expect((await points.me('cold-winner')).pointsBalance).toBe(14);
    await expectDrawPaymentInvariants(lot.stores, { swept: true });
  });
});

describe('the points ceiling, 2^31−1, with points held by paid draws', () => {
  it('refuses an award that, with what a paid draw holds, would pass it, and takes one up to it', async () => {
    const activity = await lottery.create(OPERATOR, losing());
    await points.award(OPERATOR, { userId: 'held-award', amount: MAX_POINTS - 100 });
    // The draw's commit waits on the lock: its reservation is held meanwhile.
    const blocker = await lot.stores.sql.connect();
    let draw: ReturnType<typeof lottery.draw> | undefined;
    try {
      await blocker.query('BEGIN');
      await blocker.query('LOCK TABLE lottery_draw IN EXCLUSIVE MODE');
      draw = lottery.draw('held-award', activity.id);
      await waitFor('the reservation', async () => (await lot.stores.sql.query("SELECT 1 FROM draw_payment WHERE user_id = 'held-award' AND status = 'RESERVED'")).rowCount === 1);
      // The balance is MAX − 130 and COST is held: 110 more would leave nothing for the reservation to come back to.
      expect(await awardIssues('held-award', 110)).toEqual(['BALANCE_ABOVE_MAX']);
      expect(await awardIssues('held-award', 100)).toEqual([]);
    } finally {
      await blocker.query('ROLLBACK');
      blocker.release();
    }
    // Paid: the cost has left the ledger, and with it the room it took.
    expect((await draw!).__typename).toBe('LotteryLose');
    expect(await awardIssues('held-award', COST + 1)).toEqual(['BALANCE_ABOVE_MAX']);
    expect(await awardIssues('held-award', COST)).toEqual([]);
    expect((await points.me('held-award')).pointsBalance).toBe(MAX_POINTS);
    await expectDrawPaymentInvariants(lot.stores, { swept: true });
  });

  it('gives every reservation back while awards race draws that do not happen (no 22003, nothing left held)', async () => {
    const notStarted = await lottery.create(OPERATOR, {
      ...losing({ drawCostPoints: 100 }),
      startsAt: new Date(Date.now() + 3_600_000).toISOString(),
      endsAt: new Date(Date.now() + 7_200_000).toISOString(),
    });
    await points.award(OPERATOR, { userId: 'rel', amount: MAX_POINTS - 50 });
    const draws = Promise.all(Array.from({ length: 60 }, () => lottery.tryDraw('rel', notStarted.id)));
    const awards = Promise.all(
      Array.from({ length: 30 }, async (_, i) => {
        await new Promise((resolve) => setTimeout(resolve, 15 * i));
        return awardIssues('rel', 500);
      }),
    );
    for (const { result, errors } of await draws) {
      expect(errors, JSON.stringify(errors)).toBeUndefined();
      expect(result).toMatchObject({ __typename: 'ActivityNotActive', reason: 'NOT_STARTED' });
    }
    // Reservations move points from the balance to what is held: the sum never leaves MAX − 50.
    for (const issues of await awards) expect(issues).toEqual(['BALANCE_ABOVE_MAX']);
    expect((await points.me('rel')).pointsBalance).toBe(MAX_POINTS - 50);
    await expectDrawPaymentInvariants(lot.stores, { swept: true });
  });

  it('credits a POINTS prize up to it, and the draw stands: no dead letter, paid and free draws alike', async () => {
    const paid = await lottery.create(OPERATOR, pointsPrize(5));
    const free = await lottery.create(OPERATOR, pointsPrize(0));
    await points.award(OPERATOR, { userId: 'rich', amount: MAX_POINTS - 1 });
    // Paid 5, won 7: room for 6.
    const win = await lottery.draw('rich', paid.id);
    expect(win).toMatchObject({ __typename: 'LotteryWin', prize: { kind: 'POINTS' } });
    expect((await points.me('rich')).pointsBalance).toBe(MAX_POINTS);
    const drawId = (win as { drawId: string }).drawId;
    expect((await ledgerOf('rich')).filter((row) => row.draw_id === drawId)).toEqual([
      { delta: -5, reason: 'lottery draw', draw_id: drawId },
      { delta: 6, reason: 'lottery prize', draw_id: drawId },
    ]);
    // At the ceiling: a win with nothing credited.
    expect((await lottery.draw('rich', free.id)).__typename).toBe('LotteryWin');
    expect((await points.me('rich')).pointsBalance).toBe(MAX_POINTS);

    // Wins racing for the last 10 points: they get 10 between them, in draw order.
    await points.award(OPERATOR, { userId: 'rich-race', amount: MAX_POINTS - 10 });
    const wins = await Promise.all(Array.from({ length: 5 }, () => lottery.draw('rich-race', free.id)));
    for (const raced of wins) expect(raced.__typename).toBe('LotteryWin');
    expect((await points.me('rich-race')).pointsBalance).toBe(MAX_POINTS);

    expect((await lot.stores.sql.query('SELECT entry_id FROM journal_dead_letter')).rows).toEqual([]);
    const payments = await expectDrawPaymentInvariants(lot.stores, { swept: true, atCeiling: ['rich', 'rich-race'] });
    const credited = (user: string) => payments.filter((payment) => payment.user_id === user).map((payment) => payment.prize_points);
    expect(credited('rich').sort()).toEqual([0, 6]);
    expect(credited('rich-race').reduce((a, b) => a + b, 0)).toBe(10);
    await expectPointsInvariants(lot.stores);
  });
});
