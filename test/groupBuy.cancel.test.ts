import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { activityKeys } from '../src/domain/teams/store.ts';
import { CancelGroupBuyActivityDocument, OpenTeamDocument, TeamStatusDocument, UpdateGroupBuyActivityDocument } from './gql/generated.ts';
import { errorCodes, gql, subscribeWs } from './support/client.ts';
import { testEnv } from './support/env.ts';
import { startedServer } from './support/lifecycle.ts';
import { paymentViolations } from './support/paymentInvariants.ts';
import { sendNotify } from './support/payments.ts';
import { sleep, waitFor } from './support/poll.ts';
import { snapshotStores } from './support/stores.ts';
import { expectTeamInvariants, teamRefunds } from './support/teamInvariants.ts';
import { GROUP_PRICE_CENTS, teamsAt } from './support/teams.ts';
import { tokenOf } from './support/tokens.ts';
import { expectWalletInvariants } from './support/wallets.ts';

const env = testEnv('gb_cancel');
const started = startedServer(env);
const url = () => started.server.url;
const operator = () => tokenOf('gbc-ops', { admin: true });
const newId = () => `gbc-${randomUUID().slice(0, 8)}`;

const cancel = async (activityId: string, token?: string) => gql(url(), CancelGroupBuyActivityDocument, { activityId }, token === undefined ? await operator() : token || undefined);

/** The activity as cancelGroupBuyActivity answered it; fails on anything else. */
async function cancelled(activityId: string) {
  const response = await cancel(activityId);
  const activity = response.body.data?.cancelGroupBuyActivity;
  if (activity?.__typename !== 'GroupBuyActivity') throw new Error(`cancelGroupBuyActivity answered ${JSON.stringify(response.body)}`);
  return activity;
}

const teamRows = async (teamIds: string[]) =>
  (await started.stores.sql.query<{ id: string; status: string; deadline: Date }>('SELECT id, status, deadline FROM team WHERE id = ANY($1) ORDER BY id', [teamIds])).rows;

/** Until the activity's journal is committed and trimmed, so the stores hold still. */
const journalDrained = (activityId: string) => waitFor('the journal drained', async () => (await started.stores.redis.xlen(activityKeys(activityId).journal)) === 0);

/** Until no refund is left to pay, so the stores hold still. */
const refundsPaid = () => waitFor('every refund paid', async () => (await started.stores.sql.query(`SELECT 1 FROM refund WHERE status <> 'PAID'`)).rows.length === 0, { timeoutMs: 10_000 });

describe('cancelGroupBuyActivity', () => {
  it('is for operators, refuses bad ids and an activity not started, and changes nothing when refused', async () => {
    const teams = teamsAt(url());
    const id = newId();
    const team = await teams.open('gbc-r-leader', { activityId: id });
    expect((await teams.pay('gbc-r-member', team.id)).notified?.body).toEqual({ outcome: 'SEATED' });
    expect((await teams.lock('gbc-r-locker', team.id)).__typename).toBe('SeatLocked');
    const upcoming = newId();
    await teams.activity(upcoming, { startsAt: new Date(Date.now() + 3_600_000).toISOString(), endsAt: new Date(Date.now() + 7_200_000).toISOString() });
    await journalDrained(id);
    const before = await snapshotStores(started.stores, env);

    for (const [token, code] of [
      ['', 'UNAUTHENTICATED'],
      ['not-a-jwt', 'UNAUTHENTICATED'],
      [await tokenOf('gbc-user'), 'FORBIDDEN'],
      [await tokenOf('gbc-r-leader'), 'FORBIDDEN'],
    ] as const) {
      const response = await cancel(id, token);
      expect(errorCodes(response), token).toEqual([code]);
      expect(response.body.data?.cancelGroupBuyActivity ?? null).toBeNull();
    }
    for (const badId of ['', 'a'.repeat(65), 'a b', '{tm:x}']) expect(errorCodes(await cancel(badId)), badId).toEqual(['BAD_USER_INPUT']);
    expect((await cancel('no-such-activity')).body.data?.cancelGroupBuyActivity).toMatchObject({ __typename: 'NotFound', code: 'NOT_FOUND' });
    // One not started has no team to stop, and no end before its start: a pause keeps it from opening.
    const notStarted = await cancel(upcoming);
    expect(errorCodes(notStarted)).toEqual(['BAD_USER_INPUT']);
    expect(notStarted.body.errors?.[0]?.extensions?.issues).toEqual([expect.objectContaining({ path: ['activityId'], code: 'GROUP_BUY_NOT_STARTED' })]);

    expect(await snapshotStores(started.stores, env)).toEqual(before);
    expect(await teams.team('gbc-ops', team.id, { admin: true })).toMatchObject({ status: 'OPEN', locks: [{ userId: 'gbc-r-locker' }] });
  });

  it('ends the activity and fails its open teams at once: one refund per paying member, locks end, a late payment owed back, FAILED announced; COMPLETE stays', async () => {
    const teams = teamsAt(url());
    const id = newId();
    const terms = { activityId: id, capacity: 3 };
    // Open with a paying member and a buyer holding a live lock; open with its leader alone; complete.
    const open = await teams.open('gbc-leader', terms);
    const paid = await teams.pay('gbc-member', open.id);
    expect(paid.notified?.body).toEqual({ outcome: 'SEATED' });
    if (paid.locked.__typename !== 'SeatLocked') throw new Error(`got ${paid.locked.__typename}`);
    const memberPaymentRef = paid.locked.payment.paymentRef;
    const held = await teams.lock('gbc-locker', open.id);
    if (held.__typename !== 'SeatLocked') throw new Error(`got ${held.__typename}`);
    const bare = await teams.open('gbc-bare-leader', terms);
    const complete = await teams.open('gbc-full-leader', terms);
    for (const buyer of ['gbc-full-1', 'gbc-full-2']) expect((await teams.pay(buyer, complete.id)).notified?.body).toEqual({ outcome: 'SEATED' });
    const teamIds = [open.id, bare.id, complete.id];
    const [completeBefore] = await teamRows([complete.id]);
    expect(completeBefore!.status).toBe('COMPLETE');
    // An operator watches, who sees user ids rather than their aliases.
    const subscription = subscribeWs(url(), TeamStatusDocument, { teamId: open.id }, await tokenOf('gbc-watcher', { admin: true }));
    const askedAt = Date.now();
    let activity: Awaited<ReturnType<typeof cancelled>>;
    try {
      await subscription.until((events) => events.length >= 1);
      activity = await cancelled(id);
      expect(activity).toMatchObject({ id, status: 'ENDED' });
      const endedAt = Date.parse(activity.endsAt);
      expect(endedAt).toBeGreaterThanOrEqual(askedAt - 1_000);
      expect(endedAt).toBeLessThanOrEqual(Date.now() + 1_000);

      // Committed when it answered, with no sweeper waited for: the open teams failed at the
      // end, their deadline moved to it; the complete one is as it was.
      expect(await teamRows(teamIds)).toEqual(
        [{ id: open.id, status: 'FAILED', deadline: new Date(endedAt) }, { id: bare.id, status: 'FAILED', deadline: new Date(endedAt) }, completeBefore].sort((a, b) =>
          a!.id.localeCompare(b!.id),
        ),
      );
      expect(await teamRefunds(started.stores, teamIds)).toEqual([{ team_id: open.id, user_id: 'gbc-member', amount_cents: GROUP_PRICE_CENTS, payment_ref: paid.locked.payment.paymentRef }]);
      expect(await teams.team('gbc-ops', open.id, { admin: true })).toMatchObject({ status: 'FAILED', locks: [], freeSeats: 0, nextUnlockAt: null, deadline: activity.endsAt });
      expect(await teams.team('gbc-ops', complete.id)).toMatchObject({ status: 'COMPLETE', deadline: completeBefore!.deadline.toISOString() });
      const events = await subscription.until((all) => all.at(-1)?.data?.teamStatus.status === 'FAILED', 5_000);
      expect(events.at(-1)!.data!.teamStatus.members.map((member) => member.userId)).toEqual(['gbc-leader', 'gbc-member']);
      await waitFor('the stream completed', () => subscription.completed(), { timeoutMs: 5_000 });
    } finally {
      subscription.close();
    }

    // Nothing new is taken: no lock, no team.
    expect(await teams.lock('gbc-late', open.id)).toMatchObject({ __typename: 'TeamClosed', status: 'FAILED' });
    expect(await teams.lock('gbc-late', bare.id)).toMatchObject({ __typename: 'TeamClosed', status: 'FAILED' });
    expect(await teams.lock('gbc-late', complete.id)).toMatchObject({ __typename: 'TeamClosed', status: 'COMPLETE' });
    const reopened = await gql(url(), OpenTeamDocument, { input: { activityId: id } }, await tokenOf('gbc-late'));
    expect(reopened.body.data?.openTeam).toMatchObject({ __typename: 'GroupBuyNotActive', message: 'this group-buy has ended' });

    // The locker pays after the cancel: it seats no one and is owed back once, retried or not.
    const { paymentRef, amountCents } = held.payment;
    const notice = { paymentRef, amountCents, status: 'SUCCEEDED', providerTxnId: 'gbc-late-txn' } as const;
    expect(await sendNotify(url(), notice)).toEqual({ status: 200, body: { outcome: 'REFUND_OWED' } });
    expect(await sendNotify(url(), notice)).toEqual({ status: 200, body: { outcome: 'REFUND_OWED' } });
    const refundsOf = async () =>
      (
        await started.stores.sql.query<{ source_key: string; user_id: string; amount_cents: number; reason: string; status: string; paid_to: string | null }>(
          'SELECT source_key, user_id, amount_cents, reason, status, paid_to FROM refund WHERE payment_ref = ANY($1) ORDER BY source_key',
          [[memberPaymentRef, paymentRef]],
        )
      ).rows;
    expect((await refundsOf()).map(({ status: _status, paid_to: _paidTo, ...refund }) => refund)).toEqual([
      { source_key: `payment:${paymentRef}`, user_id: 'gbc-locker', amount_cents: GROUP_PRICE_CENTS, reason: 'LATE_PAYMENT' },
      { source_key: `team:${open.id}:gbc-member`, user_id: 'gbc-member', amount_cents: GROUP_PRICE_CENTS, reason: 'TEAM_FAILED' },
    ]);

    // Paid into the wallets once each, as a team failing at its deadline is.
    await refundsPaid();
    expect((await refundsOf()).map((refund) => `${refund.user_id}:${refund.status}:${refund.paid_to}`)).toEqual(['gbc-locker:PAID:WALLET', 'gbc-member:PAID:WALLET']);
    const { rows: ledger } = await started.stores.sql.query<{ user_id: string; delta_cents: number; reason: string }>(
      `SELECT user_id, delta_cents, reason FROM wallet_ledger WHERE user_id = ANY($1) ORDER BY user_id`,
      [['gbc-member', 'gbc-locker', 'gbc-leader', 'gbc-full-1', 'gbc-full-2']],
    );
    expect(ledger).toEqual([
      { user_id: 'gbc-locker', delta_cents: GROUP_PRICE_CENTS, reason: 'REFUND' },
      { user_id: 'gbc-member', delta_cents: GROUP_PRICE_CENTS, reason: 'REFUND' },
    ]);
    await expectWalletInvariants(started.stores);
    expect(await paymentViolations(started.stores, teamIds)).toEqual([]);
    await expectTeamInvariants(started.stores, id, teamIds);
    const { rows: history } = await started.stores.sql.query<{ kind: string }>(`SELECT kind FROM team_seat_event WHERE team_id = $1 AND user_id = 'gbc-locker' ORDER BY at`, [open.id]);
    expect(history.map((row) => row.kind)).toEqual(['LOCKED', 'RELEASED']);

    // Called again: the same answer, and nothing changes.
    await journalDrained(id);
    const before = await snapshotStores(started.stores, env);
    expect(await cancelled(id)).toEqual(activity);
    expect(await snapshotStores(started.stores, env)).toEqual(before);
  });

  it('stops the open teams of an activity ended already, which keeps its end', async () => {
    const teams = teamsAt(url());
    const id = newId();
    const team = await teams.open('gbc-e-leader', { activityId: id });
    const paid = await teams.pay('gbc-e-member', team.id);
    if (paid.locked.__typename !== 'SeatLocked') throw new Error(`got ${paid.locked.__typename}`);
    const ended = await gql(url(), UpdateGroupBuyActivityDocument, { activityId: id, input: { endsAt: new Date(Date.now() - 60_000).toISOString() } }, await operator());
    const endsAt = ended.body.data?.updateGroupBuyActivity?.__typename === 'GroupBuyActivity' ? ended.body.data.updateGroupBuyActivity.endsAt : null;
    // Ended, its team may still fill until its own deadline, a day away.
    expect((await teams.lock('gbc-e-buyer', team.id)).__typename).toBe('SeatLocked');
    await sleep(50);

    expect(await cancelled(id)).toMatchObject({ status: 'ENDED', endsAt });
    const [row] = await teamRows([team.id]);
    expect(row!.status).toBe('FAILED');
    expect(row!.deadline.getTime()).toBeGreaterThan(Date.parse(endsAt!));
    expect(await teamRefunds(started.stores, [team.id])).toEqual([
      { team_id: team.id, user_id: 'gbc-e-member', amount_cents: GROUP_PRICE_CENTS, payment_ref: paid.locked.payment.paymentRef },
    ]);
    expect(await teams.team('gbc-e-leader', team.id)).toMatchObject({ status: 'FAILED', locks: [] });
    await expectTeamInvariants(started.stores, id, [team.id]);
  });

  it('decides each payment racing it once: seated before it and refunded with its team, or owed back as late', async () => {
    const teams = teamsAt(url());
    const id = newId();
    const teamIds = await Promise.all(Array.from({ length: 20 }, async (_, i) => (await teams.open(`gbc-s-leader-${i}`, { activityId: id, capacity: 3 })).id));
    const payments = await Promise.all(
      teamIds.flatMap((teamId, i) =>
        [0, 1].map(async (seat) => {
          const locked = await teams.lock(`gbc-s-buyer-${i}-${seat}`, teamId);
          if (locked.__typename !== 'SeatLocked') throw new Error(`got ${locked.__typename}`);
          return locked.payment;
        }),
      ),
    );
    const pay = async ({ paymentRef, amountCents }: (typeof payments)[number]) =>
      (await sendNotify(url(), { paymentRef, amountCents, status: 'SUCCEEDED', providerTxnId: `txn-${paymentRef}` })).body.outcome;
    // A few paid before the cancel, 30 sent 20 ms apart while it runs, the last few after it answered.
    const before = await Promise.all(payments.slice(0, 5).map(pay));
    const racing = Promise.all(payments.slice(5, 35).map((payment, i) => sleep(20 * i).then(() => pay(payment))));
    await sleep(50);
    const cancelledAt = performance.now();
    await cancelled(id);
    console.info(`the cancel answered in ${Math.round(performance.now() - cancelledAt)} ms`);
    const after = await Promise.all(payments.slice(35).map(pay));
    const raced = await racing;
    console.info(`payments racing the cancel: ${raced.filter((outcome) => outcome === 'SEATED').length} seated, ${raced.filter((outcome) => outcome === 'REFUND_OWED').length} owed back`);
    expect(before.every((outcome) => outcome === 'SEATED')).toBe(true);
    expect(after.every((outcome) => outcome === 'REFUND_OWED')).toBe(true);
    const outcomes = [...before, ...raced, ...after];
    expect(outcomes.every((outcome) => outcome === 'SEATED' || outcome === 'REFUND_OWED')).toBe(true);

    expect((await teamRows(teamIds)).filter((row) => row.status === 'OPEN')).toEqual([]);
    // Every payment that succeeded is a seat kept in a COMPLETE team, or owed back exactly once.
    await journalDrained(id);
    expect(await paymentViolations(started.stores, teamIds)).toEqual([]);
    await expectTeamInvariants(started.stores, id, teamIds);
  });
});
