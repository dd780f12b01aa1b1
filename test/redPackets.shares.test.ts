import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { RedPacketMyShareDocument, RedPacketSharesDocument, RedPacketSlimDocument, type RedPacketSlimSubscription } from './gql/generated.ts';
import { errorCodes, requestsAt, subscribeWs } from './support/client.ts';
import { TEST_REDIS_URL, testEnv } from './support/env.ts';
import { startedServer } from './support/lifecycle.ts';
import { cursorOf, everyPage, expectInvalidCursor } from './support/paging.ts';
import { waitFor } from './support/poll.ts';
import { redPacketsAt } from './support/redPackets.ts';
import { tokenOf } from './support/tokens.ts';

const env = testEnv('rp_shares');
const started = startedServer(env);
const VIEWER = 'shares-viewer';

/** A packet of `count` shares with `grabbed` of them taken, one grabber after another. */
async function packetWith(count: number, grabbed: number) {
  const packets = redPacketsAt(started.server.url);
  const packet = await packets.create('shares-sender', { totalAmount: count * 100, count });
  for (let i = 0; i < grabbed; i++) expect((await packets.grab(`grabber-${i}`, packet.id)).__typename).toBe('GrabbedShare');
  return packet;
}

describe('RedPacket.sharesConnection and latestShares', () => {
  it('page the shares oldest first, as `shares`, and give the newest first, at most 50', async () => {
    const packet = await packetWith(60, 55);
    const { data } = requestsAt(started.server.url);
    const all = (await redPacketsAt(started.server.url).packet(VIEWER, packet.id))!.shares;
    expect(all).toHaveLength(55);

    const paged = await everyPage(async (after) => (await data(RedPacketSharesDocument, { id: packet.id, first: 20, after }, VIEWER)).redPacket!.sharesConnection);
    expect(paged).toEqual(all);
    const last = (await data(RedPacketSharesDocument, { id: packet.id, last: 5 }, VIEWER)).redPacket!;
    expect(last.sharesConnection.edges.map((edge) => edge.node)).toEqual(all.slice(-5));
    const before = (await data(RedPacketSharesDocument, { id: packet.id, last: 3, before: last.sharesConnection.pageInfo.startCursor }, VIEWER)).redPacket!;
    expect(before.sharesConnection.edges.map((edge) => edge.node)).toEqual(all.slice(-8, -5));

    expect(last.latestShares).toEqual(all.slice(-10).reverse());
    const most = (await data(RedPacketSharesDocument, { id: packet.id, first: 1, count: 50 }, VIEWER)).redPacket!;
    expect(most.latestShares).toEqual(all.slice(-50).reverse());
  });

  it('give each viewer their own committed share, and none to others', async () => {
    const packets = redPacketsAt(started.server.url);
    const packet = await packets.create('shares-sender', { totalAmount: 500, count: 5 });
    const grabbed = await packets.grab('my-share-grabber', packet.id);
    if (grabbed.__typename !== 'GrabbedShare') throw new Error(grabbed.__typename);
    const { data } = requestsAt(started.server.url);
    expect((await data(RedPacketMyShareDocument, { id: packet.id }, 'my-share-grabber')).redPacket?.myShare?.amount).toBe(grabbed.amount);
    expect((await data(RedPacketMyShareDocument, { id: packet.id }, VIEWER)).redPacket?.myShare).toBeNull();
  });

  it('refuse garbage arguments and anonymous callers', async () => {
    const packet = await packetWith(3, 1);
    const { raw } = requestsAt(started.server.url);
    for (const variables of [{ count: 0 }, { count: 51 }, { count: -1 }, { first: 101 }, { last: 101 }, { first: -1 }, { after: 'garbage' }, { before: '' }]) {
      expect(errorCodes(await raw(RedPacketSharesDocument, { id: packet.id, ...variables }, VIEWER)), JSON.stringify(variables)).toEqual(['BAD_USER_INPUT']);
    }
    expect(errorCodes(await raw(RedPacketSharesDocument, { id: packet.id }))).toEqual(['UNAUTHENTICATED']);
  });

  it("take only a cursor of the packet's own shares: another packet's share, or none, is INVALID_CURSOR", async () => {
    const packets = redPacketsAt(started.server.url);
    const [mine, other] = [await packetWith(4, 0), await packetWith(4, 0)];
    // Grabbed in turn, so each share of the other packet falls between two of this one's.
    for (let i = 0; i < 3; i++) {
      for (const packet of [mine, other]) expect((await packets.grab(`turn-grabber-${i}`, packet.id)).__typename).toBe('GrabbedShare');
    }
    const { data, raw } = requestsAt(started.server.url);
    const shares = async (id: string, after: string | null) => (await data(RedPacketSharesDocument, { id, first: 1, after }, VIEWER)).redPacket!.sharesConnection;
    // The packet's own cursors page it one share at a time, none skipped or repeated.
    const paged = await everyPage((after) => shares(mine.id, after));
    expect(paged).toEqual((await redPacketsAt(started.server.url).packet(VIEWER, mine.id))!.shares);
    expect(paged).toHaveLength(3);
    const otherShare = (await shares(other.id, null)).edges[0]!.cursor;
    for (const [what, after] of [
      ["another packet's share", otherShare],
      ['no share', cursorOf('no-such-share')],
    ] as const) {
      expectInvalidCursor(await raw(RedPacketSharesDocument, { id: mine.id, first: 5, after }, VIEWER), what);
      expectInvalidCursor(await raw(RedPacketSharesDocument, { id: mine.id, last: 5, before: after }, VIEWER), what, 'before');
    }
  });
});

describe('redPacketUpdated events', () => {
  it('carry the counts and the newest shares, not every share, and still end on the final state', async () => {
    const count = 60;
    const packet = await packetWith(count, 0);
    const bus = new Redis(TEST_REDIS_URL);
    const published: string[] = [];
    bus.on('message', (_channel, message: string) => published.push(message));
    await bus.subscribe(`${env.keyPrefix}redPacket:${packet.id}`);
    const watcher = subscribeWs(started.server.url, RedPacketSlimDocument, { packetId: packet.id }, await tokenOf(VIEWER));
    try {
      await watcher.until((events) => events.length >= 1);
      const packets = redPacketsAt(started.server.url);
      for (let i = 0; i < count; i++) await packets.grab(`slim-${i}`, packet.id);
      await watcher.until(() => watcher.completed(), 10_000);
      const states = watcher.events.map((event) => {
        expect(event.errors).toBeUndefined();
        return event.data!.redPacketUpdated as RedPacketSlimSubscription['redPacketUpdated'];
      });
      for (const state of states) {
        const grabbed = state.count - state.remainingCount;
        expect(state.latestShares).toHaveLength(Math.min(3, grabbed));
        const times = state.latestShares.map((share) => share.grabbedAt);
        expect([...times].sort().reverse()).toEqual(times);
      }
      const final = states.at(-1)!;
      const all = (await packets.packet(VIEWER, packet.id))!;
      expect(final).toMatchObject({ status: 'EMPTY', remainingCount: 0, bestLuck: { amount: all.bestLuck!.amount } });
      expect(final.latestShares).toEqual(all.shares.slice(-3).reverse());

      // What went over the bus: no list of every share, only the 50 newest.
      await waitFor('the final state on the bus', () => published.some((message) => JSON.parse(message).remainingCount === 0));
      for (const message of published) {
        const state = JSON.parse(message);
        expect(state.shares).toBeUndefined();
        expect(state.latestShares.length).toBeLessThanOrEqual(50);
      }
      expect(JSON.parse(published.at(-1)!).latestShares).toHaveLength(50);
    } finally {
      watcher.close();
      bus.disconnect();
    }
  });
});
