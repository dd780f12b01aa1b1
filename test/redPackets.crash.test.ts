import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { unlessCutOff } from './support/client.ts';
import { testEnv } from './support/env.ts';
import { expectMoneyInvariants } from './support/moneyInvariants.ts';
import { waitFor } from './support/poll.ts';
import { expectRedPacketInvariants } from './support/redPacketInvariants.ts';
import { redPacketsAt } from './support/redPackets.ts';
import { type ServerProcess, startServerProcess } from './support/server.ts';
import { type Stores, openStores } from './support/stores.ts';
import { signAhead } from './support/tokens.ts';
import { testWallets } from './support/wallets.ts';

// The sweeper of the restarted server persists what the killed one left in the journal.
const env = testEnv('rp_crash', { JOURNAL_SWEEP_AFTER_MS: '500', SWEEP_INTERVAL_MS: '200' });
let stores: Stores;
const servers: ServerProcess[] = [];
const wallets = testWallets(env);

beforeAll(() => {
  stores = openStores(env);
});

afterAll(async () => {
  await wallets.close();
  for (const server of servers) await server.stop().catch(() => undefined);
  await stores?.cleanup();
});

describe('a server killed with SIGKILL in the middle of a storm', () => {
  it('loses no acknowledged grab, grants no share twice, credits every grab once, and the survivors finish the packet exactly', async () => {
    const COUNT = 400;
    const TOTAL = 123_456;
    const KILL_AFTER = 100;

    const first = await startServerProcess(env.vars);
    servers.push(first);
    const onFirst = redPacketsAt(first.url);
    // Paid from the sender's wallet: every grab, acknowledged or cut off, moves money.
    await wallets.fund([['crash-sender', TOTAL]]);
    const packet = await onFirst.send('crash-sender', { totalAmount: TOTAL, count: COUNT, mode: 'RANDOM' });
    if (packet.__typename !== 'RedPacket') throw new Error(`the sender could not pay: ${packet.message}`);
    const journalKey = `{rp:${packet.id}}:journal`;
    const grabsKey = `{rp:${packet.id}}:grabs`;

    const users = Array.from({ length: 1000 }, (_, i) => `crash-user-${i}`);
    await signAhead(users);

    // Phase 1: every user grabs once, all at once. After KILL_AFTER acks the database
    // turns slow (the test holds the packet's row lock, which every grab commit waits
    // for), so grants pile up in Redis and its journal; then the server is killed.
    const acknowledged = new Map<string, number>();
    let crash: Promise<void> | undefined;
    // Connected and in a transaction before the storm: on a loaded machine, opening a
    // connection at KILL_AFTER took so long that the storm had committed nearly everything.
    const blocker = await stores.sql.connect();
    await blocker.query('BEGIN');
    const crashWhileCommitsAreStuck = async () => {
      try {
        await blocker.query('SELECT id FROM red_packet WHERE id = $1 FOR UPDATE', [packet.id]);
        await waitFor(`grants waiting in the journal (${acknowledged.size} acknowledged so far)`, async () => (await stores.redis.xlen(journalKey)) >= 20, {
          timeoutMs: 10_000,
          intervalMs: 10,
        });
        await first.kill();
      } finally {
        await blocker.query('ROLLBACK');
        blocker.release();
      }
    };
    const phase1 = await Promise.all(
      users.map(async (user) => {
        // A grab the kill cuts off shows up as `failed`.
        const outcome = await unlessCutOff(onFirst.tryGrab(user, packet.id));
        if (outcome.result?.__typename === 'GrabbedShare') {
          expect(acknowledged.has(user), `${user} acknowledged twice`).toBe(false);
          acknowledged.set(user, outcome.result.amount);
          if (acknowledged.size >= KILL_AFTER) crash ??= crashWhileCommitsAreStuck();
        }
        return { user, ...outcome };
      }),
    );
    expect(crash, 'the server was killed during the storm').toBeDefined();
    await crash;
    expect(first.child.signalCode).toBe('SIGKILL');

    const failedRequests = phase1.filter((outcome) => outcome.failed !== undefined).length;
    // The kill really happened mid-storm: a good part of the requests never got an answer.
    expect(failedRequests).toBeGreaterThan(100);
    for (const { user, result, errors } of phase1) {
      // Redis goes on granting while commits are stuck: on a loaded machine it can hand out
      // every share before the kill, and the users after that are told the packet is empty.
      if (result) expect(['GrabbedShare', 'RedPacketEmpty'], user).toContain(result.__typename);
      expect(errors, `${user}: ${JSON.stringify(errors)}`).toBeUndefined();
    }

    // What the dead process left: grants in Redis, some perhaps still only in the journal.
    const grantedInRedisAtCrash = await stores.redis.hlen(grabsKey);
    const journalAtCrash = await stores.redis.xlen(journalKey);
    expect(journalAtCrash).toBeGreaterThan(0);
    expect(grantedInRedisAtCrash).toBeGreaterThan(acknowledged.size);
    console.info(`crash: ${acknowledged.size} acknowledged, ${grantedInRedisAtCrash} granted in Redis, ${journalAtCrash} journal entries left, ${failedRequests} requests cut off`);

    // 1. Every acknowledged success is already in PostgreSQL, with the same amount, before any restart.
    const { rows: durableAtCrash } = await stores.sql.query<{ user_id: string; amount: number }>('SELECT user_id, amount FROM red_packet_grab WHERE packet_id = $1', [packet.id]);
    const durableByUser = new Map(durableAtCrash.map((row) => [row.user_id, row.amount]));
    for (const [user, amount] of acknowledged) expect(durableByUser.get(user), `acknowledged grab of ${user}`).toBe(amount);
    // 2. No share granted twice, nothing oversold; what PostgreSQL holds is credited once, and money is conserved.
    await expectRedPacketInvariants(stores, packet.id);
    await expectMoneyInvariants(stores.sql, wallets.putIn);

    // Restart with the same environment; its sweeper persists the dead process's journal.
    const second = await startServerProcess(env.vars);
    servers.push(second);
    const onSecond = redPacketsAt(second.url);
    await waitFor('the journal to be swept', async () => (await stores.redis.xlen(journalKey)) === 0, { timeoutMs: 15_000, intervalMs: 100 });

    // 3. After the sweep the database holds exactly what Redis granted.
    const afterSweep = await expectRedPacketInvariants(stores, packet.id);
    const redisGrabs = await stores.redis.hgetall(grabsKey);
    expect(afterSweep).toHaveLength(grantedInRedisAtCrash);
    expect(new Map(afterSweep.map((grab) => [grab.user_id, grab.amount]))).toEqual(new Map(Object.entries(redisGrabs).map(([user, value]) => [user, Number(value.split(':')[1])])));
    for (const [user, amount] of acknowledged) expect(afterSweep.find((grab) => grab.user_id === user)?.amount).toBe(amount);

    // Phase 2: the storm goes on against the new server; every user grabs once more.
    const phase2 = await Promise.all(users.map(async (user) => ({ user, ...(await unlessCutOff(onSecond.tryGrab(user, packet.id))) })));
    const durableAfterSweep = new Map(afterSweep.map((grab) => [grab.user_id, grab.amount]));
    const wonInPhase2 = new Map<string, number>();
    for (const { user, result, errors, failed } of phase2) {
      expect(failed, `${user}'s grab on the new server`).toBeUndefined();
      expect(errors, `${user}'s grab on the new server`).toBeUndefined();
      if (durableAfterSweep.has(user)) {
        // Acknowledged or not, a grab the dead server made is this user's share.
        expect(result?.__typename, user).toBe('AlreadyGrabbed');
        if (result?.__typename === 'AlreadyGrabbed') expect(result.share.amount).toBe(durableAfterSweep.get(user));
      } else {
        expect(['GrabbedShare', 'RedPacketEmpty']).toContain(result?.__typename);
        if (result?.__typename === 'GrabbedShare') wonInPhase2.set(user, result.amount);
      }
    }
    expect(wonInPhase2.size).toBe(COUNT - afterSweep.length);

    // Exactly COUNT grants in total, summing to the total amount, in PostgreSQL and in Redis.
    const final = await expectRedPacketInvariants(stores, packet.id);
    expect(final).toHaveLength(COUNT);
    expect(final.reduce((sum, grab) => sum + grab.amount, 0)).toBe(TOTAL);
    expect(new Map(final.map((grab) => [grab.user_id, grab.amount]))).toEqual(new Map([...durableAfterSweep, ...wonInPhase2]));
    expect(await stores.redis.xlen(journalKey)).toBe(0);

    const redPacket = await onSecond.packet('crash-sender', packet.id);
    expect(redPacket).toMatchObject({ status: 'EMPTY', remainingCount: 0, remainingAmount: 0 });
    expect(redPacket?.shares).toHaveLength(COUNT);
    // Every grab, the dead server's swept ones too, is in its grabber's wallet, once.
    const books = await expectMoneyInvariants(stores.sql, wallets.putIn);
    expect(books).toMatchObject({ wallets: TOTAL, heldByPackets: 0 });
  });
});
