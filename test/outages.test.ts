import type { ChildProcess } from 'node:child_process';
import { type Server, type Socket, createConnection, createServer } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { GrabRedPacketDocument, type GrabRedPacketMutation } from './gql/generated.ts';
import { TEST_DATABASE_URL, type TestEnv, testEnv } from './support/env.ts';
import { sleep, waitFor } from './support/poll.ts';
import { startThrowawayRedis, stopChild } from './support/redisServer.ts';
import { expectRedPacketInvariants } from './support/redPacketInvariants.ts';
import { type RedPacketsClient, redPacketsAt } from './support/redPackets.ts';
import { freePort, startServerProcess } from './support/server.ts';
import { type Stores, openStores } from './support/stores.ts';
import { signAhead } from './support/tokens.ts';

const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
});

type Grab = GrabRedPacketMutation['grabRedPacket'];
interface Outcome {
  user: string;
  result?: Grab;
  codes?: unknown[];
  retryAfterMs?: unknown[];
  status?: number;
  retryAfterHeader?: string | null;
  failed?: unknown;
  ms: number;
}

async function grab(redPackets: RedPacketsClient, packetId: string, user: string): Promise<Outcome> {
  const started = Date.now();
  try {
    const { status, body } = await redPackets.raw(GrabRedPacketDocument, { packetId }, user);
    const ms = Date.now() - started;
    if (body.errors?.length || !body.data) {
      return {
        user,
        status,
        ms,
        codes: (body.errors ?? []).map((error) => error.extensions?.code),
        retryAfterMs: (body.errors ?? []).map((error) => error.extensions?.retryAfterMs),
      };
    }
    return { user, status, ms, result: body.data.grabRedPacket };
  } catch (error) {
    return { user, failed: error, ms: Date.now() - started };
  }
}

/**
 * A storm of grabs, `CONCURRENCY` requests in flight at all times: each user once, then
 * users again at random (answered AlreadyGrabbed) until the outage is over, so it lands
 * on requests at every stage. After `outageAfter` acknowledged grants `outage()` runs.
 */
async function stormWithOutage(url: string, packetId: string, users: string[], outageAfter: number, outage: () => Promise<void>) {
  const CONCURRENCY = 150;
  const redPackets = redPacketsAt(url);
  const outcomes: Outcome[] = [];
  let next = 0;
  let acknowledged = 0;
  let started: Promise<void> | undefined;
  let over = false;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < users.length || !over) {
        const user = next < users.length ? users[next++]! : users[Math.floor(Math.random() * users.length)]!;
        const outcome = await grab(redPackets, packetId, user);
        outcomes.push(outcome);
        if (outcome.result?.__typename === 'GrabbedShare' && ++acknowledged >= outageAfter) {
          started ??= outage().finally(() => setTimeout(() => (over = true), 1000));
        }
      }
    }),
  );
  await started;
  return outcomes;
}

/** Every answer is a typed result or SERVICE_UNAVAILABLE with a retry hint; never a dropped connection or an unexpected error. */
function expectSuccessOrUnavailable(outcomes: Outcome[]): Outcome[] {
  const tally = new Map<string, number>();
  for (const { result, codes, failed } of outcomes) {
    const kind = result ? 'result' : failed ? 'no answer' : String(codes);
    tally.set(kind, (tally.get(kind) ?? 0) + 1);
  }
  console.info(`answers: ${JSON.stringify(Object.fromEntries(tally))}`);
  const unavailable: Outcome[] = [];
  for (const outcome of outcomes) {
    expect(outcome.failed, `${outcome.user}: ${String(outcome.failed)}`).toBeUndefined();
    expect(outcome.status, outcome.user).toBe(200);
    if (outcome.result) continue;
    expect(outcome.codes, outcome.user).toEqual(['SERVICE_UNAVAILABLE']);
    expect(outcome.retryAfterMs![0], outcome.user).toBeGreaterThan(0);
    unavailable.push(outcome);
  }
  return unavailable;
}

/** Each user grabs until answered; the service must recover without a restart. Returns the final answers. */
async function grabUntilAnswered(url: string, packetId: string, users: string[]): Promise<Map<string, Grab>> {
  const redPackets = redPacketsAt(url);
  const answers = new Map<string, Grab>();
  await waitFor(
    'every user answered after the outage',
    async () => {
      const pending = users.filter((user) => !answers.has(user));
      const outcomes = await Promise.all(pending.map((user) => grab(redPackets, packetId, user)));
      expectSuccessOrUnavailable(outcomes);
      for (const outcome of outcomes) if (outcome.result) answers.set(outcome.user, outcome.result);
      return answers.size === users.length;
    },
    { timeoutMs: 60_000, intervalMs: 500 },
  );
  return answers;
}

/** Acknowledged grants are durable, a retry gives each user their share back, and the books balance in both stores. */
async function expectGrantsKept(stores: Stores, packetId: string, outcomes: Outcome[], answers: Map<string, Grab>) {
  const { rows } = await stores.sql.query<{ user_id: string; amount: number }>('SELECT user_id, amount FROM red_packet_grab WHERE packet_id = $1', [packetId]);
  const durable = new Map(rows.map((row) => [row.user_id, row.amount]));
  for (const { user, result } of outcomes) {
    if (result?.__typename !== 'GrabbedShare') continue;
    expect(durable.get(user), `acknowledged grant of ${user}`).toBe(result.amount);
    const again = answers.get(user);
    if (again) expect(again.__typename === 'AlreadyGrabbed' && again.share.amount, user).toBe(result.amount);
  }
  for (const [user, answer] of answers) expect(['GrabbedShare', 'AlreadyGrabbed'], user).toContain(answer.__typename);
  await expectRedPacketInvariants(stores, packetId);
}

async function setUp(env: TestEnv, users: number) {
  const stores = openStores(env);
  // The test's own Redis goes away on purpose; its client reconnects.
  stores.redis.on('error', () => undefined);
  cleanups.push(() => stores.cleanup());
  const server = await startServerProcess(env.vars);
  cleanups.push(() => server.stop());
  // More shares than users: every user can end with a share, so every retry has a definite answer.
  const packet = await redPacketsAt(server.url).create('outage-sender', { totalAmount: 1_000_000, count: users * 2, mode: 'RANDOM' });
  const names = Array.from({ length: users }, (_, i) => `outage-user-${i}`);
  await signAhead(names);
  return { stores, server, packetId: packet.id, names };
}

describe('Redis killed in the middle of a storm and restarted empty', () => {
  it('answers every grab with a result or SERVICE_UNAVAILABLE, recovers without a restart, and keeps every acknowledged grant', async () => {
    const redisPort = await freePort();
    let redis: ChildProcess = await startThrowawayRedis(redisPort, []);
    cleanups.push(() => stopChild(redis));
    const env = testEnv('outage_redis', { REDIS_URL: `redis://127.0.0.1:${redisPort}`, JOURNAL_SWEEP_AFTER_MS: '500', SWEEP_INTERVAL_MS: '200' });
    const { stores, server, packetId, names } = await setUp(env, 2000);

    const outcomes = await stormWithOutage(server.url, packetId, names, 40, async () => {
      redis.kill('SIGKILL');
      await new Promise((resolve) => redis.once('exit', resolve));
      // Down long enough for ioredis to give up on queued commands (maxRetriesPerRequest).
      await sleep(3000);
      redis = await startThrowawayRedis(redisPort, []);
    });
    const unavailable = expectSuccessOrUnavailable(outcomes);
    expect(unavailable.length, 'the outage hit requests').toBeGreaterThan(0);

    const answers = await grabUntilAnswered(server.url, packetId, names);
    await waitFor('the journal to drain', async () => (await stores.redis.xlen(`{rp:${packetId}}:journal`)) === 0, { timeoutMs: 15_000 });
    await expectGrantsKept(stores, packetId, outcomes, answers);
  }, 180_000);
});

/** A TCP proxy to the shared PostgreSQL that the test can cut (refusing and dropping connections) and restore. */
async function startCuttableProxy(target: URL) {
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = createConnection(Number(target.port || 5432), target.hostname);
    for (const [from, to] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      sockets.add(from);
      from.pipe(to);
      from.on('error', () => to.destroy());
      from.on('close', () => {
        sockets.delete(from);
        to.destroy();
      });
    }
  });
  const listen = (port: number) => new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  await listen(0);
  const { port } = server.address() as { port: number };
  return {
    port,
    async cut() {
      const closed = new Promise((resolve) => server.close(resolve));
      for (const socket of sockets) socket.destroy();
      await closed;
    },
    restore: () => listen(port),
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

describe('PostgreSQL unreachable in the middle of a storm', () => {
  it('answers fast with SERVICE_UNAVAILABLE, and every acknowledged grant is durable', async () => {
    const target = new URL(TEST_DATABASE_URL);
    const proxy = await startCuttableProxy(target);
    cleanups.push(() => proxy.close());
    const env = testEnv('outage_pg', { JOURNAL_SWEEP_AFTER_MS: '500', SWEEP_INTERVAL_MS: '200' });
    const viaProxy = new URL(env.vars.DATABASE_URL!);
    viaProxy.host = `127.0.0.1:${proxy.port}`;
    env.vars.DATABASE_URL = viaProxy.toString();
    const { stores, server, packetId, names } = await setUp(env, 2000);

    const CUT_MS = 8000;
    const outcomes = await stormWithOutage(server.url, packetId, names, 40, async () => {
      await proxy.cut();
      await sleep(CUT_MS);
      await proxy.restore();
    });
    const unavailable = expectSuccessOrUnavailable(outcomes);
    expect(unavailable.length, 'the outage hit requests').toBeGreaterThan(0);
    // Fast: no request waits out the outage (about 1.3 s at worst here, on a loaded machine).
    for (const outcome of unavailable) expect(outcome.ms, outcome.user).toBeLessThan(CUT_MS / 2);

    const answers = await grabUntilAnswered(server.url, packetId, names);
    await waitFor('the journal to drain', async () => (await stores.redis.xlen(`{rp:${packetId}}:journal`)) === 0, { timeoutMs: 20_000 });
    await expectGrantsKept(stores, packetId, outcomes, answers);
  }, 180_000);
});
