import { randomUUID } from 'node:crypto';
import type { ExecutionResult } from 'graphql';
import { describe, expect, it } from 'vitest';
import { signToken } from '../src/infra/auth/tokens.ts';
import { RedPacketUpdatedDocument, type RedPacketUpdatedSubscription } from './gql/generated.ts';
import { subscribeSse, subscribeWs } from './support/client.ts';
import { testEnv } from './support/env.ts';
import { twoInstances } from './support/lifecycle.ts';
import { expectRedPacketInvariants } from './support/redPacketInvariants.ts';
import { redPacketsAt } from './support/redPackets.ts';
import { tokenOf } from './support/tokens.ts';

// A fast settlement worker, so a closed packet is refunded (and announced) within a fraction of a second.
const env = testEnv('rp_subs', { SWEEP_INTERVAL_MS: '200' });
// Two instances of the same deployment: same schema, same key prefix.
const instances = twoInstances(env);
const { track } = instances;

type Event = ExecutionResult<RedPacketUpdatedSubscription>;
type Subscribe = typeof subscribeSse;

const transports: [string, Subscribe][] = [
  ['SSE', subscribeSse],
  ['graphql-ws', subscribeWs],
];

const states = (events: Event[]) => events.filter((event) => event.data).map((event) => event.data!.redPacketUpdated);
const lastState = (events: Event[]) => states(events).at(-1);
const firstErrorCode = (events: Event[]) => events[0]?.errors?.[0]?.extensions?.code;

async function createPacket(url: string, input: { totalAmount: number; count: number }) {
  return redPacketsAt(url).create(`sender-${randomUUID()}`, { ...input, mode: 'RANDOM' });
}

async function grab(url: string, packetId: string, userId: string) {
  const grabRedPacket = await redPacketsAt(url).grab(userId, packetId);
  if (grabRedPacket.__typename !== 'GrabbedShare') throw new Error(`grab by ${userId} got ${grabRedPacket.__typename}`);
  return grabRedPacket;
}

describe.each(transports)('redPacketUpdated over %s', (_name, subscribe) => {
  it('yields the current state, then the state after each grab, then the settlement', async () => {
    const TOTAL = 1_000;
    const packet = await createPacket(instances.server.url, { totalAmount: TOTAL, count: 5 });
    const watcher = await tokenOf(`watcher-${randomUUID()}`);
    const subscription = track(subscribe(instances.server.url, RedPacketUpdatedDocument, { packetId: packet.id }, watcher));

    // First event: the current state, before anything happened.
    const [first] = await subscription.until((events) => events.length >= 1);
    expect(first!.errors).toBeUndefined();
    expect(first!.data!.redPacketUpdated).toMatchObject({
      id: packet.id,
      status: 'ACTIVE',
      count: 5,
      remainingCount: 5,
      remainingAmount: TOTAL,
      refundedAmount: 0,
      expiresAt: packet.expiresAt,
    });

    // One event per grab, remainingCount going down in order, amounts adding up.
    let granted = 0;
    for (let i = 1; i <= 3; i++) {
      const share = await grab(instances.server.url, packet.id, `grabber-${i}-${randomUUID()}`);
      granted += share.amount;
      expect(share.remainingCount).toBe(5 - i);
      await subscription.until((events) => lastState(events)?.remainingCount === 5 - i);
      const state = lastState(subscription.events)!;
      expect(state.status).toBe('ACTIVE');
      expect(state.remainingAmount).toBe(TOTAL - granted);
    }
    expect(subscription.events.every((event) => event.errors === undefined)).toBe(true);
    expect(states(subscription.events).map((state) => state.remainingCount)).toEqual([5, 4, 3, 2]);

    // An operator ends the packet; the settlement worker refunds what is left and announces it.
    const closeRedPacket = await redPacketsAt(instances.server.url).close('op', packet.id);
    expect(closeRedPacket.__typename).toBe('RedPacket');
    const events = await subscription.until((all) => lastState(all)?.status === 'EXPIRED' && lastState(all)!.refundedAmount > 0, 10_000);
    const final = lastState(events)!;
    expect(final).toMatchObject({ status: 'EXPIRED', remainingCount: 2, remainingAmount: TOTAL - granted, refundedAmount: TOTAL - granted });
    expect(Date.parse(final.expiresAt)).toBeLessThanOrEqual(Date.now());

    // Every state the subscriber saw is newer than the one before.
    const counts = states(events).map((state) => state.remainingCount);
    expect(counts).toEqual([...counts].sort((a, b) => b - a));
    subscription.close();

    const grabs = await expectRedPacketInvariants(instances.stores, packet.id);
    expect(grabs).toHaveLength(3);
    const { rows } = await instances.stores.sql.query<{ refunded_amount: number }>('SELECT refunded_amount FROM red_packet WHERE id = $1 AND refunded_at IS NOT NULL', [packet.id]);
    expect(rows[0]?.refunded_amount).toBe(TOTAL - granted);
  });

  it('announces a packet that runs out of time on its own, with the refund', async () => {
    const lasting = await createPacket(instances.server.url, { totalAmount: 300, count: 3 });
    const short = await redPacketsAt(instances.server.url).create('hasty-sender', { totalAmount: 300, count: 3, expiresInSeconds: 2 });
    const share = await grab(instances.server.url, short.id, `quick-${randomUUID()}`);
    const subscription = track(subscribe(instances.server.url, RedPacketUpdatedDocument, { packetId: short.id }, await tokenOf('watcher')));
    const [first] = await subscription.until((events) => events.length >= 1);
    expect(first!.data?.redPacketUpdated.remainingCount).toBe(2);

    const events = await subscription.until((all) => lastState(all)?.status === 'EXPIRED' && lastState(all)!.refundedAmount > 0, 10_000);
    expect(lastState(events)).toMatchObject({ status: 'EXPIRED', remainingCount: 2, refundedAmount: 300 - share.amount });
    subscription.close();
    await expectRedPacketInvariants(instances.stores, short.id);
    // The worker leaves a packet that has not expired alone.
    expect((await instances.stores.sql.query('SELECT 1 FROM red_packet WHERE id = $1 AND refunded_at IS NULL', [lasting.id])).rowCount).toBe(1);
  });

  it('refuses a subscriber without a token with UNAUTHENTICATED', async () => {
    const packet = await createPacket(instances.server.url, { totalAmount: 100, count: 2 });
    const subscription = track(subscribe(instances.server.url, RedPacketUpdatedDocument, { packetId: packet.id }));
    const events = await subscription.until((all) => all.length >= 1);
    expect(events[0]!.data?.redPacketUpdated ?? null).toBeNull();
    expect(firstErrorCode(events)).toBe('UNAUTHENTICATED');
    subscription.close();
  });

  it('refuses a subscriber with a token signed by another secret with UNAUTHENTICATED', async () => {
    const packet = await createPacket(instances.server.url, { totalAmount: 100, count: 2 });
    const forged = await signToken('another-secret-that-is-at-least-32-characters', { userId: 'mallory', roles: [] });
    const subscription = track(subscribe(instances.server.url, RedPacketUpdatedDocument, { packetId: packet.id }, forged));
    const events = await subscription.until((all) => all.length >= 1);
    expect(firstErrorCode(events)).toBe('UNAUTHENTICATED');
    subscription.close();
  });

  it('gives an error for an unknown packet id', async () => {
    const token = await tokenOf('curious');
    const subscription = track(subscribe(instances.server.url, RedPacketUpdatedDocument, { packetId: randomUUID() }, token));
    const events = await subscription.until((all) => all.length >= 1);
    expect(events[0]!.data?.redPacketUpdated ?? null).toBeNull();
    expect(events[0]!.errors?.length).toBeGreaterThan(0);
    expect(firstErrorCode(events)).toBe('NOT_FOUND');
    subscription.close();
  });
});

describe('across instances', () => {
  it.each(transports)('a %s subscriber on one instance sees grabs made through another', async (_name, subscribe) => {
    const packet = await createPacket(instances.other.url, { totalAmount: 600, count: 3 });
    const subscription = track(subscribe(instances.server.url, RedPacketUpdatedDocument, { packetId: packet.id }, await tokenOf('watcher')));
    await subscription.until((events) => lastState(events)?.remainingCount === 3);

    for (let i = 1; i <= 2; i++) {
      await grab(instances.other.url, packet.id, `far-grabber-${i}-${randomUUID()}`);
      await subscription.until((events) => lastState(events)?.remainingCount === 3 - i);
    }
    // The last share empties the packet; the subscriber sees that too.
    await grab(instances.other.url, packet.id, `far-grabber-3-${randomUUID()}`);
    const events = await subscription.until((all) => lastState(all)?.status === 'EMPTY');
    expect(lastState(events)).toMatchObject({ remainingCount: 0, remainingAmount: 0 });
    expect(states(events).map((state) => state.remainingCount)).toEqual([3, 2, 1, 0]);
    subscription.close();
    await expectRedPacketInvariants(instances.stores, packet.id);
  });
});
