import { randomUUID } from 'node:crypto';
import type { ExecutionResult } from 'graphql';
import { describe, expect, it } from 'vitest';
import { type App, createApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { seatsJournalKind } from '../src/domain/teams/persistence.ts';
import { activityKeys, activityOfJournal } from '../src/domain/teams/store.ts';
import { createLogger } from '../src/infra/logger.ts';
import { TeamStatusDocument, type TeamStatusSubscription } from './gql/generated.ts';
import { subscribeSse, subscribeWs } from './support/client.ts';
import { TEST_JWT_SECRET, testEnv } from './support/env.ts';
import { holdCalls } from './support/hold.ts';
import { twoInstances } from './support/lifecycle.ts';
import { sleep } from './support/poll.ts';
import { expectTeamInvariants, readRedisTeams, redisViolations, teamRefunds } from './support/teamInvariants.ts';
import { activityInApp, openInApp, teamsAt } from './support/teams.ts';
import { tokenOf } from './support/tokens.ts';

const env = testEnv('tm_instances');
// Two processes of one deployment on different ports: same Redis, same database. Subscribers
// watch instances.server; the changes are made through instances.other.
const instances = twoInstances(env, { beforeStop: async () => (await inProcess)?.close() });
const { track } = instances;

let inProcess: Promise<App> | undefined;
/** A third instance of the deployment, in this process and without background rounds: for flows a test holds or feeds by hand. */
function inProcessApp(): Promise<App> {
  inProcess ??= (async () => {
    const config = loadConfig({ ...env.vars, LOG_LEVEL: 'silent', JWT_SECRET: TEST_JWT_SECRET, SWEEP_INTERVAL_MS: '600000' });
    return createApp(config, createLogger(config.LOG_LEVEL));
  })();
  return inProcess;
}

type Event = ExecutionResult<TeamStatusSubscription>;
const states = (events: Event[]) => events.filter((event) => event.data).map((event) => event.data!.teamStatus);
const lastState = (events: Event[]) => states(events).at(-1);

const transports = [
  ['SSE', subscribeSse],
  ['graphql-ws', subscribeWs],
] as const;

describe.each(transports)('a %s subscriber on one instance', (_name, subscribe) => {
  it('sees locks, moves, releases, expiries, confirmations and completion made through the other', async () => {
    expect(instances.server.port).not.toBe(instances.other.port);
    const activityId = `inst-${randomUUID().slice(0, 8)}`;
    const far = teamsAt(instances.other.url);
    const team = await far.open('inst-leader', { activityId, capacity: 3, lockSeconds: 2 });
    const other = await far.open('inst-other', { activityId, capacity: 3, lockSeconds: 2 });
    // An operator, who sees user ids in full.
    const subscription = subscribe(instances.server.url, TeamStatusDocument, { teamId: team.id }, await tokenOf('inst-ops', { admin: true }));
    track(subscription);
    const [first] = await subscription.until((events) => events.length >= 1);
    expect(first!.errors).toBeUndefined();
    expect(lastState([first!])).toMatchObject({ id: team.id, freeSeats: 2, locks: [] });

    const locked = await far.lock('inst-a', team.id);
    if (locked.__typename !== 'SeatLocked') throw new Error(`got ${locked.__typename}`);
    let events = await subscription.until((all) => lastState(all)?.locks[0]?.userId === 'inst-a');
    // Absolute state: the lock's times, the seats, the server's clock.
    expect(lastState(events)).toMatchObject({ freeSeats: 1, locks: [locked.lock], nextUnlockAt: null });

    expect((await far.lock('inst-b', team.id)).__typename).toBe('SeatLocked');
    events = await subscription.until((all) => lastState(all)?.freeSeats === 0);
    expect(lastState(events)!.nextUnlockAt).toBe(locked.lock.expiresAt);

    // inst-b moves away to the other team, then inst-a's lock runs out on its own.
    expect(await far.lock('inst-b', other.id)).toMatchObject({ __typename: 'SeatLocked', releasedTeamId: team.id });
    await subscription.until(
      (all) =>
        lastState(all)
          ?.locks.map((lock) => lock.userId)
          .join() === 'inst-a',
    );
    await subscription.until((all) => lastState(all)?.locks.length === 0 && lastState(all)?.freeSeats === 2, 5_000);

    expect((await far.lock('inst-c', team.id)).__typename).toBe('SeatLocked');
    expect((await far.confirm('inst-c', team.id, 'inst-c-pay')).__typename).toBe('Team');
    events = await subscription.until((all) => lastState(all)?.members.length === 2);
    expect(lastState(events)).toMatchObject({ status: 'OPEN', freeSeats: 1, locks: [] });
    expect((await far.lock('inst-d', team.id)).__typename).toBe('SeatLocked');
    expect(await far.release('inst-d', team.id)).toMatchObject({ freeSeats: 1 });
    expect((await far.confirm('inst-a', team.id, 'inst-a-late-pay')).__typename).toBe('Team');
    events = await subscription.until((all) => lastState(all)?.status === 'COMPLETE');
    expect(lastState(events)!.members.map((member) => member.userId)).toEqual(['inst-leader', 'inst-c', 'inst-a']);

    // Every event is newer than the one before, and none is an error.
    expect(events.every((event) => event.errors === undefined)).toBe(true);
    const versions = states(events).map((state) => state.version);
    expect(new Set(versions).size).toBe(versions.length);
    expect(versions).toEqual([...versions].sort((a, b) => a - b));
    subscription.close();
    await expectTeamInvariants(instances.stores, activityId, [team.id, other.id]);
  });
});

describe('one user racing their own lock requests across both instances', () => {
  it('ends with exactly one live lock and no request failing', async () => {
    const activityId = `inst-race-${randomUUID().slice(0, 8)}`;
    const near = teamsAt(instances.server.url);
    const far = teamsAt(instances.other.url);
    const ids = await Promise.all(Array.from({ length: 4 }, async (_, i) => (await near.open(`race-leader-${i}`, { activityId })).id));
    for (let round = 0; round < 5; round++) {
      const results = await Promise.all(Array.from({ length: 12 }, (_, i) => (i % 2 ? near : far).lock('inst-racer', ids[(i + round) % ids.length]!)));
      // A move into a team past the user's lock limit there is a typed refusal, not a failure.
      for (const result of results) expect(['SeatLocked', 'SeatLockLimitReached']).toContain(result.__typename);
      const snapshot = await readRedisTeams(instances.stores.redis, activityId, ids);
      expect(redisViolations(snapshot)).toEqual([]);
      expect(ids.filter((id) => snapshot.teams.get(id)!.locks.some(([user]) => user === 'inst-racer'))).toHaveLength(1);
    }
    await expectTeamInvariants(instances.stores, activityId, ids);
  });
});

describe("an activity's journal stream", () => {
  it('names its activity, so a sweeper that finds a clashing confirmation knows which keys to drop', () => {
    for (const activityId of ['spring-sale', 'shop:42/2026-11', '{odd}']) expect(activityOfJournal(activityKeys(activityId).journal)).toBe(activityId);
    expect(() => activityOfJournal('{rp:packet}:journal')).toThrow();
  });
});

describe('a team just opened', () => {
  it('keeps a seat lock taken through a rebuild that ran before the team wrote its own keys', async () => {
    const app = await inProcessApp();
    const activityId = `fresh-${randomUUID().slice(0, 8)}`;
    // The opening instance is held after PostgreSQL has the team and before Redis does.
    const { reached, letGo } = holdCalls(app.journal, 'trackStream');
    await activityInApp(app, activityId, { formationSeconds: 3600 });
    const opening = app.teams.open('fresh-leader', { activityId });
    await reached;
    // Meanwhile a user finds the team in PostgreSQL (as the activity's list shows it) and locks a seat through a server.
    const { rows } = await instances.stores.sql.query<{ id: string }>('SELECT id FROM team WHERE activity_id = $1', [activityId]);
    const locking = teamsAt(instances.other.url).lock('fresh-locker', rows[0]!.id);
    // The lock is taken in the meantime, or waits for the opening instance: let go either way.
    await Promise.race([locking, sleep(1_000)]);
    letGo();
    const [locked, team] = await Promise.all([locking, opening]);

    expect(locked.__typename).toBe('SeatLocked');
    expect((await teamsAt(instances.server.url).team('fresh-watcher', team.id))?.locks).toHaveLength(1);
    await expectTeamInvariants(instances.stores, activityId, [team.id]);
  });
});

describe('a refused confirmation that dropped expired locks', () => {
  it('is persisted as those lock events, not reported as a clash (which would drop the team and its live locks from Redis)', async () => {
    const app = await inProcessApp();
    const activityId = `refused-${randomUUID().slice(0, 8)}`;
    const team = await openInApp(app, 'refused-leader', activityId, { capacity: 2, lockSeconds: 60, formationSeconds: 3600 });
    const at = Date.now();
    // What confirmTeamSeat journals when it refuses with NoSeatLock after dropping a lock that ran out.
    const fields = {
      kind: 'team.seats',
      op: 'confirm',
      event: randomUUID(),
      team: team.id,
      at: String(at),
      events: JSON.stringify([{ kind: 'EXPIRED', team: team.id, user: 'refused-locker', at }]),
    };
    expect(await seatsJournalKind.persist(app.db, [{ stream: activityKeys(activityId).journal, id: `${at}-0`, fields }])).toEqual({ conflicts: [], replayed: [] });
    const { rows } = await instances.stores.sql.query<{ kind: string }>('SELECT kind FROM team_seat_event WHERE team_id = $1', [team.id]);
    expect(rows.map((row) => row.kind)).toEqual(['EXPIRED']);
  });
});

describe('a failure committed with a confirmation of its team', () => {
  it('owes a refund to the member Redis did not list, and none at all for a team PostgreSQL holds COMPLETE', async () => {
    const app = await inProcessApp();
    const activityId = `owed-${randomUUID().slice(0, 8)}`;
    const stream = activityKeys(activityId).journal;
    const at = Date.now();
    const entry = (team: string, op: string, extra: Record<string, string>, n: number) => ({
      stream,
      id: `${at}-${n}`,
      fields: { kind: 'team.seats', op, event: randomUUID(), team, at: String(at), events: '[]', ...extra },
    });
    const confirm = (team: string, user: string, seat: number, n: number) => entry(team, 'confirm', { user, paymentRef: `${user}-pay`, seat: String(seat) }, n);
    const fail = (team: string, leader: string, n: number) => entry(team, 'fail', { members: JSON.stringify([{ user: leader, seat: 1, joinedAt: at }]) }, n);
    const refunds = async (team: string) => (await teamRefunds(instances.stores, [team])).map((row) => row.user_id).sort();
    // What the members paid: a failed team owes it back (its leader paid nothing).
    const paid = (team: string, user: string) =>
      instances.stores.sql.query(
        `INSERT INTO payment (payment_ref, user_id, purpose, activity_id, team_id, amount_cents, expires_at, status) VALUES ($1, $2, 'TEAM_SEAT', $3, $4, 990, now(), 'SUCCEEDED')`,
        [`${user}-pay`, user, activityId, team],
      );

    // A Redis rebuilt without the member failed the team while the member's confirmation was on its way.
    const failing = await openInApp(app, 'owed-leader', activityId, { capacity: 2, lockSeconds: 60, formationSeconds: 3600 });
    await paid(failing.id, 'owed-member');
    await seatsJournalKind.persist(app.db, [confirm(failing.id, 'owed-member', 2, 0), fail(failing.id, 'owed-leader', 1)]);
    expect(await refunds(failing.id)).toEqual(['owed-member']);

    // A stale Redis fails a team PostgreSQL already holds COMPLETE.
    const complete = await openInApp(app, 'done-leader', activityId, { capacity: 2, lockSeconds: 60, formationSeconds: 3600 });
    await paid(complete.id, 'done-member');
    await seatsJournalKind.persist(app.db, [confirm(complete.id, 'done-member', 2, 2)]);
    await seatsJournalKind.persist(app.db, [fail(complete.id, 'done-leader', 3)]);
    const { rows } = await instances.stores.sql.query<{ status: string }>('SELECT status FROM team WHERE id = $1', [complete.id]);
    expect(rows[0]!.status).toBe('COMPLETE');
    expect(await refunds(complete.id)).toEqual([]);
  });
});
