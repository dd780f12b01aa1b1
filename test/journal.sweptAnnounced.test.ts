import { randomUUID } from 'node:crypto';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type App, createApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { LotteryStore } from '../src/domain/lottery/store.ts';
import { RedPacketStore, redPacketKeys } from '../src/domain/redPackets/store.ts';
import { TeamStore, teamKeys } from '../src/domain/teams/store.ts';
import type { JournalEntry } from '../src/infra/journal/journal.ts';
import { LotteryWinnersDocument, RedPacketUpdatedDocument, TeamStatusDocument } from './gql/generated.ts';
import { type Subscription, subscribeWs } from './support/client.ts';
import { testEnv } from './support/env.ts';
import { lotteryAt, runningWindow } from './support/lottery.ts';
import { pointsAt } from './support/points.ts';
import { sleep } from './support/poll.ts';
import { type ServerProcess, startServerProcess } from './support/server.ts';
import { type Stores, openStores } from './support/stores.ts';
import { OPERATOR, teamsAt } from './support/teams.ts';
import { tokenOf } from './support/tokens.ts';

// A caller killed between its script and its commit leaves its entry to a sweeper, on
// any instance. Here the "dead caller" is this process running the scripts alone; the
// tests sweep when they choose (no background sweep), and subscribe on the server.
const env = testEnv('journal_swept', { JOURNAL_SWEEP_AFTER_MS: '100', SWEEP_INTERVAL_MS: '600000', LOG_LEVEL: 'silent' });
let stores: Stores;
let server: ServerProcess;
let app: App;
const subscriptions: Subscription<unknown>[] = [];

beforeAll(async () => {
  // One after the other: the server migrates the schema the app then finds ready.
  server = await startServerProcess({ ...env.vars, LOG_LEVEL: 'info' });
  app = await createApp(loadConfig(env.vars), pino({ level: 'silent' }));
  stores = openStores(env);
});

afterAll(async () => {
  for (const subscription of subscriptions) subscription.close();
  await app?.close().catch(() => undefined);
  await server?.stop();
  await stores?.cleanup();
});

async function subscribed<T>(subscription: Subscription<T>): Promise<Subscription<T>> {
  subscriptions.push(subscription as Subscription<unknown>);
  await subscription.until((events) => events.length > 0);
  return subscription;
}

/** Sweeps once the entries are older than JOURNAL_SWEEP_AFTER_MS; the entries are committed by then. */
async function sweepLeftBehind(stream: string, entries: number): Promise<void> {
  expect(await app.redis.xlen(stream)).toBe(entries);
  await sleep(200);
  expect(await app.journal.sweep()).toBeGreaterThanOrEqual(entries);
  expect(await app.redis.xlen(stream)).toBe(0);
}

describe('a change the journal sweeper commits for a dead caller', () => {
  it('reaches red packet subscribers: the last event is the emptied packet, and the stream completes', async () => {
    const packet = await app.redPackets.create('swept-sender', { totalAmount: 300, count: 3, mode: 'EQUAL', minAmount: 1, expiresInSeconds: 3600, fundedBy: 'SHOP' });
    const watcher = await subscribed(subscribeWs(server.url, RedPacketUpdatedDocument, { packetId: packet.id }, await tokenOf('swept-watcher')));
    expect(watcher.events.at(-1)?.data?.redPacketUpdated).toMatchObject({ status: 'ACTIVE', remainingCount: 3 });

    const store = new RedPacketStore(app.redis, app.scripts);
    for (const user of ['swept-a', 'swept-b', 'swept-c']) expect((await store.grab(packet.id, user, randomUUID())).kind).toBe('granted');
    await sweepLeftBehind(redPacketKeys(packet.id).journal, 3);

    await watcher.until((events) => events.at(-1)?.data?.redPacketUpdated.remainingCount === 0);
    expect(watcher.events.at(-1)?.data?.redPacketUpdated).toMatchObject({ status: 'EMPTY', remainingCount: 0 });
    await expect.poll(() => watcher.completed()).toBe(true);
  });

  it('reaches team subscribers: the seat confirmed by the dead caller completes the team', async () => {
    const teams = teamsAt(server.url);
    const activityId = `swept-${randomUUID()}`;
    const team = await teams.open('swept-leader', { activityId, capacity: 2 });
    const locked = await teams.lock('swept-buyer', team.id);
    if (locked.__typename !== 'SeatLocked') throw new Error(`lockTeamSeat answered ${locked.__typename}`);
    const watcher = await subscribed(subscribeWs(server.url, TeamStatusDocument, { teamId: team.id }, await tokenOf('swept-leader')));
    await watcher.until((events) => events.at(-1)?.data?.teamStatus.locks.length === 1);

    const reply = await new TeamStore(app.redis, app.scripts).confirm(activityId, team.id, 'swept-buyer', locked.payment.paymentRef, randomUUID(), {});
    expect(reply.kind).toBe('joined');
    await sweepLeftBehind(teamKeys(activityId, team.id).journal, 1);

    await watcher.until((events) => events.at(-1)?.data?.teamStatus.status === 'COMPLETE');
    expect(watcher.events.at(-1)?.data?.teamStatus.members).toHaveLength(2);
    await expect.poll(() => watcher.completed()).toBe(true);
    const { rows } = await stores.sql.query('SELECT user_id FROM team_member WHERE team_id = $1', [team.id]);
    expect(rows).toHaveLength(2);
  });

  it("reaches the winners ticker, and a POINTS prize reaches the winner's balance at once", async () => {
    const activity = await lotteryAt(server.url).create(OPERATOR, {
      title: 'swept',
      ...runningWindow(),
      noPrizeWeight: 0,
      prizes: [{ title: 'five points', kind: 'POINTS', points: 5, weight: 1, totalStock: 100 }],
    });
    // A win first, for the ticker to start with: its first event tells it is listening.
    await lotteryAt(server.url).draw('swept-first', activity.id);
    const ticker = await subscribed(subscribeWs(server.url, LotteryWinnersDocument, { activityId: activity.id, recent: 1 }, await tokenOf('swept-viewer')));
    const points = pointsAt(server.url);
    // Cached in Redis before the draw, as a user who looked at the balance has it.
    expect((await points.me('swept-winner')).pointsBalance).toBe(0);

    const reply = await new LotteryStore(app.redis, app.scripts).draw({
      activityId: activity.id,
      userId: 'swept-winner',
      drawId: randomUUID(),
      requestId: null,
      randomInput: 0,
      clockOffsetMs: 0,
      paidPoints: 0,
    });
    if (reply.kind !== 'drawn') throw new Error(`the draw script answered ${reply.kind}`);
    await sweepLeftBehind(reply.entry.stream, 1);

    await ticker.until((events) => events.some((event) => event.data?.lotteryWinners.drawId === reply.drawId));
    await expect.poll(async () => (await points.me('swept-winner')).pointsBalance, { timeout: 2_000 }).toBe(5);
  });
});

describe('a retry answered with the draw a dead caller committed', () => {
  it("brings its POINTS prize to the winner's balance at once", async () => {
    const lottery = lotteryAt(server.url);
    const activity = await lottery.create(OPERATOR, {
      title: 'retried',
      ...runningWindow(),
      noPrizeWeight: 0,
      prizes: [{ title: 'seven points', kind: 'POINTS', points: 7, weight: 1, totalStock: 100 }],
    });
    const points = pointsAt(server.url);
    expect((await points.me('retry-winner')).pointsBalance).toBe(0);
    const requestId = randomUUID();
    const reply = await new LotteryStore(app.redis, app.scripts).draw({
      activityId: activity.id,
      userId: 'retry-winner',
      drawId: randomUUID(),
      requestId,
      randomInput: 0,
      clockOffsetMs: 0,
      paidPoints: 0,
    });
    if (reply.kind !== 'drawn') throw new Error(`the draw script answered ${reply.kind}`);
    // The caller's own commit: it died right after, before settling the prize.
    expect(await app.journal.commit(reply.entry as JournalEntry)).toBe('persisted');

    const retried = await lottery.draw('retry-winner', activity.id, requestId);
    expect(retried).toMatchObject({ __typename: 'LotteryWin', drawId: reply.drawId });
    expect((await points.me('retry-winner')).pointsBalance).toBe(7);
  });
});
