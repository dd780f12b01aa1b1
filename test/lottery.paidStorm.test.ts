import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { unlessCutOff } from './support/client.ts';
import { expectDrawPaymentInvariants } from './support/drawPaymentInvariants.ts';
import { testEnv } from './support/env.ts';
import { stopAll } from './support/lifecycle.ts';
import { type LotteryClient, lotteryAt, runningWindow } from './support/lottery.ts';
import { expectLotteryInvariants } from './support/lotteryInvariants.ts';
import { type PointsClient, pointsAt } from './support/points.ts';
import { expectPointsInvariants } from './support/pointsInvariants.ts';
import { waitFor } from './support/poll.ts';
import { type ServerProcess, startServerProcess } from './support/server.ts';
import { type Stores, loseKeysAtOnce, openStores } from './support/stores.ts';
import { signAhead } from './support/tokens.ts';

// Reservations a lost Redis leaves behind are released within seconds; not so soon that a
// draw slowed down by a loaded machine finds its reservation released (safe, but an error).
const env = testEnv('lot_paid_storm', { DRAW_RESERVATION_TIMEOUT_MS: '8000', JOURNAL_SWEEP_AFTER_MS: '500', SWEEP_INTERVAL_MS: '200' });
let stores: Stores;
let server: ServerProcess;
let lottery: LotteryClient;
let points: PointsClient;

beforeAll(async () => {
  server = await startServerProcess(env.vars);
  stores = openStores(env);
  lottery = lotteryAt(server.url);
  points = pointsAt(server.url);
});

afterAll(async () => {
  await stopAll(server);
  await stores?.cleanup();
});

const OPERATOR = 'paid-storm-op';
const DRAW_COST = 30;
const GOODS_COST = 50;
const PRIZE_POINTS = 20;
const AWARD = 600;
const DRAWS = 12;
// Redemptions alone can spend at most 400 of the 600 points, so every user draws at least
// 6 times whatever order the storm lands in, and draws plus redemptions still run out.
const REDEMPTIONS = 8;

/** Waits until the sweeper has released every reservation and Redis has had every settlement. */
async function swept(): Promise<void> {
  await waitFor(
    'every reservation released or paid, and settled',
    async () => (await stores.sql.query("SELECT 1 FROM draw_payment WHERE status = 'RESERVED' OR settled_at IS NULL")).rowCount === 0,
    { timeoutMs: 60_000, intervalMs: 100 },
  );
}

/** Awards every user, opens a paid WEIGHTED lottery with a POINTS prize and a goods item of the same points. */
async function setUp(tag: string, users: string[]) {
  await signAhead(users);
  const activity = await lottery.create(OPERATOR, {
    title: `storm ${tag}`,
    ...runningWindow(),
    noPrizeWeight: 2,
    drawCostPoints: DRAW_COST,
    prizes: [{ title: 'points', kind: 'POINTS', points: PRIZE_POINTS, weight: 1, totalStock: 100_000 }],
  });
  const goods = await points.createGoods(OPERATOR, { title: `goods ${tag}`, pointsCost: GOODS_COST, stock: 100_000 });
  for (const user of users) await points.award(OPERATOR, { userId: user, amount: AWARD });
  return { activityId: activity.id, goodsId: goods.id };
}

type Outcome = { kind: 'draw' | 'redeem'; user: string; requestId: string; typename?: string; drawId?: string; errors?: unknown; failed?: unknown };

/**
 * Every user draws DRAWS times (the first requestId three times at once) and redeems
 * REDEMPTIONS times, all at once: paid draws racing the same user's redemptions of the same points.
 */
function storm(users: string[], activityId: string, goodsId: string, onAnswer: (outcome: Outcome) => void = () => {}): Promise<Outcome[]> {
  const requests = users.flatMap((user) => [
    ...Array.from({ length: DRAWS + 2 }, (_, i) => async (): Promise<Outcome> => {
      const requestId = `d${Math.max(0, i - 2)}`;
      const { result, errors, failed } = await unlessCutOff(lottery.tryDraw(user, activityId, requestId));
      const drawId = result && 'drawId' in result ? result.drawId : undefined;
      return { kind: 'draw', user, requestId, typename: result?.__typename, drawId, errors, failed };
    }),
    ...Array.from({ length: REDEMPTIONS }, (_, i) => async (): Promise<Outcome> => {
      const requestId = `g${i}`;
      const { result, errors, failed } = await unlessCutOff(points.tryRedeem(user, goodsId, requestId));
      return { kind: 'redeem', user, requestId, typename: result?.__typename, errors, failed };
    }),
  ]);
  return Promise.all(
    requests.map(async (request) => {
      const outcome = await request();
      onAnswer(outcome);
      return outcome;
    }),
  );
}

/** Each acknowledged draw is in PostgreSQL, paid once; every requestId drew at most once. */
async function expectAcknowledgedDrawsPaid(outcomes: Outcome[]) {
  const drawn = outcomes.filter((outcome) => outcome.kind === 'draw' && outcome.drawId);
  const byRequest = new Map<string, string>();
  for (const outcome of drawn) {
    const key = `${outcome.user}/${outcome.requestId}`;
    expect(byRequest.get(key) ?? outcome.drawId, `${key} answered one draw`).toBe(outcome.drawId);
    byRequest.set(key, outcome.drawId!);
  }
  const { rows } = await stores.sql.query<{ draw_id: string; status: string; drawn: boolean }>(
    'SELECT p.draw_id, p.status::text AS status, EXISTS (SELECT 1 FROM lottery_draw d WHERE d.id = p.draw_id) AS drawn FROM draw_payment p WHERE p.draw_id = ANY($1)',
    [[...byRequest.values()]],
  );
  expect(rows).toHaveLength(byRequest.size);
  for (const row of rows) expect(row, row.draw_id).toMatchObject({ status: 'PAID', drawn: true });
  return byRequest;
}

describe('paid draws racing the same user’s redemptions of the same points', () => {
  it('spend each point once: no draw without payment, no payment without a draw, balances agree everywhere', async () => {
    const users = Array.from({ length: 20 }, (_, i) => `storm-${i}`);
    const { activityId, goodsId } = await setUp('plain', users);
    const outcomes = await storm(users, activityId, goodsId);
    for (const outcome of outcomes) {
      expect(outcome.failed ?? outcome.errors, `${outcome.user} ${outcome.requestId}: ${JSON.stringify(outcome.errors ?? String(outcome.failed))}`).toBeUndefined();
      const allowed = outcome.kind === 'draw' ? ['LotteryWin', 'LotteryLose', 'InsufficientPoints'] : ['Redemption', 'InsufficientPoints'];
      expect(allowed).toContain(outcome.typename);
    }
    const draws = await expectAcknowledgedDrawsPaid(outcomes);
    expect(draws.size).toBeGreaterThanOrEqual(users.length * 6);
    expect(outcomes.filter((outcome) => outcome.typename === 'InsufficientPoints').length, 'the points ran out').toBeGreaterThan(0);

    await swept();
    const payments = await expectDrawPaymentInvariants(stores, { swept: true });
    expect(payments.filter((payment) => payment.status === 'PAID')).toHaveLength(draws.size);
    await expectPointsInvariants(stores);
    await expectLotteryInvariants(stores, activityId);
    // What each user was told adds up to what they hold.
    for (const user of users) {
      const mine = outcomes.filter((outcome) => outcome.user === user);
      const redeemed = mine.filter((outcome) => outcome.typename === 'Redemption').length;
      const drawIds = new Set(mine.filter((outcome) => outcome.drawId).map((outcome) => outcome.drawId));
      const wins = new Set(mine.filter((outcome) => outcome.typename === 'LotteryWin').map((outcome) => outcome.drawId)).size;
      const expected = AWARD - redeemed * GOODS_COST - drawIds.size * DRAW_COST + wins * PRIZE_POINTS;
      expect((await points.me(user)).pointsBalance, user).toBe(expected);
    }
  });

  it('across a Redis loss mid-storm: the same invariants once the sweeper is done, and acknowledged draws stay drawn and paid', async () => {
    const users = Array.from({ length: 20 }, (_, i) => `loss-${i}`);
    const { activityId, goodsId } = await setUp('loss', users);
    let answered = 0;
    let loss: Promise<number> | undefined;
    const outcomes = await storm(users, activityId, goodsId, () => {
      if (++answered === 120) loss = loseKeysAtOnce(stores.redis, env.keyPrefix);
    });
    expect(await loss, 'Redis lost its keys mid-storm').toBeGreaterThan(0);
    for (const outcome of outcomes) {
      expect(outcome.failed, `${outcome.user} ${outcome.requestId}`).toBeUndefined();
      if (outcome.errors) expect(JSON.stringify(outcome.errors)).toContain('SERVICE_UNAVAILABLE');
    }
    const draws = await expectAcknowledgedDrawsPaid(outcomes);
    const { rows: left } = await stores.sql.query("SELECT 1 FROM draw_payment WHERE status = 'RESERVED'");
    console.info(`Redis loss: ${outcomes.filter((outcome) => outcome.errors).length} requests unavailable, ${left.length} reservations left for the sweeper`);

    await swept();
    await expectDrawPaymentInvariants(stores, { swept: true });
    await expectPointsInvariants(stores);
    await expectLotteryInvariants(stores, activityId);
    // Retries after the loss: an acknowledged draw answers itself and pays nothing more.
    for (const [key, drawId] of draws) {
      const [user, requestId] = key.split('/') as [string, string];
      const before = (await points.me(user)).pointsBalance;
      expect(await lottery.draw(user, activityId, requestId)).toMatchObject({ drawId });
      expect((await points.me(user)).pointsBalance, key).toBe(before);
    }
    await expectDrawPaymentInvariants(stores, { swept: true });
  }, 240_000);
});
