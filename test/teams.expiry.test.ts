import { randomUUID } from 'node:crypto';
import type { ExecutionResult } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { activityKeys } from '../src/domain/teams/store.ts';
import { ConfirmTeamSeatDocument, TeamStatusDocument, type TeamStatusSubscription } from './gql/generated.ts';
import { type Subscription, subscribeSse, subscribeWs } from './support/client.ts';
import { testEnv } from './support/env.ts';
import { sendNotify } from './support/payments.ts';
import { waitFor } from './support/poll.ts';
import { type ServerProcess, startServerProcess } from './support/server.ts';
import { type Stores, loseKeysAtOnce, openStores } from './support/stores.ts';
import { expectTeamInvariants, teamRefunds } from './support/teamInvariants.ts';
import { GROUP_PRICE_CENTS, OPERATOR, teamsAt } from './support/teams.ts';
import { tokenOf } from './support/tokens.ts';

// The deadline worker runs five times a second; the expiry sweeper at its default (200 ms).
const env = testEnv('tm_expiry', { SWEEP_INTERVAL_MS: '200' });
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

type Event = ExecutionResult<TeamStatusSubscription>;

/** Waits until PostgreSQL holds the team with `status`. */
const durableStatus = (teamId: string, status: 'COMPLETE' | 'FAILED', timeoutMs: number) =>
  waitFor(
    `the team ${status} in PostgreSQL`,
    async () => {
      const { rows } = await stores.sql.query('SELECT 1 FROM team WHERE id = $1 AND status = $2', [teamId, status]);
      return rows.length === 1;
    },
    { timeoutMs },
  );
const ms = (iso: string | null | undefined) => (iso ? Date.parse(iso) : Number.NaN);

/** Records when each event arrived, by this process's clock (the same machine as Redis). */
function timed(subscription: Subscription<TeamStatusSubscription>) {
  const arrivals: { at: number; event: Event }[] = [];
  const original = subscription.events.push.bind(subscription.events);
  subscription.events.push = (...events: Event[]) => {
    for (const event of events) arrivals.push({ at: Date.now(), event });
    return original(...events);
  };
  return arrivals;
}

const transports = [
  ['SSE', subscribeSse],
  ['graphql-ws', subscribeWs],
] as const;

describe.each(transports)('a seat lock running out, watched over %s', (_name, subscribe) => {
  it('frees the seat without any request, tells subscribers within a second, and nextUnlockAt was the countdown', async () => {
    const activityId = `expiry-${randomUUID().slice(0, 8)}`;
    const team = await teams.open('exp-leader', { activityId, capacity: 2, lockSeconds: 1 });
    const subscription = subscribe(server.url, TeamStatusDocument, { teamId: team.id }, await tokenOf('exp-watcher'));
    open.push(subscription as Subscription<unknown>);
    const arrivals = timed(subscription);
    await subscription.until((events) => events.length >= 1);

    const locked = await teams.lock('exp-holder', team.id);
    if (locked.__typename !== 'SeatLocked') throw new Error(`got ${locked.__typename}`);
    const expiresAt = ms(locked.lock.expiresAt);
    expect(expiresAt - ms(locked.lock.lockedAt)).toBe(1_000);
    expect(locked.team).toMatchObject({ freeSeats: 0, nextUnlockAt: locked.lock.expiresAt });

    // The countdown a refused buyer is shown is the lock's expiry.
    const refused = await teams.lock('exp-waiter', team.id);
    expect(refused).toMatchObject({ __typename: 'TeamFull', nextUnlockAt: locked.lock.expiresAt });
    if (refused.__typename === 'TeamFull') expect(ms(refused.serverTime)).toBeLessThan(expiresAt);

    // Nobody asks anything now; the sweeper frees the seat and tells the subscriber.
    await subscription.until((events) => events.some((event) => event.data?.teamStatus.locks.length === 1), 5_000);
    const freed = await subscription.until((events) => events.some((event, i) => i > 0 && event.data?.teamStatus.locks.length === 0 && event.data.teamStatus.freeSeats === 1), 5_000);
    const arrival = arrivals.find(({ event }, i) => i > 0 && event.data?.teamStatus.locks.length === 0)!;
    const state = arrival.event.data!.teamStatus;
    console.info(`expiry announced ${arrival.at - expiresAt} ms after the lock ran out`);
    expect(arrival.at).toBeGreaterThanOrEqual(expiresAt);
    expect(arrival.at - expiresAt).toBeLessThan(1_000);
    expect(ms(state.serverTime)).toBeGreaterThanOrEqual(expiresAt);
    expect(state).toMatchObject({ status: 'OPEN', freeSeats: 1, nextUnlockAt: null });
    expect(freed.every((event) => event.errors === undefined)).toBe(true);
    const versions = freed.map((event) => event.data!.teamStatus.version);
    expect(versions).toEqual([...versions].sort((a, b) => a - b));

    // The seat is lockable again; the history says it expired at its expiry.
    expect((await teams.lock('exp-waiter', team.id)).__typename).toBe('SeatLocked');
    await expectTeamInvariants(stores, activityId, [team.id]);
    const { rows } = await stores.sql.query<{ user_id: string; kind: string; at: Date }>('SELECT user_id, kind, at FROM team_seat_event WHERE team_id = $1 ORDER BY at', [team.id]);
    expect(rows.map((row) => `${row.user_id}:${row.kind}`)).toEqual(['exp-holder:LOCKED', 'exp-holder:EXPIRED', 'exp-waiter:LOCKED']);
    expect(rows[1]!.at.getTime()).toBe(expiresAt);
    subscription.close();
  });
});

describe('the formation deadline', () => {
  it('fails a team still OPEN at its deadline, releases its locks, owes its paying members a refund and announces it', async () => {
    const activityId = `deadline-${randomUUID().slice(0, 8)}`;
    const team = await teams.open('dl-leader', { activityId, capacity: 4, formationSeconds: 3 });
    const paid = await teams.pay('dl-member', team.id);
    expect(paid.notified?.body).toEqual({ outcome: 'SEATED' });
    if (paid.locked.__typename !== 'SeatLocked') throw new Error(`got ${paid.locked.__typename}`);
    const lasting = await teams.open('dl-other', { activityId: `${activityId}-lasting` });
    expect((await teams.lock('dl-locker', team.id)).__typename).toBe('SeatLocked');
    const subscription = subscribeWs(server.url, TeamStatusDocument, { teamId: team.id }, await tokenOf('dl-watcher', { admin: true }));
    open.push(subscription as Subscription<unknown>);

    const events = await subscription.until((all) => all.at(-1)?.data?.teamStatus.status === 'FAILED', 10_000);
    const failed = events.at(-1)!.data!.teamStatus;
    expect(failed).toMatchObject({ status: 'FAILED', freeSeats: 0, locks: [], nextUnlockAt: null });
    expect(ms(failed.serverTime)).toBeGreaterThanOrEqual(ms(team.deadline));
    expect(failed.members.map((member) => member.userId)).toEqual(['dl-leader', 'dl-member']);

    await durableStatus(team.id, 'FAILED', 5_000);
    // The leader paid nothing; the member is owed the group price back, through the refund outbox.
    expect(await teamRefunds(stores, [team.id])).toEqual([{ team_id: team.id, user_id: 'dl-member', amount_cents: GROUP_PRICE_CENTS, payment_ref: paid.locked.payment.paymentRef }]);
    expect(await teams.lock('dl-late', team.id)).toMatchObject({ __typename: 'TeamClosed', status: 'FAILED' });
    expect(await teams.confirm('dl-locker', team.id, 'dl-locker-pay')).toMatchObject({ __typename: 'TeamClosed', status: 'FAILED' });
    // The other team of the activity, not yet due, is left alone.
    expect((await teams.team('dl-watcher', lasting.id))?.status).toBe('OPEN');
    await expectTeamInvariants(stores, activityId, [team.id]);
    await expectTeamInvariants(stores, `${activityId}-lasting`, [lasting.id]);
    const { rows } = await stores.sql.query<{ kind: string }>(`SELECT kind FROM team_seat_event WHERE team_id = $1 AND user_id = 'dl-locker'`, [team.id]);
    expect(rows.map((row) => row.kind).sort()).toEqual(['LOCKED', 'RELEASED']);
  });

  it('announces a team that completed even when the completing commit failed', async () => {
    const activityId = `unconfirmed-${randomUUID().slice(0, 8)}`;
    const team = await teams.open('uc-leader', { activityId, capacity: 2 });
    const subscription = subscribeWs(server.url, TeamStatusDocument, { teamId: team.id }, await tokenOf('uc-watcher', { admin: true }));
    open.push(subscription as Subscription<unknown>);
    await subscription.until((events) => events.length >= 1);

    // PostgreSQL refuses every commit of the team for a moment; Redis has completed it already.
    await stores.sql.query('ALTER TABLE team_seat_event RENAME TO team_seat_event_away');
    try {
      const { body } = await teams.raw(ConfirmTeamSeatDocument, { teamId: team.id, userId: 'uc-member', paymentRef: 'uc-pay' }, OPERATOR, { admin: true });
      expect(body.errors?.[0]?.extensions?.code).toBe('SERVICE_UNAVAILABLE');
    } finally {
      await stores.sql.query('ALTER TABLE team_seat_event_away RENAME TO team_seat_event');
    }
    const events = await subscription.until((all) => all.at(-1)?.data?.teamStatus.status === 'COMPLETE', 5_000);
    expect(events.at(-1)!.data!.teamStatus.members.map((member) => member.userId)).toEqual(['uc-leader', 'uc-member']);
    // The sweeper persists the confirmation once PostgreSQL takes it again.
    await durableStatus(team.id, 'COMPLETE', 10_000);
  });

  it('records as owed a refund a member whose confirmation landed after Redis was rebuilt without it', async () => {
    const activityId = `late-${randomUUID().slice(0, 8)}`;
    const team = await teams.open('late-leader', { activityId, capacity: 3, formationSeconds: 3 });
    const locked = await teams.lock('late-member', team.id);
    if (locked.__typename !== 'SeatLocked') throw new Error(`got ${locked.__typename}`);
    const { paymentRef, amountCents } = locked.payment;
    // The confirmation's commit waits on the team row while Redis loses everything, its journal entry included.
    const blocker = await stores.sql.connect();
    let confirmed: ReturnType<typeof sendNotify>;
    try {
      await blocker.query('BEGIN');
      await blocker.query('SELECT id FROM team WHERE id = $1 FOR UPDATE', [team.id]);
      confirmed = sendNotify(server.url, { paymentRef, amountCents, status: 'SUCCEEDED', providerTxnId: 'late-txn' });
      await waitFor('the confirmation in the journal', async () => (await stores.redis.xlen(activityKeys(activityId).journal)) > 0);
      expect(await loseKeysAtOnce(stores.redis, env.keyPrefix)).toBeGreaterThan(0);
      expect((await teams.team('late-leader', team.id))?.members.map((member) => member.userId)).toEqual(['late-leader']);
    } finally {
      await blocker.query('ROLLBACK');
      blocker.release();
    }
    expect((await confirmed).body).toEqual({ outcome: 'SEATED' });

    await durableStatus(team.id, 'FAILED', 10_000);
    // When the deadline passed while the confirmation waited, the two commit side by side and
    // the later one records the refund a moment after the team reads FAILED.
    await waitFor('the refund recorded', async () => (await teamRefunds(stores, [team.id])).length === 1, { timeoutMs: 5_000 });
    expect(await teamRefunds(stores, [team.id])).toEqual([{ team_id: team.id, user_id: 'late-member', amount_cents: amountCents, payment_ref: paymentRef }]);
  });
});
