import { randomUUID } from 'node:crypto';
import type { ExecutionResult } from 'graphql';
import { describe, expect, it } from 'vitest';
import { RedPacketLiveDocument, type RedPacketLiveSubscription } from './gql/generated.ts';
import { type Subscription, subscribeSse, subscribeWs } from './support/client.ts';
import { testEnv } from './support/env.ts';
import { twoInstances } from './support/lifecycle.ts';
import { sleep } from './support/poll.ts';
import { expectRedPacketInvariants } from './support/redPacketInvariants.ts';
import { redPacketsAt } from './support/redPackets.ts';
import { tokenOf } from './support/tokens.ts';

// The default sweep interval: the refund comes up to a second after expiry, EXPIRED must not wait for it.
const env = testEnv('rp_truth', { SWEEP_INTERVAL_MS: '1000' });
const instances = twoInstances(env);
const { track } = instances;

type State = RedPacketLiveSubscription['redPacketUpdated'];
type Subscribe = typeof subscribeSse;
const transports: [string, Subscribe][] = [
  ['SSE', subscribeSse],
  ['graphql-ws', subscribeWs],
];

function watch(subscribe: Subscribe, url: string, packetId: string, token: string): Subscription<RedPacketLiveSubscription> {
  const subscription = subscribe(url, RedPacketLiveDocument, { packetId }, token);
  track(subscription);
  return subscription;
}

const states = (events: ExecutionResult<RedPacketLiveSubscription>[]) => {
  for (const event of events) expect(event.errors).toBeUndefined();
  return events.map((event) => event.data!.redPacketUpdated);
};

async function createPacket(url: string, input: { totalAmount: number; count: number; expiresInSeconds?: number }) {
  return redPacketsAt(url).create(`sender-${randomUUID()}`, { ...input, mode: 'RANDOM' });
}

async function grab(url: string, packetId: string) {
  return redPacketsAt(url).grab(`grabber-${randomUUID()}`, packetId);
}

/** One snapshot: counts and amounts agree with its own shares. */
function expectConsistent(state: State) {
  const taken = state.shares.reduce((sum, share) => sum + share.amount, 0);
  expect(state.remainingCount, JSON.stringify(state)).toBe(state.count - state.shares.length);
  expect(state.remainingAmount, JSON.stringify(state)).toBe(state.totalAmount - taken);
}

/** The packet as PostgreSQL holds it: committed shares, oldest first, and the refund. */
async function durable(packetId: string) {
  const { rows } = await instances.stores.sql.query<{ amount: number; grabbed_at: Date }>(
    'SELECT amount, grabbed_at FROM red_packet_grab WHERE packet_id = $1 ORDER BY grabbed_at, share_index',
    [packetId],
  );
  const packet = await instances.stores.sql.query<{ refunded_amount: number; refunded_at: Date | null }>('SELECT refunded_amount, refunded_at FROM red_packet WHERE id = $1', [packetId]);
  return {
    shares: rows.map((row) => ({ amount: row.amount, grabbedAt: row.grabbed_at.toISOString() })),
    refundedAmount: packet.rows[0]!.refunded_at ? packet.rows[0]!.refunded_amount : 0,
  };
}

describe.each(transports)('redPacketUpdated over %s', (_name, subscribe) => {
  it('gives consistent snapshots to subscribers who join during a storm of grabs, ending on the durable state', async () => {
    const COUNT = 150;
    const TOTAL = 15_000;
    const packet = await createPacket(instances.server.url, { totalAmount: TOTAL, count: COUNT });
    const token = await tokenOf('storm-watcher');
    const grabs = Array.from({ length: COUNT }, (_, i) => grab(i % 2 ? instances.server.url : instances.other.url, packet.id));
    // Subscribers join all through the storm, on both instances, while grabs are in flight.
    const watchers: Subscription<RedPacketLiveSubscription>[] = [];
    for (let i = 0; i < 24; i++) {
      watchers.push(watch(subscribe, i % 2 ? instances.other.url : instances.server.url, packet.id, token));
      await sleep(15);
    }
    await Promise.all(grabs);
    const final = await durable(packet.id);
    expect(final.shares).toHaveLength(COUNT);

    for (const watcher of watchers) {
      await watcher.until((events) => events.at(-1)?.data?.redPacketUpdated.remainingCount === 0, 20_000);
      const seen = states(watcher.events);
      seen.forEach(expectConsistent);
      // Each event is newer than the one before: more shares, never fewer.
      for (let i = 1; i < seen.length; i++) expect(seen[i]!.shares.length).toBeGreaterThan(seen[i - 1]!.shares.length);
      const last = seen.at(-1)!;
      expect(last).toMatchObject({ status: 'EMPTY', remainingCount: 0, remainingAmount: 0, bestLuck: { amount: Math.max(...final.shares.map((share) => share.amount)) } });
      expect(last.shares.map(({ amount, grabbedAt }) => ({ amount, grabbedAt }))).toEqual(final.shares);
      // EMPTY is final: the stream completes after it.
      await watcher.until(() => watcher.completed(), 10_000);
    }
    await expectRedPacketInvariants(instances.stores, packet.id);
  }, 60_000);

  it('pushes EXPIRED at the expiry instant, then the refund, then completes; a late subscriber gets the final state and completion', async () => {
    const packets = await Promise.all([instances.server.url, instances.other.url].map((url) => createPacket(url, { totalAmount: 300, count: 3, expiresInSeconds: 2 })));
    const token = await tokenOf('expiry-watcher');
    // Watched on the instance that did not create it, as well as on the one that did.
    const watchers = packets.flatMap((packet) => [watch(subscribe, instances.server.url, packet.id, token), watch(subscribe, instances.other.url, packet.id, token)]);
    const expiredAfterMs: number[] = [];
    await Promise.all(
      watchers.map(async (watcher, i) => {
        const expiresAt = Date.parse(packets[Math.floor(i / 2)]!.expiresAt);
        await watcher.until((events) => events.at(-1)?.data?.redPacketUpdated.status === 'EXPIRED', 10_000);
        expiredAfterMs.push(Date.now() - expiresAt);
        await watcher.until((events) => (events.at(-1)?.data?.redPacketUpdated.refundedAmount ?? 0) > 0, 10_000);
      }),
    );
    console.log(`EXPIRED arrived ${expiredAfterMs.map((ms) => `${ms} ms`).join(', ')} after expiresAt`);
    // The issue's bound; full suite runs measured 2–28 ms.
    for (const ms of expiredAfterMs) expect(ms).toBeLessThan(250);

    for (const watcher of watchers) {
      const seen = states(watcher.events);
      expect(seen.map((state) => [state.status, state.refundedAmount])).toEqual([
        ['ACTIVE', 0],
        ['EXPIRED', 0],
        ['EXPIRED', 300],
      ]);
      await watcher.until(() => watcher.completed(), 10_000);
    }

    const late = watch(subscribe, instances.other.url, packets[0]!.id, token);
    await late.until(() => late.completed(), 10_000);
    expect(states(late.events).map((state) => [state.status, state.refundedAmount])).toEqual([['EXPIRED', 300]]);
  }, 30_000);

  it('pushes EXPIRED as soon as an operator closes the packet, before the refund', async () => {
    const packet = await createPacket(instances.other.url, { totalAmount: 300, count: 3 });
    const watcher = watch(subscribe, instances.server.url, packet.id, await tokenOf('close-watcher'));
    await watcher.until((events) => events.length >= 1);
    const closedAt = Date.now();
    await redPacketsAt(instances.server.url).close('op', packet.id);
    await watcher.until((events) => events.at(-1)?.data?.redPacketUpdated.status === 'EXPIRED', 10_000);
    const expiredAfterMs = Date.now() - closedAt;
    await watcher.until(() => watcher.completed(), 10_000);
    expect(states(watcher.events).map((state) => [state.status, state.refundedAmount])).toEqual([
      ['ACTIVE', 0],
      ['EXPIRED', 0],
      ['EXPIRED', 300],
    ]);
    expect(expiredAfterMs).toBeLessThan(600);
  });

  it('completes at once for a subscriber who comes after the packet is EMPTY', async () => {
    const packet = await createPacket(instances.server.url, { totalAmount: 200, count: 2 });
    await grab(instances.server.url, packet.id);
    await grab(instances.other.url, packet.id);
    const late = watch(subscribe, instances.other.url, packet.id, await tokenOf('late-watcher'));
    await late.until(() => late.completed(), 10_000);
    const seen = states(late.events);
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ status: 'EMPTY', remainingCount: 0, remainingAmount: 0 });
    expect(seen[0]!.shares).toHaveLength(2);
  });
});
