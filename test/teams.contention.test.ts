import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { activityKeys } from '../src/domain/teams/store.ts';
import { ConfirmTeamSeatDocument, LockTeamSeatDocument, ReleaseTeamSeatDocument } from './gql/generated.ts';
import type { GraphqlResponse } from './support/client.ts';
import { testEnv } from './support/env.ts';
import { stopAll } from './support/lifecycle.ts';
import { sendNotify } from './support/payments.ts';
import { sleep, waitFor } from './support/poll.ts';
import { type ServerProcess, startServerProcesses } from './support/server.ts';
import { type Stores, openStores } from './support/stores.ts';
import { expectTeamInvariants, postgresViolations, readRedisTeams, redisViolations } from './support/teamInvariants.ts';
import { OPERATOR, teamsAt } from './support/teams.ts';
import { signAhead } from './support/tokens.ts';

const env = testEnv('tm_contention');
let servers: ServerProcess[] = [];
let stores: Stores;

beforeAll(async () => {
  // Two instances of one deployment; every user's requests alternate between them.
  servers = await startServerProcesses([env.vars, env.vars]);
  stores = openStores(env);
});

afterAll(async () => {
  try {
    await stopAll(...servers);
  } finally {
    await stores?.cleanup();
  }
});

const ACTIVITY = 'contention';
const TEAMS = 100;
const USERS = 300;
const RUN_MS = 12_000;

interface Payment {
  paymentRef: string;
  amountCents: number;
}
interface Held {
  teamId: string;
  payment: Payment;
}

const pick = <T>(items: readonly T[]): T => items[Math.floor(Math.random() * items.length)]!;

describe('300 users racing for 100 teams of three', () => {
  it('never oversells a seat, never gives a user two live locks, and PostgreSQL agrees with Redis', async () => {
    // Short locks, so expiries (swept and found by scripts) and late payments mix with the rest.
    await teamsAt(servers[0]!.url).activity(ACTIVITY, { lockSeconds: 3 });
    const teamIds = await Promise.all(Array.from({ length: TEAMS }, async (_, i) => (await teamsAt(servers[i % 2]!.url).open(`leader-${i}`, { activityId: ACTIVITY, lockSeconds: 3 })).id));
    const users = Array.from({ length: USERS }, (_, i) => `user-${i}`);
    await signAhead(users);
    const clients = servers.map((server) => teamsAt(server.url));

    const outcomes = new Map<string, number>();
    const count = (what: string) => outcomes.set(what, (outcomes.get(what) ?? 0) + 1);
    const failures: string[] = [];
    const violations: string[] = [];
    let checks = 0;
    const stopAt = Date.now() + RUN_MS;

    const record = (action: string, response: GraphqlResponse<Record<string, { __typename?: string } | undefined>>, field: string) => {
      if (response.body.errors?.length) {
        failures.push(`${action}: ${JSON.stringify(response.body.errors)}`);
        return undefined;
      }
      const result = response.body.data![field]!;
      count(`${action}:${result.__typename ?? 'Team'}`);
      return result;
    };

    /** The provider's notify of the lock's payment; a lock that ran out meanwhile is owed back. */
    const pay = async (action: string, url: string, payment: Payment) => {
      const notified = await sendNotify(url, { ...payment, status: 'SUCCEEDED', providerTxnId: `txn-${payment.paymentRef}` });
      if (notified.status !== 200) failures.push(`${action}: ${JSON.stringify(notified)}`);
      count(`${action}:${notified.body.outcome}`);
    };

    /** Acts at random until the time is up; resolves with the lock (and its payment) the user still holds. */
    const actAs = async (user: string, index: number): Promise<Held | null> => {
      let held: Held | null = null;
      let request = index;
      while (Date.now() < stopAt) {
        const teams = clients[request++ % 2]!;
        const url = servers[request % 2]!.url;
        const roll = Math.random();
        if (held && roll < 0.015) {
          await pay('pay', url, held.payment);
          held = null;
        } else if (!held && roll < 0.002) {
          // An operator's manual confirmation without a lock: joins only if a seat is free.
          record(
            'confirm',
            await teams.raw(ConfirmTeamSeatDocument, { teamId: pick(teamIds), userId: user, paymentRef: `manual-${user}-${request}` }, OPERATOR, { admin: true }),
            'confirmTeamSeat',
          );
        } else if (held && roll < 0.25) {
          await teams.raw(ReleaseTeamSeatDocument, { teamId: held.teamId }, user).then((response) => {
            if (response.body.errors?.length) failures.push(`release: ${JSON.stringify(response.body.errors)}`);
            else count('release');
          });
          held = null;
        } else {
          // Lock a random team; while holding a lock this is a move.
          const action = held ? 'move' : 'lock';
          const result = record(action, await teams.raw(LockTeamSeatDocument, { teamId: pick(teamIds) }, user), 'lockTeamSeat') as
            | { __typename: string; team?: { id: string }; releasedTeamId?: string | null; payment?: Payment }
            | undefined;
          if (result?.__typename === 'SeatLocked') {
            if (result.releasedTeamId) count('moved');
            held = { teamId: result.team!.id, payment: result.payment! };
          }
        }
        await sleep(Math.random() * 10);
      }
      return held;
    };

    const checker = async () => {
      for (let round = 0; Date.now() < stopAt; round++) {
        violations.push(...redisViolations(await readRedisTeams(stores.redis, ACTIVITY, teamIds)));
        if (round % 10 === 0) violations.push(...(await postgresViolations(stores, teamIds)));
        checks++;
        await sleep(100);
      }
    };

    const [holding] = await Promise.all([Promise.all(users.map(actAs)), checker()]);
    // Then every buyer still holding a lock pays at once: teams fill up and complete side by side.
    await Promise.all(
      holding.map(async (held, i) => {
        if (held) await pay('final pay', servers[i % 2]!.url, held.payment);
      }),
    );
    console.info(`contention: ${JSON.stringify(Object.fromEntries([...outcomes].sort()))}, ${checks} checks`);
    expect(failures.slice(0, 5)).toEqual([]);
    expect(violations.slice(0, 5)).toEqual([]);
    // Checked all along, not just at the end (how often depends on how busy the machine is).
    expect(checks).toBeGreaterThan(10);

    // The race was real: seats were won, refused, moved and paid for.
    for (const outcome of ['lock:SeatLocked', 'lock:TeamFull', 'move:SeatLocked', 'moved', 'pay:SEATED', 'final pay:SEATED', 'release']) {
      expect(outcomes.get(outcome) ?? 0, outcome).toBeGreaterThan(0);
    }

    // Quiet now: the journal drains, and both stores agree on every team.
    await waitFor('the journal to drain', async () => (await stores.redis.xlen(activityKeys(ACTIVITY).journal)) === 0, { timeoutMs: 15_000 });
    const members = await expectTeamInvariants(stores, ACTIVITY, teamIds);
    const { rows } = await stores.sql.query<{ status: string; n: number }>('SELECT status, count(*)::int AS n FROM team WHERE activity_id = $1 GROUP BY status', [ACTIVITY]);
    console.info(`contention: ${members.length} members; teams by status ${JSON.stringify(rows)}`);
    expect(rows.find((row) => row.status === 'COMPLETE')?.n ?? 0).toBeGreaterThan(0);
  });
});
