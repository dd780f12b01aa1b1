import { describe, expect, it } from 'vitest';
import { activityKeys } from '../src/domain/teams/store.ts';
import { testEnv } from './support/env.ts';
import { startedServer } from './support/lifecycle.ts';
import { paymentViolations } from './support/paymentInvariants.ts';
import { sendNotify } from './support/payments.ts';
import { sleep, waitFor } from './support/poll.ts';
import { expectTeamInvariants, readRedisTeams, redisViolations } from './support/teamInvariants.ts';
import { teamsAt } from './support/teams.ts';
import { signAhead } from './support/tokens.ts';

const env = testEnv('pay_storm');
const started = startedServer(env);

/** Counts of what came back, by name. */
function tally() {
  const counts = new Map<string, number>();
  return {
    count: (what: string) => counts.set(what, (counts.get(what) ?? 0) + 1),
    get: (what: string) => counts.get(what) ?? 0,
    toString: () => JSON.stringify(Object.fromEntries([...counts].sort())),
  };
}

/** Waits for the activity's journal to drain, then checks every team and payment invariant in Redis and PostgreSQL. */
async function expectSettled(activityId: string, teamIds: string[]) {
  await waitFor('the journal to drain', async () => (await started.stores.redis.xlen(activityKeys(activityId).journal)) === 0, { timeoutMs: 20_000 });
  expect(redisViolations(await readRedisTeams(started.stores.redis, activityId, teamIds))).toEqual([]);
  await expectTeamInvariants(started.stores, activityId, teamIds);
  expect(await paymentViolations(started.stores, teamIds)).toEqual([]);
}

describe('payments racing lock expiry', () => {
  it('seat the payers whose lock was live and owe the others back, exactly once each', async () => {
    const activityId = 'storm-expiry';
    const teams = teamsAt(started.server.url);
    const terms = { capacity: 4, lockSeconds: 2 };
    const teamIds = await Promise.all(Array.from({ length: 40 }, async (_, i) => (await teams.open(`exp-leader-${i}`, { activityId, ...terms })).id));
    const users = Array.from({ length: 300 }, (_, i) => `exp-buyer-${i}`);
    await signAhead(users);
    const outcomes = tally();
    const failures: string[] = [];

    await Promise.all(
      users.map(async (user, i) => {
        const locked = await teams.lock(user, teamIds[i % teamIds.length]!);
        outcomes.count(`lock:${locked.__typename}`);
        if (locked.__typename !== 'SeatLocked') return;
        // Paid around the moment the two-second lock runs out (same machine, same clock), some
        // of them twice (the provider retrying).
        await sleep(Math.max(0, Date.parse(locked.lock.expiresAt) - Date.now() - 1600 + Math.random() * 1800));
        const notice = { ...locked.payment, status: 'SUCCEEDED' as const, providerTxnId: `txn-${locked.payment.paymentRef}` };
        const answers = await Promise.all(Array.from({ length: i % 3 === 0 ? 2 : 1 }, () => sendNotify(started.server.url, notice)));
        for (const answer of answers) {
          if (answer.status !== 200) failures.push(JSON.stringify(answer));
          outcomes.count(`pay:${answer.body.outcome}`);
        }
        if (answers.length === 2 && answers[0]!.body.outcome !== answers[1]!.body.outcome) failures.push(`two answers for one payment: ${JSON.stringify(answers)}`);
      }),
    );
    console.info(`payments racing expiry: ${outcomes}`);
    expect(failures.slice(0, 5)).toEqual([]);
    // The race was real: some payments beat their lock's expiry, some did not.
    expect(outcomes.get('pay:SEATED')).toBeGreaterThan(0);
    expect(outcomes.get('pay:REFUND_OWED')).toBeGreaterThan(0);
    await expectSettled(activityId, teamIds);
  });
});

describe('1,000 users paying for 100 teams', () => {
  it('fills every seat once, each member with exactly one payment bound to them and their team, no refund owed', async () => {
    const activityId = 'storm-thousand';
    const teams = teamsAt(started.server.url);
    const terms = { capacity: 5, lockSeconds: 300 };
    const teamIds = await Promise.all(Array.from({ length: 100 }, async (_, i) => (await teams.open(`k-leader-${i}`, { activityId, ...terms })).id));
    const users = Array.from({ length: 1000 }, (_, i) => `k-buyer-${i}`);
    await signAhead(users);
    const open = [...teamIds];
    const outcomes = tally();
    const failures: string[] = [];

    // Every buyer at once: lock a team that still looks open, pay, and look elsewhere when it is full or closed.
    await Promise.all(
      users.map(async (user) => {
        while (open.length > 0) {
          const teamId = open[Math.floor(Math.random() * open.length)]!;
          const locked = await teams.lock(user, teamId);
          outcomes.count(`lock:${locked.__typename}`);
          if (locked.__typename === 'TeamClosed') {
            if (open.includes(teamId)) open.splice(open.indexOf(teamId), 1);
            continue;
          }
          if (locked.__typename !== 'SeatLocked') {
            await sleep(Math.random() * 50);
            continue;
          }
          const paid = await sendNotify(started.server.url, { ...locked.payment, status: 'SUCCEEDED', providerTxnId: `txn-${locked.payment.paymentRef}` });
          outcomes.count(`pay:${paid.body.outcome}`);
          if (paid.status !== 200 || paid.body.outcome !== 'SEATED') failures.push(`${user}: ${JSON.stringify(paid)}`);
          return;
        }
      }),
    );
    console.info(`1,000 buyers for 100 teams: ${outcomes}`);
    expect(failures.slice(0, 5)).toEqual([]);
    expect(outcomes.get('pay:SEATED')).toBe(400);

    await expectSettled(activityId, teamIds);
    const { rows } = await started.stores.sql.query<{ status: string; n: number }>('SELECT status, count(*)::int AS n FROM team WHERE activity_id = $1 GROUP BY status', [activityId]);
    expect(rows).toEqual([{ status: 'COMPLETE', n: 100 }]);
    const { rows: paid } = await started.stores.sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM payment WHERE activity_id = $1 AND status = 'SUCCEEDED'`, [activityId]);
    expect(paid[0]!.n).toBe(400);
    const { rows: owed } = await started.stores.sql.query<{ n: number }>('SELECT count(*)::int AS n FROM refund r JOIN payment p ON p.payment_ref = r.payment_ref WHERE p.activity_id = $1', [
      activityId,
    ]);
    expect(owed[0]!.n).toBe(0);
  });
});
