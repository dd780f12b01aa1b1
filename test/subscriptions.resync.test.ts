import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectRedis, createRedis } from '../src/infra/redis/connection.ts';
import { LiveEvents } from '../src/infra/redis/pubsub.ts';
import { LotteryWinnersDocument, RedPacketUpdatedDocument, TeamStatusDocument } from './gql/generated.ts';
import { subscribeSse, subscribeWs } from './support/client.ts';
import { killConnections, whileDown } from './support/connectionKills.ts';
import { testEnv } from './support/env.ts';
import { lotteryAt, runningWindow } from './support/lottery.ts';
import { sendNotify } from './support/payments.ts';
import { sleep, waitFor } from './support/poll.ts';
import { startThrowawayRedis, stopChild } from './support/redisServer.ts';
import { redPacketsAt } from './support/redPackets.ts';
import { type ServerProcess, freePort, startServerProcess } from './support/server.ts';
import { type Stores, openStores } from './support/stores.ts';
import { teamsAt } from './support/teams.ts';
import { tokenOf } from './support/tokens.ts';

// A Redis of the file's own, so the one connection named campaign-backend:subscriber in its
// CLIENT LIST is this file's server's: other files' servers share the common Redis.
const env = testEnv('subs_resync');
const OPERATOR = 'subs_resync-op';
/** A stream must be repaired this soon after its subscriber connection is let back. */
const REPAIRED_WITHIN_MS = 5_000;

let redis: ChildProcess;
let admin: Redis;
let server: ServerProcess;
let stores: Stores;

beforeAll(async () => {
  const port = await freePort();
  redis = await startThrowawayRedis(port, []);
  env.vars.REDIS_URL = `redis://127.0.0.1:${port}`;
  admin = new Redis(env.vars.REDIS_URL);
  server = await startServerProcess(env.vars);
  stores = openStores(env);
});

afterAll(async () => {
  await server?.stop();
  await stores?.cleanup();
  admin?.disconnect();
  if (redis) await stopChild(redis);
});

const SERVER_SUBSCRIBER = 'campaign-backend:subscriber';

describe('a stream whose final event was published while the subscriber connection was down', () => {
  it('teamStatus (graphql-ws) gets COMPLETE and completes', async () => {
    const teams = teamsAt(server.url);
    const team = await teams.open('resync-leader', { activityId: `resync-${randomUUID().slice(0, 8)}`, capacity: 2 });
    const watcher = subscribeWs(server.url, TeamStatusDocument, { teamId: team.id }, await tokenOf('resync-leader'));
    const locked = await teams.lock('resync-buyer', team.id);
    if (locked.__typename !== 'SeatLocked') throw new Error(`lockTeamSeat answered ${locked.__typename}`);
    await watcher.until((events) => events.at(-1)?.data?.teamStatus.freeSeats === 0);

    const { paymentRef, amountCents } = locked.payment;
    const paid = await whileDown([admin], SERVER_SUBSCRIBER, () => sendNotify(server.url, { paymentRef, amountCents, status: 'SUCCEEDED', providerTxnId: `txn-${paymentRef}` }));
    expect(paid.status).toBe(200);

    await watcher.until(() => watcher.completed(), REPAIRED_WITHIN_MS);
    expect(watcher.events.at(-1)?.data?.teamStatus).toMatchObject({ status: 'COMPLETE', freeSeats: 0 });
    watcher.close();
  });

  it('redPacketUpdated (SSE) gets EMPTY and completes', async () => {
    const packets = redPacketsAt(server.url);
    const packet = await packets.create('resync-sender', { totalAmount: 200, count: 2, mode: 'RANDOM' });
    const watcher = subscribeSse(server.url, RedPacketUpdatedDocument, { packetId: packet.id }, await tokenOf('resync-watcher'));
    await packets.grab('resync-grabber-1', packet.id);
    await watcher.until((events) => events.at(-1)?.data?.redPacketUpdated.remainingCount === 1);

    const last = await whileDown([admin], SERVER_SUBSCRIBER, () => packets.grab('resync-grabber-2', packet.id));
    expect(last.__typename).toBe('GrabbedShare');

    await watcher.until(() => watcher.completed(), REPAIRED_WITHIN_MS);
    expect(watcher.events.at(-1)?.data?.redPacketUpdated).toMatchObject({ status: 'EMPTY', remainingCount: 0 });
    watcher.close();
  });

  it('lotteryWinners (graphql-ws) completes at an end an operator brought forward meanwhile', async () => {
    const lottery = lotteryAt(server.url);
    const activity = await lottery.create(OPERATOR, { title: 'cut short unheard', ...runningWindow(), prizes: [{ title: 'mug', weight: 1, totalStock: 10 }] });
    expect((await lottery.draw('resync-winner', activity.id)).__typename).toBe('LotteryWin');
    // The stream runs once it sent that win (its `recent` one).
    const watcher = subscribeWs(server.url, LotteryWinnersDocument, { activityId: activity.id, recent: 1 }, await tokenOf(OPERATOR, { admin: true }));
    await watcher.until((events) => events.length >= 1);

    const endsAt = Date.now() + 500;
    await whileDown([admin], SERVER_SUBSCRIBER, () => lottery.update(OPERATOR, activity.id, { endsAt: new Date(endsAt).toISOString() }));
    await watcher.until(() => watcher.completed(), REPAIRED_WITHIN_MS);
    expect(watcher.events.every((event) => event.errors === undefined)).toBe(true);
  });
});

/** LiveEvents on connections of the test's own (to the file's Redis), with its warnings collected. */
async function liveEvents(name: string) {
  const options = { url: env.vars.REDIS_URL!, keyPrefix: `${env.keyPrefix}${name}:`, clusterNodes: [] };
  const publisher = createRedis(options, `${name}-publisher`);
  const subscriber = createRedis(options, `${name}-subscriber`, { subscriber: true });
  await Promise.all([connectRedis(publisher, options), connectRedis(subscriber, options)]);
  const warnings: { msg: string; topic?: string }[] = [];
  const lines = new Writable({
    write(chunk: Buffer, _encoding, done) {
      warnings.push(JSON.parse(chunk.toString()) as { msg: string; topic?: string });
      done();
    },
  });
  const events = new LiveEvents(publisher, subscriber, options.keyPrefix, pino({ level: 'warn' }, lines));
  // Streams end right before close() here: an UNSUBSCRIBE it cut short would be an unhandled rejection.
  events.leaveChannelsToClose();
  return { events, warnings, subscriberName: `campaign-backend:${name}-subscriber`, close: () => events.close() };
}

/** A state in PostgreSQL: one row, final at version 2. */
async function probeTable(): Promise<{ table: string; load: () => Promise<{ version: number } | null> }> {
  const table = `probe_${randomUUID().slice(0, 8)}`;
  await stores.sql.query(`CREATE TABLE ${table} (version int NOT NULL)`);
  await stores.sql.query(`INSERT INTO ${table} VALUES (1)`);
  return { table, load: async () => (await stores.sql.query<{ version: number }>(`SELECT version FROM ${table}`)).rows[0] ?? null };
}

const stateStream = (load: () => Promise<{ version: number } | null>) => ({
  load,
  versionOf: (state: { version: number }) => state.version,
  isFinal: (state: { version: number }) => state.version >= 2,
});

async function collect(stream: AsyncIterableIterator<{ version: number }>): Promise<number[]> {
  const versions: number[] = [];
  for await (const state of stream) versions.push(state.version);
  return versions;
}

describe('LiveEvents', () => {
  it('reloads each watched topic once after its subscriber connection came back, and offers it to every stream', async () => {
    const live = await liveEvents('once');
    try {
      const { table, load } = await probeTable();
      let loads = 0;
      const counted = () => {
        loads++;
        return load();
      };
      const streams = Array.from({ length: 3 }, () => collect(live.events.currentThenChanges('probe', stateStream(counted))));
      await waitFor('each stream to load its state', () => loads === 3);
      // A drop with nothing lost: one load for the three streams, and nothing pushed.
      expect(await killConnections([admin], live.subscriberName)).toBe(1);
      await waitFor('the resync', () => loads === 4, { intervalMs: 10 });
      await sleep(300);
      expect(loads).toBe(4);

      // The final change is published while the connection is down, and heard by no one.
      await whileDown([admin], live.subscriberName, async () => {
        await stores.sql.query(`UPDATE ${table} SET version = 2`);
        live.events.publishLatest('probe', load);
      });
      const settled = await Promise.all(streams.map((stream) => Promise.race([stream, sleep(REPAIRED_WITHIN_MS).then(() => 'still open')])));
      expect(settled).toEqual([
        [1, 2],
        [1, 2],
        [1, 2],
      ]);
    } finally {
      await live.close();
    }
  });

  it('publishes a state again when its load failed, and warns with the topic once the retries are spent', async () => {
    const live = await liveEvents('retry');
    try {
      const { table, load } = await probeTable();
      const stream = collect(live.events.currentThenChanges('probe', stateStream(load)));
      await sleep(200);
      // The final change's publish meets a PostgreSQL that refuses the load for a moment.
      await stores.sql.query(`ALTER TABLE ${table} RENAME TO ${table}_away`);
      await stores.sql.query(`UPDATE ${table}_away SET version = 2`);
      live.events.publishLatest('probe', load);
      await sleep(400);
      await stores.sql.query(`ALTER TABLE ${table}_away RENAME TO ${table}`);
      expect(await Promise.race([stream, sleep(REPAIRED_WITHIN_MS).then(() => 'still open')])).toEqual([1, 2]);
      expect(live.warnings).toEqual([]);

      // A load that never succeeds: tried for about 5 s, then one warning naming the topic.
      const listener = live.events.currentThenChanges('gone', stateStream((await probeTable()).load));
      await listener.next();
      live.events.publishLatest('gone', () => stores.sql.query('SELECT version FROM no_such_probe'));
      await waitFor('the warning', () => live.warnings.length > 0, { timeoutMs: 10_000 });
      expect(live.warnings).toMatchObject([{ msg: 'could not publish a live state; its subscribers wait for its next change', topic: 'gone' }]);
      await listener.return?.();
    } finally {
      await live.close();
    }
  });
});
