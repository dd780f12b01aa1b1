import { randomUUID } from 'node:crypto';
import type { ExecutionResult } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { aliasScope } from '../src/domain/privacy.ts';
import { SEAT_LOCKS_PER_USER_PER_TEAM } from '../src/domain/teams/store.ts';
import { ConfirmTeamSeatDocument, type TeamStateFragment, TeamStatusDocument, type TeamStatusSubscription } from './gql/generated.ts';
import { type Subscription, errorCodes, subscribeWs } from './support/client.ts';
import { testEnv } from './support/env.ts';
import { waitFor } from './support/poll.ts';
import { aliasOf } from './support/privacy.ts';
import { type ServerProcess, startServerProcess } from './support/server.ts';
import { type Stores, loseKeysAtOnce, openStores } from './support/stores.ts';
import { expectTeamInvariants, readRedisTeams, redisViolations } from './support/teamInvariants.ts';
import { OPERATOR, teamsAt } from './support/teams.ts';
import { tokenOf } from './support/tokens.ts';

const env = testEnv('tm_seats');
let server: ServerProcess;
let stores: Stores;
let teams: ReturnType<typeof teamsAt>;
const open: Subscription<unknown>[] = [];

beforeAll(async () => {
  server = await startServerProcess(env.vars);
  stores = openStores(env);
  teams = teamsAt(server.url);
});

afterAll(async () => {
  for (const subscription of open) subscription.close();
  await server?.stop();
  await stores?.cleanup();
});

const newActivity = () => `act-${randomUUID().slice(0, 8)}`;
const ms = (iso: string | null | undefined) => (iso ? Date.parse(iso) : Number.NaN);
/** What users other than `userId` (operators aside) see of them in the activity. */
const alias = (activityId: string, userId: string) => aliasOf(aliasScope.teamActivity(activityId), userId);

type Event = ExecutionResult<TeamStatusSubscription>;
const states = (events: Event[]) => events.filter((event) => event.data).map((event) => event.data!.teamStatus);
const lastState = (events: Event[]) => states(events).at(-1);

async function watch(teamId: string, viewer: string, options: { admin?: boolean } = {}): Promise<Subscription<TeamStatusSubscription>> {
  const subscription = subscribeWs(server.url, TeamStatusDocument, { teamId }, await tokenOf(viewer, options));
  open.push(subscription as Subscription<unknown>);
  await subscription.until((events) => events.length >= 1);
  return subscription;
}

async function seatEvents(teamId: string): Promise<string[]> {
  const { rows } = await stores.sql.query<{ user_id: string; kind: string }>('SELECT user_id, kind FROM team_seat_event WHERE team_id = $1 ORDER BY at, id', [teamId]);
  return rows.map((row) => `${row.user_id}:${row.kind}`);
}

describe('seat locks on one team', () => {
  it('locks, repeats unchanged, refuses with the countdown when full, releases, confirms idempotently and completes', async () => {
    const activityId = newActivity();
    const team = await teams.open('leader', { activityId });
    expect(team).toMatchObject({ capacity: 3, lockSeconds: 300, status: 'OPEN', freeSeats: 2, locks: [], nextUnlockAt: null });
    expect(team.members.map((member) => member.userId)).toEqual(['leader']);
    expect(ms(team.deadline) - ms(team.members[0]!.joinedAt)).toBe(86_400_000);

    const a = await teams.lock('a', team.id);
    if (a.__typename !== 'SeatLocked') throw new Error(`a got ${a.__typename}`);
    expect(ms(a.lock.expiresAt) - ms(a.lock.lockedAt)).toBe(300_000);
    expect(Math.abs(ms(a.lock.lockedAt) - Date.now())).toBeLessThan(5_000);
    expect(a.releasedTeamId).toBeNull();
    expect(a.team).toMatchObject({ freeSeats: 1, nextUnlockAt: null });
    expect(a.team.version).toBeGreaterThan(team.version);

    // A repeat returns the same lock, unchanged; the leader is a member already.
    expect(await teams.lock('a', team.id)).toMatchObject({ __typename: 'SeatLocked', lock: a.lock });
    expect((await teams.lock('leader', team.id)).__typename).toBe('AlreadyMember');

    const b = await teams.lock('b', team.id);
    if (b.__typename !== 'SeatLocked') throw new Error(`b got ${b.__typename}`);
    expect(b.team).toMatchObject({ freeSeats: 0, nextUnlockAt: a.lock.expiresAt });
    const full = await teams.lock('c', team.id);
    if (full.__typename !== 'TeamFull') throw new Error(`c got ${full.__typename}`);
    expect(full.nextUnlockAt).toBe(a.lock.expiresAt);
    expect(Math.abs(ms(full.serverTime) - Date.now())).toBeLessThan(5_000);

    // A release gives the seat back at once.
    const released = await teams.release('b', team.id);
    expect(released).toMatchObject({ freeSeats: 1, nextUnlockAt: null });
    expect(released.locks.map((lock) => lock.userId)).toEqual([alias(activityId, 'a')]);
    expect((await teams.release('b', team.id)).version).toBe(released.version);
    expect((await teams.lock('c', team.id)).__typename).toBe('SeatLocked');

    // Confirming turns the lock into membership; the same paymentRef again is the same answer.
    const confirmed = await teams.confirm('a', team.id, 'pay-a');
    if (confirmed.__typename !== 'Team') throw new Error(`a confirm got ${confirmed.__typename}`);
    // An operator confirmed it, and operators see user ids.
    expect(confirmed.members.map((member) => member.userId)).toEqual(['leader', 'a']);
    expect(confirmed.locks.map((lock) => lock.userId)).toEqual(['c']);
    const again = await teams.confirm('a', team.id, 'pay-a');
    expect(again).toMatchObject({ __typename: 'Team', members: confirmed.members });
    expect(await teams.confirm('a', team.id, 'pay-a-second')).toMatchObject({ __typename: 'Team', members: confirmed.members });
    // Someone else's paymentRef is refused and changes nothing.
    const stolen = await teams.raw(ConfirmTeamSeatDocument, { teamId: team.id, userId: 'd', paymentRef: 'pay-a' }, OPERATOR, { admin: true });
    expect(errorCodes(stolen)).toEqual(['BAD_USER_INPUT']);
    // Without a lock and without a free seat: NoSeatLock, with the countdown.
    expect(await teams.confirm('d', team.id, 'pay-d')).toMatchObject({ __typename: 'NoSeatLock', nextUnlockAt: expect.any(String) });

    const complete = await teams.confirm('c', team.id, 'pay-c');
    expect(complete).toMatchObject({ __typename: 'Team', status: 'COMPLETE', freeSeats: 0, locks: [], nextUnlockAt: null });
    expect(await teams.lock('d', team.id)).toMatchObject({ __typename: 'TeamClosed', status: 'COMPLETE' });
    expect(await teams.confirm('d', team.id, 'pay-d')).toMatchObject({ __typename: 'TeamClosed', status: 'COMPLETE' });
    expect((await teams.confirm('c', team.id, 'pay-c')).__typename).toBe('Team');

    const members = await expectTeamInvariants(stores, activityId, [team.id]);
    expect(members.map((member) => `${member.user_id}:${member.payment_ref}`).sort()).toEqual(['a:pay-a', 'c:pay-c', 'leader:null']);
    expect(await seatEvents(team.id)).toEqual(['a:LOCKED', 'b:LOCKED', 'b:RELEASED', 'c:LOCKED', 'a:CONFIRMED', 'c:CONFIRMED']);
    const { rows } = await stores.sql.query('SELECT status, closed_at FROM team WHERE id = $1', [team.id]);
    expect(rows[0]).toMatchObject({ status: 'COMPLETE', closed_at: expect.any(Date) });
  });
});

describe("a lock near the team's deadline", () => {
  it("lasts lockSeconds, but its payment is due 30 s before the team's deadline, in the answer and in PostgreSQL", async () => {
    const team = await teams.open('near-leader', { activityId: newActivity(), formationSeconds: 120 });
    const locked = await teams.lock('near-buyer', team.id);
    if (locked.__typename !== 'SeatLocked') throw new Error(`near-buyer got ${locked.__typename}`);
    expect(ms(locked.lock.expiresAt) - ms(locked.lock.lockedAt)).toBe(300_000);
    // The grace for the provider's notify: a tenth of the 300 s lock, at most 30 s.
    expect(ms(team.deadline) - ms(locked.payment.expiresAt)).toBe(30_000);
    const { rows } = await stores.sql.query<{ expires_at: Date }>('SELECT expires_at FROM payment WHERE payment_ref = $1', [locked.payment.paymentRef]);
    expect(rows[0]?.expires_at.toISOString()).toBe(locked.payment.expiresAt);
    // A repeat answers the same payment.
    expect(await teams.lock('near-buyer', team.id)).toMatchObject({ payment: locked.payment });
  });
});

describe('seat locks of one user', () => {
  it(`are at most ${SEAT_LOCKS_PER_USER_PER_TEAM} in one team: releasing and locking again cannot hold a seat until the deadline`, async () => {
    const activityId = newActivity();
    const team = await teams.open('cycler-leader', { activityId });
    for (let i = 0; i < SEAT_LOCKS_PER_USER_PER_TEAM; i++) {
      expect((await teams.lock('cycler', team.id)).__typename).toBe('SeatLocked');
      await teams.release('cycler', team.id);
    }
    const payments = async () => (await stores.sql.query('SELECT payment_ref FROM payment WHERE team_id = $1', [team.id])).rowCount;
    expect(await payments()).toBe(SEAT_LOCKS_PER_USER_PER_TEAM);
    expect(await teams.lock('cycler', team.id)).toMatchObject({ __typename: 'SeatLockLimitReached', maxLocks: SEAT_LOCKS_PER_USER_PER_TEAM });
    expect(await payments()).toBe(SEAT_LOCKS_PER_USER_PER_TEAM);
    // Another buyer takes the seat; the cycler may still lock in another team.
    expect((await teams.lock('patient', team.id)).__typename).toBe('SeatLocked');
    const other = await teams.open('cycler-leader-2', { activityId });
    expect((await teams.lock('cycler', other.id)).__typename).toBe('SeatLocked');
    await expectTeamInvariants(stores, activityId, [team.id, other.id]);
  });
});

describe('moving a lock', () => {
  it("moves the caller's live lock to another team of the activity in one step; both teams announce it", async () => {
    const activityId = newActivity();
    const x = await teams.open('leader-x', { activityId });
    const y = await teams.open('leader-y', { activityId });
    const watchX = await watch(x.id, 'watcher', { admin: true });
    const watchY = await watch(y.id, 'watcher', { admin: true });

    expect((await teams.lock('mover', x.id)).__typename).toBe('SeatLocked');
    await watchX.until((events) => lastState(events)?.locks.length === 1);
    const moved = await teams.lock('mover', y.id);
    if (moved.__typename !== 'SeatLocked') throw new Error(`move got ${moved.__typename}`);
    expect(moved.releasedTeamId).toBe(x.id);
    expect(moved.team.locks.map((lock) => lock.userId)).toEqual(['mover']);
    await watchX.until((events) => lastState(events)?.locks.length === 0 && lastState(events)?.freeSeats === 2);
    await watchY.until((events) => lastState(events)?.locks[0]?.userId === 'mover');
    expect((await teams.team('watcher', x.id))?.locks).toEqual([]);

    // Into a full team it does not move: the lock stays where it is.
    const z = await teams.open('leader-z', { activityId });
    expect((await teams.lock('other', z.id)).__typename).toBe('SeatLocked');
    expect((await teams.lock('another', z.id)).__typename).toBe('SeatLocked');
    expect((await teams.lock('mover', z.id)).__typename).toBe('TeamFull');
    expect((await teams.team('watcher', y.id))?.locks.map((lock) => lock.userId)).toEqual([alias(activityId, 'mover')]);
    expect((await teams.team('watcher', y.id, { admin: true }))?.locks.map((lock) => lock.userId)).toEqual(['mover']);

    // Back to the first team; a team of another activity is another matter.
    expect(await teams.lock('mover', x.id)).toMatchObject({ __typename: 'SeatLocked', releasedTeamId: y.id });
    const elsewhere = await teams.open('leader-e', { activityId: newActivity() });
    expect(await teams.lock('mover', elsewhere.id)).toMatchObject({ __typename: 'SeatLocked', releasedTeamId: null });
    expect((await teams.team('mover', x.id))?.locks.map((lock) => lock.userId)).toEqual(['mover']);

    await expectTeamInvariants(stores, activityId, [x.id, y.id, z.id]);
    expect(await seatEvents(x.id)).toEqual(['mover:LOCKED', 'mover:MOVED', 'mover:LOCKED']);
    expect(await seatEvents(y.id)).toEqual(['mover:LOCKED', 'mover:MOVED']);
  });

  it('leaves a user racing their own requests over five teams with exactly one live lock', async () => {
    const activityId = newActivity();
    const ids = await Promise.all(Array.from({ length: 5 }, async (_, i) => (await teams.open(`racer-leader-${i}`, { activityId })).id));
    for (let round = 0; round < 5; round++) {
      const results = await Promise.all(Array.from({ length: 20 }, (_, i) => teams.lock('racer', ids[(i + round) % ids.length]!)));
      // Each move into a team is a lock taken there, and a team takes only so many of one user's.
      for (const result of results) expect(['SeatLocked', 'SeatLockLimitReached']).toContain(result.__typename);
      const snapshot = await readRedisTeams(stores.redis, activityId, ids);
      expect(redisViolations(snapshot)).toEqual([]);
      const holding = ids.filter((id) => snapshot.teams.get(id)!.locks.some(([user, expiresAt]) => user === 'racer' && expiresAt > snapshot.nowMs));
      expect(holding).toHaveLength(1);
      expect(snapshot.holders.racer).toBe(holding[0]);
    }
    await expectTeamInvariants(stores, activityId, ids);
  });
});

describe("an operator's confirmation after the lock expired", () => {
  it('is honoured while a seat is free', async () => {
    const activityId = newActivity();
    const team = await teams.open('late-leader', { activityId, lockSeconds: 1 });
    const locked = await teams.lock('late', team.id);
    if (locked.__typename !== 'SeatLocked') throw new Error(`got ${locked.__typename}`);
    await waitFor('the lock to expire', async () => (await teams.team('late-leader', team.id))?.locks.length === 0, { timeoutMs: 5_000, intervalMs: 50 });
    expect(Date.now()).toBeGreaterThanOrEqual(ms(locked.lock.expiresAt));

    const confirmed = await teams.confirm('late', team.id, 'late-pay');
    expect(confirmed).toMatchObject({ __typename: 'Team', status: 'OPEN', freeSeats: 1 });
    if (confirmed.__typename === 'Team') expect(confirmed.members.map((member) => member.userId)).toEqual(['late-leader', 'late']);
    await expectTeamInvariants(stores, activityId, [team.id]);
    expect(await seatEvents(team.id)).toEqual(['late:LOCKED', 'late:EXPIRED', 'late:CONFIRMED']);
  });

  it('is refused with NoSeatLock once someone else holds the seat, and TeamClosed once the team is complete', async () => {
    const activityId = newActivity();
    const team = await teams.open('pair-leader', { activityId, capacity: 2, lockSeconds: 1 });
    expect((await teams.lock('slow', team.id)).__typename).toBe('SeatLocked');
    await waitFor('the lock to expire', async () => (await teams.team('pair-leader', team.id))?.freeSeats === 1, { timeoutMs: 5_000, intervalMs: 50 });
    const quick = await teams.lock('quick', team.id);
    if (quick.__typename !== 'SeatLocked') throw new Error(`got ${quick.__typename}`);

    expect(await teams.confirm('slow', team.id, 'slow-pay')).toMatchObject({ __typename: 'NoSeatLock', nextUnlockAt: quick.lock.expiresAt });
    expect(await teams.confirm('quick', team.id, 'quick-pay')).toMatchObject({ __typename: 'Team', status: 'COMPLETE' });
    expect(await teams.confirm('slow', team.id, 'slow-pay')).toMatchObject({ __typename: 'TeamClosed', status: 'COMPLETE' });
    const members = await expectTeamInvariants(stores, activityId, [team.id]);
    expect(members.map((member) => member.user_id).sort()).toEqual(['pair-leader', 'quick']);
  });
});

describe('who sees lock holders', () => {
  it("shows a lock holder's id to the holder and to operators; anyone else, members included, sees the activity's alias", async () => {
    const activityId = newActivity();
    const team = await teams.open('mask-leader', { activityId, capacity: 4 });
    const locked = await teams.lock('holder', team.id);
    if (locked.__typename !== 'SeatLocked') throw new Error(`got ${locked.__typename}`);
    const { lockedAt, expiresAt } = locked.lock;

    expect((await teams.team('stranger', team.id))?.locks).toEqual([{ userId: alias(activityId, 'holder'), lockedAt, expiresAt }]);
    expect((await teams.team('holder', team.id))?.locks).toEqual([{ userId: 'holder', lockedAt, expiresAt }]);
    expect((await teams.team('mask-leader', team.id))?.locks).toEqual([{ userId: alias(activityId, 'holder'), lockedAt, expiresAt }]);
    expect((await teams.team('ops', team.id, { admin: true }))?.locks).toEqual([{ userId: 'holder', lockedAt, expiresAt }]);

    // The same on the live stream, per viewer.
    const stranger = await watch(team.id, 'stranger');
    const leader = await watch(team.id, 'mask-leader');
    expect((await teams.lock('second', team.id)).__typename).toBe('SeatLocked');
    const seen = lastState(await stranger.until((events) => lastState(events)?.locks.length === 2))!;
    expect(seen.locks.map((lock) => lock.userId)).toEqual([alias(activityId, 'holder'), alias(activityId, 'second')]);
    const known = lastState(await leader.until((events) => lastState(events)?.locks.length === 2))!;
    expect(known.locks).toEqual(seen.locks);
  });
});

describe('the "join a team" list', () => {
  it('puts open teams with free seats first, then the rest; filters by status', async () => {
    const activityId = newActivity();
    const locked = await teams.open('list-1', { activityId, capacity: 2 });
    const complete = await teams.open('list-2', { activityId, capacity: 2 });
    const free = await teams.open('list-3', { activityId, capacity: 2 });
    expect((await teams.lock('list-locker', locked.id)).__typename).toBe('SeatLocked');
    expect((await teams.confirm('list-buyer', complete.id, 'list-pay')).__typename).toBe('Team');

    const list = async (status?: 'OPEN' | 'COMPLETE' | 'FAILED') => {
      const { body } = await teams.raw((await import('./gql/generated.ts')).TeamsDocument, { activityId, status }, 'browser');
      return body.data!.teams.map((team: TeamStateFragment) => [team.id, team.status, team.freeSeats]);
    };
    expect(await list()).toEqual([
      [free.id, 'OPEN', 1],
      [locked.id, 'OPEN', 0],
      [complete.id, 'COMPLETE', 0],
    ]);
    expect(await list('OPEN')).toEqual([
      [free.id, 'OPEN', 1],
      [locked.id, 'OPEN', 0],
    ]);
    expect(await list('COMPLETE')).toEqual([[complete.id, 'COMPLETE', 0]]);
    expect(await list('FAILED')).toEqual([]);
    expect((await teams.raw((await import('./gql/generated.ts')).TeamsDocument, { activityId: newActivity() }, 'browser')).body.data?.teams).toEqual([]);
  });
});

describe('recovery', () => {
  it('rebuilds a team from PostgreSQL after Redis loses its data: members and status kept, locks gone, versions still growing', async () => {
    const activityId = newActivity();
    const team = await teams.open('rec-leader', { activityId });
    expect((await teams.confirm('rec-member', team.id, 'rec-pay')).__typename).toBe('Team');
    const locked = await teams.lock('rec-locker', team.id);
    if (locked.__typename !== 'SeatLocked') throw new Error(`got ${locked.__typename}`);
    expect(locked.team.freeSeats).toBe(0);
    const watcher = await watch(team.id, 'rec-watcher');
    await watcher.until((events) => lastState(events)?.freeSeats === 0);

    expect(await loseKeysAtOnce(stores.redis, env.keyPrefix)).toBeGreaterThan(0);
    const rebuilt = await teams.team('rec-leader', team.id);
    expect(rebuilt).toMatchObject({ status: 'OPEN', freeSeats: 1, locks: [] });
    expect(rebuilt!.members.map((member) => member.userId)).toEqual(['rec-leader', alias(activityId, 'rec-member')]);
    expect(rebuilt!.version).toBeGreaterThan(locked.team.version);
    // The lost lock's seat is free again: its watchers hear it from the rebuild, with no change to wait for.
    await watcher.until((events) => lastState(events)?.freeSeats === 1, 2_000);
    expect(lastState(watcher.events)?.version).toBeGreaterThan(locked.team.version);

    // The paid seat is honoured (the lock was lost, the seat is free); the repeat is idempotent.
    expect(await teams.confirm('rec-locker', team.id, 'rec-pay-2')).toMatchObject({ __typename: 'Team', status: 'COMPLETE' });
    expect((await teams.confirm('rec-member', team.id, 'rec-pay')).__typename).toBe('Team');
    await expectTeamInvariants(stores, activityId, [team.id], { locksLost: true });
  });
});
