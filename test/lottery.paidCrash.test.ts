import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { unlessCutOff } from './support/client.ts';
import { expectDrawPaymentInvariants } from './support/drawPaymentInvariants.ts';
import { testEnv } from './support/env.ts';
import { stopAll } from './support/lifecycle.ts';
import { lotteryAt, runningWindow } from './support/lottery.ts';
import { expectLotteryInvariants } from './support/lotteryInvariants.ts';
import { pointsAt } from './support/points.ts';
import { expectPointsInvariants } from './support/pointsInvariants.ts';
import { waitFor } from './support/poll.ts';
import { type ServerProcess, startServerProcess } from './support/server.ts';
import { type Stores, openStores } from './support/stores.ts';
import { signAhead } from './support/tokens.ts';

const WARM_UP = 20;
const REACH_THE_DRAW = 40;
// The first REACH_THE_DRAW paid draws go on past their reservation; every later one stops
// there for good, as a process that dies between the two steps.
const env = testEnv('lot_paid_crash', { DRAW_RESERVATION_TIMEOUT_MS: '2000', JOURNAL_SWEEP_AFTER_MS: '500', SWEEP_INTERVAL_MS: '200' });
const crashing = { ...env.vars, TEST_HANG_AFTER_DRAW_RESERVATIONS: String(REACH_THE_DRAW) };
let stores: Stores;
const servers: ServerProcess[] = [];

beforeAll(() => {
  stores = openStores(env);
});

afterAll(async () => {
  await stopAll(...servers);
  await stores?.cleanup();
});

const COST = 10;
const AWARD = 300;
const count = async (sql: string, params: unknown[] = []) => Number((await stores.sql.query<{ n: string }>(`SELECT count(*) AS n FROM (${sql}) s`, params)).rows[0]!.n);

describe('a server killed with SIGKILL between the reservation and the draw', () => {
  it('leaves no draw unpaid and no payment without a draw: the sweeper pays what Redis drew and releases the rest', async () => {
    const first = await startServerProcess(crashing);
    servers.push(first);
    const lottery = lotteryAt(first.url);
    const points = pointsAt(first.url);
    const users = Array.from({ length: 30 }, (_, i) => `crash-${i}`);
    await signAhead(users);
    const activity = await lottery.create('crash-op', {
      title: 'paid crash',
      ...runningWindow(),
      noPrizeWeight: 1,
      drawCostPoints: COST,
      prizes: [{ title: 'points', kind: 'POINTS', points: 3, weight: 1, totalStock: 100_000 }],
    });
    const journalKey = `{lot:${activity.id}}:journal`;
    for (const user of users) await points.award('crash-op', { userId: user, amount: AWARD });

    // Acknowledged before the crash: committed and paid.
    const acknowledged = new Map<string, string>();
    for (let i = 0; i < WARM_UP; i++) {
      const draw = await lottery.draw(users[i % users.length]!, activity.id, `warm-${i}`);
      if (!('drawId' in draw)) throw new Error(JSON.stringify(draw));
      acknowledged.set(draw.drawId, users[i % users.length]!);
    }

    // The storm: draws can be made in Redis but not committed (the table is locked), and
    // after REACH_THE_DRAW reservations every draw stops after its reservation. Then the kill.
    const blocker = await stores.sql.connect();
    await blocker.query('BEGIN');
    await blocker.query('LOCK TABLE lottery_draw IN EXCLUSIVE MODE');
    const storm = Promise.all(users.flatMap((user) => Array.from({ length: 6 }, (_, i) => unlessCutOff(lottery.tryDraw(user, activity.id, `storm-${i}`)))));
    try {
      await waitFor(
        'draws waiting in the journal, and reservations without a draw',
        async () => {
          const inJournal = await stores.redis.xlen(journalKey);
          const reserved = await count("SELECT 1 FROM draw_payment WHERE status = 'RESERVED'");
          return inJournal >= REACH_THE_DRAW - WARM_UP && reserved >= 100;
        },
        { timeoutMs: 90_000, intervalMs: 50 },
      );
      await first.kill();
    } finally {
      await blocker.query('ROLLBACK');
      blocker.release();
    }
    const cutOff = await storm;
    expect(first.child.signalCode).toBe('SIGKILL');
    for (const { result } of cutOff) expect(result, 'nothing of the storm was acknowledged').toBeUndefined();

    const drawnInRedis = (await stores.redis.xrange(journalKey, '-', '+')).map(([, fields]) => fields[fields.indexOf('draw') + 1]!);
    const reservedAtCrash = await count("SELECT 1 FROM draw_payment WHERE status = 'RESERVED'");
    console.info(`crash: ${acknowledged.size} acknowledged, ${drawnInRedis.length} drawn only in Redis, ${reservedAtCrash} reserved`);
    expect(drawnInRedis.length).toBeGreaterThanOrEqual(REACH_THE_DRAW - WARM_UP);
    // Every acknowledged draw is already paid, and no draw is in PostgreSQL without its payment.
    await expectDrawPaymentInvariants(stores);
    expect(await count("SELECT 1 FROM draw_payment WHERE status = 'PAID' AND draw_id = ANY($1)", [[...acknowledged.keys()]])).toBe(acknowledged.size);

    // A new server: the journal sweeper commits what Redis drew (paid), the payment sweeper releases the rest.
    const second = await startServerProcess(env.vars);
    servers.push(second);
    await waitFor('every reservation paid or released, and settled', async () => (await count("SELECT 1 FROM draw_payment WHERE status = 'RESERVED' OR settled_at IS NULL")) === 0, {
      timeoutMs: 45_000,
      intervalMs: 100,
    });
    expect(await stores.redis.xlen(journalKey)).toBe(0);
    const payments = await expectDrawPaymentInvariants(stores, { swept: true });
    const paid = payments.filter((payment) => payment.status === 'PAID').map((payment) => payment.draw_id);
    expect(new Set(paid)).toEqual(new Set([...acknowledged.keys(), ...drawnInRedis]));
    // Every other reservation, in PostgreSQL or still in the shop's journal at the crash, was released.
    expect(payments.length - paid.length).toBeGreaterThanOrEqual(reservedAtCrash - drawnInRedis.length);
    await expectPointsInvariants(stores);
    await expectLotteryInvariants(stores, activity.id);

    // The users retry the storm on the new server: a draw Redis made answers itself, the others draw and pay now, once.
    const onSecond = lotteryAt(second.url);
    const retried = await Promise.all(users.flatMap((user) => Array.from({ length: 6 }, async (_, i) => ({ user, draw: await onSecond.draw(user, activity.id, `storm-${i}`) }))));
    for (const { user, draw } of retried) expect(['LotteryWin', 'LotteryLose', 'InsufficientPoints'], user).toContain(draw.__typename);
    const retriedIds = retried.flatMap(({ draw }) => ('drawId' in draw ? [draw.drawId] : []));
    for (const drawId of drawnInRedis) expect(retriedIds).toContain(drawId);
    await waitFor('settled', async () => (await count("SELECT 1 FROM draw_payment WHERE status = 'RESERVED' OR settled_at IS NULL")) === 0, { timeoutMs: 30_000 });
    await expectDrawPaymentInvariants(stores, { swept: true });
    await expectPointsInvariants(stores);
    expect(await count("SELECT 1 FROM draw_payment WHERE status = 'PAID' AND cost > 0")).toBe(await count('SELECT 1 FROM lottery_draw WHERE cost_points > 0'));
  }, 240_000);
});
