import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { isStoreOutage } from '../src/errorMasking.ts';
import { DrawLotteryDocument, type DrawLotteryMutation } from './gql/generated.ts';
import { testEnv } from './support/env.ts';
import { clusterOfTheFile, startedServer } from './support/lifecycle.ts';
import { lotteryAt, runningWindow } from './support/lottery.ts';
import { expectLotteryInvariants } from './support/lotteryInvariants.ts';
import {
  type Outcome,
  answerEach,
  attemptOnce,
  expectGrantsKept,
  expectSuccessOrUnavailable,
  grabOnce,
  grabUntilAnswered,
  stormWithOutage,
  stormWithOutageOf,
} from './support/outageStorms.ts';
import { waitFor } from './support/poll.ts';
import { type ClusterNode, cutReplication, ownersOf, pidOf, replicaCaughtUp, servesSlot, slotOf, takeOver } from './support/redisCluster.ts';
import { redPacketsAt } from './support/redPackets.ts';
import { signAhead } from './support/tokens.ts';

// One server on a six-node Redis Cluster (REDIS_CLUSTER_NODES, set once it is up); the
// sweeper runs often, so entries a failover strands are committed within a second.
const env = testEnv('cluster_failover', { SWEEP_INTERVAL_MS: '200', JOURNAL_SWEEP_AFTER_MS: '500' });
/** Ports of the nodes killed so far: they answer no CLUSTER NODES. */
const dead: number[] = [];
const ownCluster = clusterOfTheFile(env);
const started = startedServer(env);

const names = (prefix: string, count: number) => Array.from({ length: count }, (_, i) => `${prefix}-${i}`);
/** The nodes still alive, to ask about the cluster. */
const livePorts = () =>
  ownCluster.cluster.nodes
    .split(',')
    .map((address) => Number(address.split(':')[1]))
    .filter((port) => !dead.includes(port));
const livePort = () => livePorts()[0]!;

/** Creates campaigns until one lands on a primary that still has a replica (each failover leaves one without). */
async function onReplicatedPrimary<T>(create: () => Promise<T>, hashTag: (created: T) => string) {
  for (;;) {
    const created = await create();
    const slot = await slotOf(livePort(), hashTag(created));
    const owners = await ownersOf(livePort(), slot);
    if (owners.replicas.length > 0) return { created, slot, ...owners };
  }
}

const packetWithReplica = (sender: string, count: number) =>
  onReplicatedPrimary(
    () => redPacketsAt(started.server.url).create(sender, { totalAmount: 1_000_000, count, mode: 'RANDOM' }),
    (packet) => `{rp:${packet.id}}`,
  );

/** Waits until every live node names the node at `port` the primary of `slot`; seconds since `since`. */
async function promoted(port: number, slot: number, since: number): Promise<number> {
  await waitFor(`:${port} to serve slot ${slot}`, () => servesSlot(ownCluster.cluster, port, slot, dead), { timeoutMs: 20_000, intervalMs: 50 });
  return (Date.now() - since) / 1000;
}

/** SIGKILLs `primary` and waits for `replica` to serve `slot` in its place. */
async function killAndPromote(primary: ClusterNode, replica: ClusterNode, slot: number): Promise<{ killedAt: number; promotedAfter: number }> {
  process.kill(await pidOf(primary.port), 'SIGKILL');
  const killedAt = Date.now();
  dead.push(primary.port);
  return { killedAt, promotedAfter: await promoted(replica.port, slot, killedAt) };
}

const conflictsLogged = () =>
  started.server
    .output()
    .split('\n')
    .filter((line) => line.includes('a change conflicted with PostgreSQL')).length;

describe('a Redis Cluster primary failing over', () => {
  it('answers a MOVED reply SERVICE_UNAVAILABLE: ioredis hands it on when it cannot redirect an auto-pipeline mid-failover', async () => {
    const key = `{moved-probe-${randomUUID()}}`;
    const { primary } = await ownersOf(livePort(), await slotOf(livePort(), key));
    const elsewhere = new Redis(livePorts().find((port) => port !== primary.port)!, { lazyConnect: true });
    try {
      const error = await elsewhere.get(key).then(
        () => undefined,
        (moved: unknown) => moved,
      );
      expect(String(error)).toMatch(/MOVED/);
      expect(isStoreOutage(error)).toBe(true);
    } finally {
      elsewhere.disconnect();
    }
  });

  it('SIGKILLed mid-storm: answers are shares, refusals or SERVICE_UNAVAILABLE, acknowledged grabs stay, the server recovers by itself', async () => {
    const users = names('fo-user', 800);
    await signAhead(users);
    // More shares than users: every user can end with a share, so every retry has a definite answer.
    const { created: packet, slot, primary, replicas } = await packetWithReplica('fo-sender', users.length * 2);
    let killedAt = 0;
    let promotedAfter = 0;
    const outcomes = await stormWithOutage(started.server.url, packet.id, users, 100, async () => {
      ({ killedAt, promotedAfter } = await killAndPromote(primary, replicas[0]!, slot));
    });

    const unavailable = expectSuccessOrUnavailable(outcomes);
    // The storm went on through the failover: grabs were asked while the slot had no primary.
    const promotedAt = killedAt + promotedAfter * 1000;
    const duringFailover = outcomes.filter((outcome) => outcome.at - outcome.ms < promotedAt && outcome.at > killedAt);
    expect(duringFailover.length).toBeGreaterThan(0);
    const answers = await grabUntilAnswered(started.server.url, packet.id, users);
    const lastUnavailable = Math.max(killedAt, ...unavailable.map((outcome) => outcome.at));
    console.info(
      `failover mid-storm: replica promoted ${promotedAfter.toFixed(1)} s after the kill; ${duringFailover.length} grabs in flight meanwhile; ` +
        `${unavailable.length} of ${outcomes.length} grabs answered SERVICE_UNAVAILABLE, the last ${((lastUnavailable - killedAt) / 1000).toFixed(1)} s after the kill; ` +
        `slowest answer ${(Math.max(...outcomes.map((outcome) => outcome.ms)) / 1000).toFixed(1)} s; ` +
        `${conflictsLogged()} conflicts mended`,
    );
    await waitFor('the journal to drain', async () => (await started.stores.redis.xlen(`{rp:${packet.id}}:journal`)) === 0, { timeoutMs: 15_000 });
    await expectGrantsKept(started.stores, packet.id, outcomes, answers);
    const { rows } = await started.stores.sql.query<{ grabs: number; users: number; shares: number }>(
      'SELECT count(*)::int AS grabs, count(DISTINCT user_id)::int AS users, count(DISTINCT share_index)::int AS shares FROM red_packet_grab WHERE packet_id = $1',
      [packet.id],
    );
    expect(rows[0]).toEqual({ grabs: users.length, users: users.length, shares: users.length });
  }, 90_000);

  it('promoted with acknowledged grabs missing: the conflicts drop the stale keys, the rebuild gives each user their own share back', async () => {
    const before = names('lost-before', 30);
    const stalled = names('lost-stalled', 40);
    const after = names('lost-after', 60);
    await signAhead([...before, ...stalled, ...after]);
    const { created: packet, slot, primary, replicas } = await packetWithReplica('lost-sender', 200);
    const replica = replicas[0]!;
    const redPackets = redPacketsAt(started.server.url);
    for (const outcome of await Promise.all(before.map((user) => grabOnce(redPackets, packet.id, user)))) expect(outcome.result?.__typename).toBe('GrabbedShare');
    await waitFor('the replica to catch up', () => replicaCaughtUp(primary.port, replica.port));

    // The replica stalls; grabs go on, acknowledged once PostgreSQL holds them, and never reach it.
    const replicaPid = await pidOf(replica.port);
    process.kill(replicaPid, 'SIGSTOP');
    let stalledOutcomes: Outcome[];
    try {
      await cutReplication(primary.port);
      stalledOutcomes = await Promise.all(stalled.map((user) => grabOnce(redPackets, packet.id, user)));
      process.kill(await pidOf(primary.port), 'SIGKILL');
      dead.push(primary.port);
    } finally {
      process.kill(replicaPid, 'SIGCONT');
    }
    for (const outcome of stalledOutcomes) expect(outcome.result?.__typename, outcome.user).toBe('GrabbedShare');
    const killedAt = Date.now();
    await takeOver(replica.port);
    const promotedAfter = await promoted(replica.port, slot, killedAt);

    // Redis now lacks grabs PostgreSQL acknowledged.
    const inRedis = await waitFor('the promoted replica to answer', () => started.stores.redis.hkeys(`{rp:${packet.id}}:grabs`), { timeoutMs: 15_000 });
    const lost = stalled.filter((user) => !inRedis.includes(user));
    expect(lost.length, 'grabs the promoted replica never got').toBeGreaterThan(0);

    // Those users grab again, with new users at the same time.
    const conflictsBefore = conflictsLogged();
    const answers = await grabUntilAnswered(started.server.url, packet.id, [...stalled, ...after]);
    console.info(
      `failover with lost writes: promoted ${promotedAfter.toFixed(1)} s after the kill; ${lost.length} of ${stalled.length} acknowledged grabs missing from Redis; ` +
        `${conflictsLogged() - conflictsBefore} conflicts mended`,
    );
    expect(conflictsLogged() - conflictsBefore, 'conflicts that dropped the stale keys').toBeGreaterThan(0);
    for (const user of after) expect(answers.get(user)?.__typename, user).toBe('GrabbedShare');
    await waitFor('the journal to drain', async () => (await started.stores.redis.xlen(`{rp:${packet.id}}:journal`)) === 0, { timeoutMs: 15_000 });
    // Each stalled user is answered AlreadyGrabbed with the share PostgreSQL holds; no share is handed out twice.
    await expectGrantsKept(started.stores, packet.id, stalledOutcomes, answers);
    const { rows } = await started.stores.sql.query<{ grabs: number }>('SELECT count(*)::int AS grabs FROM red_packet_grab WHERE packet_id = $1', [packet.id]);
    expect(rows[0]!.grabs).toBe(before.length + stalled.length + after.length);
    expect((await started.stores.redis.hkeys(`{rp:${packet.id}}:grabs`)).sort()).toEqual([...before, ...stalled, ...after].sort());
  }, 60_000);

  it('SIGKILLed while a lottery is drawn from: answers are draws, refusals or SERVICE_UNAVAILABLE, acknowledged draws stay, limits and stock hold', async () => {
    const users = names('fo-drawer', 300);
    await signAhead(users);
    const lottery = lotteryAt(started.server.url);
    const {
      created: activity,
      slot,
      primary,
      replicas,
    } = await onReplicatedPrimary(
      () =>
        lottery.create('fo-lottery-op', {
          title: 'failover',
          ...runningWindow(),
          noPrizeWeight: 50,
          dailyDrawLimit: 3,
          prizes: [
            { title: 'gold', weight: 10, totalStock: 40 },
            { title: 'bronze', weight: 40, totalStock: 1_000 },
          ],
        }),
      (created) => `{lot:${created.id}}`,
    );
    const draw = (user: string) => attemptOnce(user, 'drawLottery', () => lottery.raw(DrawLotteryDocument, { activityId: activity.id }, user));
    const drawn = (result: DrawLotteryMutation['drawLottery']) => (result.__typename === 'LotteryWin' || result.__typename === 'LotteryLose' ? result.drawId : undefined);
    let promotedAfter = 0;
    // Users draw again at random after their first draw, past the daily limit of three.
    const outcomes = await stormWithOutageOf(
      users,
      draw,
      (result) => drawn(result) !== undefined,
      100,
      async () => {
        ({ promotedAfter } = await killAndPromote(primary, replicas[0]!, slot));
      },
    );
    const unavailable = expectSuccessOrUnavailable(outcomes);
    // The same server draws again: each user once more, until answered.
    const answers = await answerEach(users, draw);
    console.info(`lottery failover: promoted ${promotedAfter.toFixed(1)} s after the kill; ${unavailable.length} of ${outcomes.length} draws answered SERVICE_UNAVAILABLE`);
    for (const result of [...outcomes.flatMap((outcome) => (outcome.result ? [outcome.result] : [])), ...answers.values()]) {
      expect(['LotteryWin', 'LotteryLose', 'DrawLimitReached']).toContain(result.__typename);
    }
    await waitFor('the journal to drain', async () => (await started.stores.redis.xlen(`{lot:${activity.id}}:journal`)) === 0, { timeoutMs: 15_000 });
    const durable = new Set((await expectLotteryInvariants(started.stores, activity.id)).map((row) => row.id));
    const acknowledged = [...outcomes.flatMap((outcome) => (outcome.result ? [outcome.result] : [])), ...answers.values()].flatMap((result) => drawn(result) ?? []);
    expect(acknowledged.length).toBeGreaterThan(100);
    for (const drawId of acknowledged) expect(durable.has(drawId), `acknowledged draw ${drawId}`).toBe(true);
  }, 60_000);
});
