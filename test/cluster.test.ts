import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { Scripts, defineScript } from '../src/infra/redis/scripts.ts';
import { GrabRedPacketDocument, MyTeamsDocument, RedPacketUpdatedDocument, TeamStatusDocument } from './gql/generated.ts';
import { requestsAt, subscribeWs } from './support/client.ts';
import { whileDown } from './support/connectionKills.ts';
import { testEnv } from './support/env.ts';
import { clusterOfTheFile, twoInstances } from './support/lifecycle.ts';
import { lotteryAt, runningWindow } from './support/lottery.ts';
import { expectLotteryInvariants } from './support/lotteryInvariants.ts';
import { expectRedPacketInvariants } from './support/redPacketInvariants.ts';
import { redPacketsAt } from './support/redPackets.ts';
import { expectTeamInvariants } from './support/teamInvariants.ts';
import { teamsAt } from './support/teams.ts';
import { signAhead, tokenOf } from './support/tokens.ts';

// Both instances run on a six-node Redis Cluster (REDIS_CLUSTER_NODES), set once it is up.
const env = testEnv('cluster', { SWEEP_INTERVAL_MS: '200' });
clusterOfTheFile(env);
const instances = twoInstances(env);

describe('on a Redis Cluster', () => {
  it('runs scripts on keys of many nodes in one tick (auto-pipelining routes each by its first key)', async () => {
    const scripts = new Scripts(instances.stores.redis);
    const claim = defineScript('claimKeyPrefix', ['owner'], { claimed: () => ({}), claimedAnew: () => ({}) });
    const replies = await Promise.all(Array.from({ length: 30 }, (_, i) => scripts.call(claim, { owner: `{probe-${i}}:owner` }, ['postgresql:probe', '0'])));
    expect(replies.map((reply) => reply.kind)).toEqual(Array(30).fill('claimedAnew'));
  });

  it('hands out exactly 200 shares to 400 users firing 600 grabs over two instances', async () => {
    const TOTAL = 50_000;
    const packet = await redPacketsAt(instances.server.url).create('cl-sender', { totalAmount: TOTAL, count: 200, mode: 'RANDOM' });
    const users = Array.from({ length: 400 }, (_, i) => `cl-user-${i}`);
    await signAhead(users);
    const attempts = [...users, ...users.slice(0, 200)].sort(() => Math.random() - 0.5);
    const clients = [redPacketsAt(instances.server.url), redPacketsAt(instances.other.url)];
    const results = await Promise.all(attempts.map(async (user, i) => ({ user, response: await clients[i % 2]!.raw(GrabRedPacketDocument, { packetId: packet.id }, user) })));

    const wonBy = new Map<string, number>();
    for (const { user, response } of results) {
      expect(response.body.errors, JSON.stringify(response.body.errors)).toBeUndefined();
      const result = response.body.data!.grabRedPacket;
      expect(['GrabbedShare', 'AlreadyGrabbed', 'RedPacketEmpty']).toContain(result.__typename);
      if (result.__typename === 'GrabbedShare') {
        expect(wonBy.has(user), `${user} won twice`).toBe(false);
        wonBy.set(user, result.amount);
      }
    }
    expect(wonBy.size).toBe(200);
    expect([...wonBy.values()].reduce((a, b) => a + b, 0)).toBe(TOTAL);
    const grabs = await expectRedPacketInvariants(instances.stores, packet.id);
    expect(new Map(grabs.map((grab) => [grab.user_id, grab.amount]))).toEqual(wonBy);
  });

  it('draws a lottery (stock, daily limits, a points prize) from 100 users over two instances', async () => {
    const activity = await lotteryAt(instances.server.url).create('cl-lottery-op', {
      title: 'cluster',
      ...runningWindow(),
      noPrizeWeight: 30,
      dailyDrawLimit: 2,
      prizes: [
        { title: 'gold', weight: 10, totalStock: 20, dailyStock: 15 },
        { title: 'bronze', kind: 'POINTS', points: 5, weight: 40, totalStock: 1_000 },
      ],
    });
    const users = Array.from({ length: 100 }, (_, i) => `cl-drawer-${i}`);
    await signAhead(users);
    const clients = [lotteryAt(instances.server.url), lotteryAt(instances.other.url)];
    const results = await Promise.all([...users, ...users, ...users].map((user, i) => clients[i % 2]!.draw(user, activity.id)));
    const drawn = results.filter((result) => result.__typename === 'LotteryWin' || result.__typename === 'LotteryLose');
    expect(drawn).toHaveLength(200);
    expect(results.filter((result) => result.__typename === 'DrawLimitReached')).toHaveLength(100);
    expect(await expectLotteryInvariants(instances.stores, activity.id)).toHaveLength(200);
  });

  it('tells a subscriber on one instance of grabs made through the other (sharded pub/sub)', async () => {
    const packet = await redPacketsAt(instances.server.url).create(`cl-sender-${randomUUID()}`, { totalAmount: 1_000, count: 3, mode: 'RANDOM' });
    const subscription = instances.track(subscribeWs(instances.other.url, RedPacketUpdatedDocument, { packetId: packet.id }, await tokenOf('cl-watcher')));
    await subscription.until((events) => events.length >= 1);
    const grabbed = await redPacketsAt(instances.server.url).grab('cl-grabber', packet.id);
    expect(grabbed.__typename).toBe('GrabbedShare');
    const events = await subscription.until((all) => all.some((event) => event.data?.redPacketUpdated.remainingCount === 2), 5_000);
    expect(events.every((event) => event.errors === undefined)).toBe(true);
    subscription.close();
  });

  it('expires a team seat lock with no request, through the sweepers, and announces it on the other instance', async () => {
    const activityId = `cl-expiry-${randomUUID().slice(0, 8)}`;
    const teams = teamsAt(instances.server.url);
    const team = await teams.open('cl-leader', { activityId, capacity: 2, lockSeconds: 1 });
    const subscription = instances.track(subscribeWs(instances.other.url, TeamStatusDocument, { teamId: team.id }, await tokenOf('cl-team-watcher')));
    await subscription.until((events) => events.length >= 1);
    const locked = await teams.lock('cl-holder', team.id);
    expect(locked.__typename).toBe('SeatLocked');
    await subscription.until((events) => events.some((event) => event.data?.teamStatus.locks.length === 1), 5_000);
    await subscription.until((events) => events.some((event, i) => i > 0 && event.data?.teamStatus.locks.length === 0 && event.data.teamStatus.freeSeats === 1), 5_000);
    subscription.close();
    await expectTeamInvariants(instances.stores, activityId, [team.id]);
    const { rows } = await instances.stores.sql.query<{ user_id: string; kind: string }>('SELECT user_id, kind FROM team_seat_event WHERE team_id = $1 ORDER BY at', [team.id]);
    expect(rows.map((row) => `${row.user_id}:${row.kind}`)).toEqual(['cl-holder:LOCKED', 'cl-holder:EXPIRED']);
  });

  it('repairs a stream whose final event was published while its sharded subscriber connections were down', async () => {
    const packets = redPacketsAt(instances.server.url);
    const packet = await packets.create(`cl-sender-${randomUUID()}`, { totalAmount: 200, count: 2, mode: 'RANDOM' });
    const subscription = instances.track(subscribeWs(instances.other.url, RedPacketUpdatedDocument, { packetId: packet.id }, await tokenOf('cl-resync-watcher')));
    expect((await packets.grab('cl-resync-1', packet.id)).__typename).toBe('GrabbedShare');
    await subscription.until((events) => events.at(-1)?.data?.redPacketUpdated.remainingCount === 1);
    // One connection per primary, on both instances: the cluster is this file's own.
    const nodes = env.vars.REDIS_CLUSTER_NODES!.split(',').map((node) => new Redis(Number(node.split(':')[1]), '127.0.0.1'));
    try {
      const last = await whileDown(nodes, 'ioredis-cluster(ssubscriber):campaign-backend:subscriber', () => packets.grab('cl-resync-2', packet.id));
      expect(last.__typename).toBe('GrabbedShare');
    } finally {
      for (const node of nodes) node.disconnect();
    }
    await subscription.until(() => subscription.completed(), 5_000);
    expect(subscription.events.at(-1)?.data?.redPacketUpdated).toMatchObject({ status: 'EMPTY', remainingCount: 0 });
  });

  it("lists a user's teams with seat locks in several activities (on several nodes)", async () => {
    const teams = teamsAt(instances.server.url);
    const opened = await Promise.all(Array.from({ length: 6 }, (_, i) => teams.open(`cl-mine-leader-${i}`, { activityId: `cl-mine-${i}-${randomUUID().slice(0, 8)}`, capacity: 3 })));
    for (const team of opened) expect((await teams.lock('cl-mine-holder', team.id)).__typename).toBe('SeatLocked');
    const { data } = requestsAt(instances.other.url);
    const mine = (await data(MyTeamsDocument, { first: 10 }, 'cl-mine-holder')).me.teams;
    expect(mine.edges.map((edge) => edge.node.id).sort()).toEqual(opened.map((team) => team.id).sort());
  });

  it('ran every background task (sweepers, prefix claim) without an error', () => {
    // A command routed to the wrong node fails a sweep only in the log: nothing else would tell.
    const errors = [instances.server, instances.other].flatMap((server) => server.output().split('\n')).filter((line) => line.includes('"level":50'));
    expect(errors).toEqual([]);
  });
});
