import { describe, expect, it } from 'vitest';
import { GoodsCatalogDocument, MyPointsLedgerDocument, type MyPointsLedgerQueryVariables, MyRedPacketsDocument, type MyRedPacketsQuery } from './gql/generated.ts';
import { errorCodes, requestsAt } from './support/client.ts';
import { testEnv } from './support/env.ts';
import { startedServer } from './support/lifecycle.ts';
import { cursorOf, everyPage, expectInvalidCursor, expectRefusedAsMixed, mixedPages } from './support/paging.ts';
import { pointsAt } from './support/points.ts';
import { redPacketsAt } from './support/redPackets.ts';

const env = testEnv('me_lists');
const started = startedServer(env);
const OPERATOR = 'lists-operator';

describe('Me.pointsLedger', () => {
  it('pages every change of my balance newest first, forwards and backwards, and nobody else’s', async () => {
    const user = 'ledger-user';
    const points = pointsAt(started.server.url);
    for (let i = 1; i <= 23; i++) await points.award(OPERATOR, { userId: user, amount: i, reason: `award ${i}` });
    await points.award(OPERATOR, { userId: 'someone-else', amount: 5 });
    const { data, raw } = requestsAt(started.server.url);
    const deltas = await everyPage(async (after) => (await data(MyPointsLedgerDocument, { first: 10, after }, user)).me.pointsLedger);
    expect(deltas.map((entry) => entry.delta)).toEqual(Array.from({ length: 23 }, (_, i) => 23 - i));
    const oldest = (await data(MyPointsLedgerDocument, { last: 3 }, user)).me.pointsLedger;
    expect(oldest.edges.map((edge) => edge.node.delta)).toEqual([3, 2, 1]);
    expect(oldest.pageInfo).toMatchObject({ hasPreviousPage: true, hasNextPage: false });
    const before = (await data(MyPointsLedgerDocument, { last: 2, before: oldest.pageInfo.startCursor }, user)).me.pointsLedger;
    expect(before.edges.map((edge) => edge.node.delta)).toEqual([5, 4]);

    // A bigint past PostgreSQL's, a NUL: refused as cursors, not errors of the database.
    for (const after of ['garbage', ...['c1:not-a-number', 'c1:9999999999999999999', 'c1:\u0000'].map((text) => Buffer.from(text).toString('base64url')), '']) {
      const refused = await raw(MyPointsLedgerDocument, { first: 5, after }, user);
      expect(errorCodes(refused), after).toEqual(['BAD_USER_INPUT']);
    }
    expect(errorCodes(await raw(MyPointsLedgerDocument, { first: -1 }, user))).toEqual(['BAD_USER_INPUT']);
    expect(errorCodes(await raw(MyPointsLedgerDocument, { first: 5 }))).toEqual(['UNAUTHENTICATED']);
    // A page is at most 100 rows.
    expect(errorCodes(await raw(MyPointsLedgerDocument, { first: 101 }, user))).toEqual(['BAD_USER_INPUT']);
  });
});

describe('Me.pointsLedger cursors', () => {
  it("takes only a cursor of my own ledger: another user's entry, or none, is INVALID_CURSOR", async () => {
    const points = pointsAt(started.server.url);
    // Awarded in turn, so each of Alice's entries falls between two of Bob's.
    for (let i = 1; i <= 3; i++) {
      await points.award(OPERATOR, { userId: 'ledger-bob', amount: i });
      await points.award(OPERATOR, { userId: 'ledger-alice', amount: i });
    }
    const { data, raw } = requestsAt(started.server.url);
    // Bob's own cursors page his ledger one entry at a time, none skipped or repeated.
    const bobs = await everyPage(async (after) => (await data(MyPointsLedgerDocument, { first: 1, after }, 'ledger-bob')).me.pointsLedger);
    expect(bobs.map((entry) => entry.delta)).toEqual([3, 2, 1]);
    const alices = (await data(MyPointsLedgerDocument, { first: 3 }, 'ledger-alice')).me.pointsLedger.edges;
    for (const [what, after] of [
      ["Alice's entry", alices[1]!.cursor],
      ['no entry', cursorOf('999999999')],
    ] as const) {
      expectInvalidCursor(await raw(MyPointsLedgerDocument, { first: 5, after }, 'ledger-bob'), what);
    }
    expectInvalidCursor(await raw(MyPointsLedgerDocument, { last: 5, before: alices[1]!.cursor }, 'ledger-bob'), "Alice's entry, before", 'before');
  });
});

describe('paging directions', () => {
  it('refuses a page that mixes first/after with last/before, and still pages each way', async () => {
    const user = 'direction-user';
    const points = pointsAt(started.server.url);
    for (let i = 1; i <= 6; i++) await points.award(OPERATOR, { userId: user, amount: i, reason: `award ${i}` });
    const { data, raw } = requestsAt(started.server.url);
    const ledger = async (variables: MyPointsLedgerQueryVariables) => (await data(MyPointsLedgerDocument, variables, user)).me.pointsLedger;
    // Newest first: deltas 6 … 1.
    const cursors = (await ledger({ first: 6 })).edges.map((edge) => edge.cursor);
    const deltas = (page: Awaited<ReturnType<typeof ledger>>) => page.edges.map((edge) => edge.node.delta);

    for (const mixed of mixedPages(cursors[1]!, cursors[4]!)) expectRefusedAsMixed(await raw(MyPointsLedgerDocument, mixed.variables, user), mixed);

    const forwards = await ledger({ first: 2, after: cursors[1] });
    expect(deltas(forwards)).toEqual([4, 3]);
    expect(forwards.pageInfo).toMatchObject({ hasNextPage: true });
    const backwards = await ledger({ last: 2, before: cursors[4] });
    expect(deltas(backwards)).toEqual([4, 3]);
    expect(backwards.pageInfo).toMatchObject({ hasPreviousPage: true });
    expect(deltas(await ledger({ first: 2 }))).toEqual([6, 5]);
    expect(deltas(await ledger({ last: 2 }))).toEqual([2, 1]);
    expect(deltas(await ledger({}))).toEqual([6, 5, 4, 3, 2, 1]);
    // A null argument is one not given.
    expect(deltas(await ledger({ first: 2, after: cursors[1], last: null, before: null }))).toEqual([4, 3]);
    expect(deltas(await ledger({ first: null, after: null, last: 2, before: cursors[4] }))).toEqual([4, 3]);
  });
});

describe('Me.redPacketsSent and Me.sharesGrabbed', () => {
  it('list what I sent as it is now, and what I grabbed', async () => {
    const packets = redPacketsAt(started.server.url);
    const sent = [];
    for (const totalAmount of [300, 400, 500]) sent.push(await packets.create('sender', { totalAmount, count: 3 }));
    await packets.grab('grabber', sent[0]!.id);
    await packets.grab('grabber', sent[2]!.id);
    const { data } = requestsAt(started.server.url);
    const mine = (await data(MyRedPacketsDocument, { first: 10 }, 'sender')).me;
    expect(mine.redPacketsSent.edges.map((edge) => edge.node)).toEqual([
      { id: sent[2]!.id, totalAmount: 500, remainingCount: 2 },
      { id: sent[1]!.id, totalAmount: 400, remainingCount: 3 },
      { id: sent[0]!.id, totalAmount: 300, remainingCount: 2 },
    ]);
    expect(mine.sharesGrabbed.edges).toEqual([]);
    const grabbed = (await data(MyRedPacketsDocument, { first: 10 }, 'grabber')).me;
    expect(grabbed.sharesGrabbed.edges.map((edge) => edge.node.packetId)).toEqual([sent[2]!.id, sent[0]!.id]);
    expect(grabbed.redPacketsSent.edges).toEqual([]);
  });

  it("take only a cursor of my own list: another user's packet or share, or none, is INVALID_CURSOR", async () => {
    const packets = redPacketsAt(started.server.url);
    // Sent and grabbed in turn, so each of Alice's falls between two of Bob's.
    for (let i = 0; i < 3; i++) {
      for (const user of ['rp-bob', 'rp-alice']) await packets.create(user, { totalAmount: 300, count: 3 });
    }
    const { data, raw } = requestsAt(started.server.url);
    type Mine = MyRedPacketsQuery['me'];
    const sentIds = (await data(MyRedPacketsDocument, { first: 10 }, 'rp-bob')).me.redPacketsSent.edges.map((edge) => edge.node.id);
    for (const packetId of [...sentIds, ...(await data(MyRedPacketsDocument, { first: 10 }, 'rp-alice')).me.redPacketsSent.edges.map((edge) => edge.node.id)]) {
      for (const user of ['rp-bob', 'rp-alice']) await packets.grab(user, packetId);
    }
    const bobs: Mine = (await data(MyRedPacketsDocument, { first: 10 }, 'rp-bob')).me;
    expect(bobs.redPacketsSent.edges).toHaveLength(3);
    expect(bobs.sharesGrabbed.edges).toHaveLength(6);
    // Bob's own cursors page each list one row at a time, none skipped or repeated.
    const sent = await everyPage(async (after) => (await data(MyRedPacketsDocument, { first: 1, sentAfter: after }, 'rp-bob')).me.redPacketsSent);
    expect(sent).toEqual(bobs.redPacketsSent.edges.map((edge) => edge.node));
    const grabbed = await everyPage(async (after) => (await data(MyRedPacketsDocument, { first: 1, grabbedAfter: after }, 'rp-bob')).me.sharesGrabbed);
    expect(grabbed).toEqual(bobs.sharesGrabbed.edges.map((edge) => edge.node));

    const alices: Mine = (await data(MyRedPacketsDocument, { first: 10 }, 'rp-alice')).me;
    const refused: [string, { sentAfter?: string; grabbedAfter?: string }][] = [
      ["Alice's packet", { sentAfter: alices.redPacketsSent.edges[1]!.cursor }],
      ['no packet', { sentAfter: cursorOf('no-such-packet') }],
      ["Alice's share", { grabbedAfter: alices.sharesGrabbed.edges[1]!.cursor }],
      ['no share', { grabbedAfter: cursorOf('no-such-share') }],
    ];
    for (const [what, cursors] of refused) expectInvalidCursor(await raw(MyRedPacketsDocument, { first: 5, ...cursors }, 'rp-bob'), what);
  });
});

describe('goodsCatalog', () => {
  it('pages the goods newest first, for signed-in callers', async () => {
    const points = pointsAt(started.server.url);
    const titles = ['tea', 'cup', 'pen', 'bag', 'hat'];
    for (const title of titles) await points.createGoods(OPERATOR, { title, pointsCost: 10, stock: 5 });
    const { data, raw } = requestsAt(started.server.url);
    const goods = await everyPage(async (after) => (await data(GoodsCatalogDocument, { first: 2, after }, 'shopper')).goodsCatalog);
    expect(goods.map((item) => item.title)).toEqual([...titles].reverse());
    expect(errorCodes(await raw(GoodsCatalogDocument, { first: 2 }))).toEqual(['UNAUTHENTICATED']);
    expectInvalidCursor(await raw(GoodsCatalogDocument, { first: 2, after: cursorOf('no-such-goods') }, 'shopper'), 'no goods');
  });
});
