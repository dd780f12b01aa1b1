import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_POINTS } from '../src/domain/points/input.ts';
import { type Attempt, unlessCutOff } from './support/client.ts';
import { expectDrawPaymentInvariants } from './support/drawPaymentInvariants.ts';
import { testEnv } from './support/env.ts';
import { lotteryAt, runningWindow } from './support/lottery.ts';
import { pointsAt } from './support/points.ts';
import { waitFor } from './support/poll.ts';
import { type ServerProcess, startServerProcess } from './support/server.ts';
import { type Stores, openStores } from './support/stores.ts';

// Every paid draw stops for good after its reservation, as a process that dies there: the
// sweeper gives each reservation back half a second later. The server is killed at the end,
// with those draws still hanging.
const env = testEnv('lot_paid_sweep', { DRAW_RESERVATION_TIMEOUT_MS: '500', SWEEP_INTERVAL_MS: '200', TEST_HANG_AFTER_DRAW_RESERVATIONS: '0' });
let stores: Stores;
let server: ServerProcess;
const hanging: Promise<Attempt<unknown>>[] = [];

beforeAll(async () => {
  server = await startServerProcess(env.vars);
  stores = openStores(env);
});

afterAll(async () => {
  await server?.kill();
  await Promise.all(hanging);
  await stores?.cleanup();
});

describe('the draw payment sweep', () => {
  it('goes on past a reservation it cannot give back: the others come back, and the failure is logged with its ids', async () => {
    const lottery = lotteryAt(server.url);
    const points = pointsAt(server.url);
    const activity = await lottery.create('sweep-op', {
      title: 'orphans',
      ...runningWindow(),
      noPrizeWeight: 1_000_000,
      drawCostPoints: 10,
      prizes: [{ title: 'almost never', weight: 1, totalStock: 1 }],
    });
    // The oldest reservation due, on a balance with no room for it: its release fails every round.
    await stores.sql.query("INSERT INTO points_account (user_id, balance) VALUES ('poisoned', $1)", [MAX_POINTS]);
    await stores.sql.query(
      `INSERT INTO draw_payment (draw_id, user_id, activity_id, cost, status, reserved_at, release_after)
       VALUES ('poison-draw', 'poisoned', $1, 100, 'RESERVED', now() - interval '1 hour', now() - interval '1 hour')`,
      [activity.id],
    );

    const users = ['orphan-1', 'orphan-2', 'orphan-3'];
    for (const user of users) await points.award('sweep-op', { userId: user, amount: 100 });
    for (const user of users) hanging.push(unlessCutOff(lottery.tryDraw(user, activity.id)));
    const released = "SELECT count(*)::int AS n FROM draw_payment WHERE user_id = ANY($1) AND status = 'RELEASED' AND settled_at IS NOT NULL";
    await waitFor('the orphans released and settled', async () => (await stores.sql.query<{ n: number }>(released, [users])).rows[0]!.n === users.length, { timeoutMs: 15_000 });
    for (const user of users) expect((await points.me(user)).pointsBalance, user).toBe(100);

    const { rows } = await stores.sql.query<{ status: string }>("SELECT status::text FROM draw_payment WHERE draw_id = 'poison-draw'");
    expect(rows).toEqual([{ status: 'RESERVED' }]);
    const failures = server
      .output()
      .split('\n')
      .filter((line) => line.includes('could not sweep a draw payment'));
    expect(failures.length).toBeGreaterThan(0);
    expect(JSON.parse(failures[0]!)).toMatchObject({ level: 50, drawId: 'poison-draw', userId: 'poisoned', activityId: activity.id });

    await stores.sql.query("DELETE FROM draw_payment WHERE draw_id = 'poison-draw'");
    await stores.sql.query("DELETE FROM points_account WHERE user_id = 'poisoned'");
    await expectDrawPaymentInvariants(stores, { swept: true });
  }, 60_000);
});
