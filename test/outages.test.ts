import type { ChildProcess } from 'node:child_process';
import { print } from 'graphql';
import { afterAll, describe, expect, it } from 'vitest';
import { RedPacketDocument, RedPacketUpdatedDocument } from './gql/generated.ts';
import { errorCodes, gql, openWs } from './support/client.ts';
import { startCuttableProxy, throughProxy } from './support/cuttableProxy.ts';
import { TEST_DATABASE_URL, type TestEnv, testEnv } from './support/env.ts';
import { expectGrantsKept, expectSuccessOrUnavailable, grabUntilAnswered, stormWithOutage } from './support/outageStorms.ts';
import { sleep, waitFor } from './support/poll.ts';
import { startThrowawayRedis, stopChild } from './support/redisServer.ts';
import { redPacketsAt } from './support/redPackets.ts';
import { freePort, startServerProcess } from './support/server.ts';
import { openStores } from './support/stores.ts';
import { signAhead, tokenOf } from './support/tokens.ts';

const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
});

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

describe('PostgreSQL unreachable in the middle of a storm', () => {
  it('answers fast with SERVICE_UNAVAILABLE, and every acknowledged grant is durable', async () => {
    const target = new URL(TEST_DATABASE_URL);
    const proxy = await startCuttableProxy(target);
    cleanups.push(() => proxy.close());
    const env = testEnv('outage_pg', { JOURNAL_SWEEP_AFTER_MS: '500', SWEEP_INTERVAL_MS: '200' });
    env.vars.DATABASE_URL = throughProxy(env.vars.DATABASE_URL!, proxy.port);
    const { stores, server, packetId, names } = await setUp(env, 2000);

    const CUT_MS = 8000;
    const outcomes = await stormWithOutage(server.url, packetId, names, 40, async () => {
      await proxy.cut();
      await sleep(CUT_MS);
      await proxy.restore();
    });
    const unavailable = expectSuccessOrUnavailable(outcomes);
    expect(unavailable.length, 'the outage hit requests').toBeGreaterThan(0);
    // Fast: no request waits out the outage. About 1.3 s at worst alone; 4.1 s once in the
    // full suite, beside a browser test, as failed batches queue behind each other.
    for (const outcome of unavailable) expect(outcome.ms, outcome.user).toBeLessThan((CUT_MS * 3) / 4);

    const answers = await grabUntilAnswered(server.url, packetId, names);
    await waitFor('the journal to drain', async () => (await stores.redis.xlen(`{rp:${packetId}}:journal`)) === 0, { timeoutMs: 20_000 });
    await expectGrantsKept(stores, packetId, outcomes, answers);
  }, 180_000);
});

// The tests from here on mostly wait (for timeouts, a lock, a hung Redis), each on its own
// server and stores: they run side by side. The storms above run alone, as their timings
// are asserted and they keep both cores busy.
describe.concurrent('Redis down, for a caller who reads Chinese', () => {
  it('words SERVICE_UNAVAILABLE in Chinese over HTTP and graphql-ws, and in English for others', async () => {
    const redisPort = await freePort();
    let redis = await startThrowawayRedis(redisPort, []);
    cleanups.push(() => stopChild(redis));
    // A read while Redis is down waits until ioredis gives up on it, at one of its reconnection
    // attempts (seconds apart) or at the command timeout (5 s by default): 1 s answers sooner.
    const env = testEnv('outage_zh', { REDIS_URL: `redis://127.0.0.1:${redisPort}`, REDIS_COMMAND_TIMEOUT_MS: '1000' });
    const { server, packetId } = await setUp(env, 1);
    const token = await tokenOf('outage-reader');
    // Opened while Redis is up (a new socket cannot be counted without it, and is refused),
    // and held open by a live subscription (the client closes a lazy socket with none).
    const socket = openWs(server.url, { authorization: `Bearer ${token}`, 'accept-language': 'zh-CN' });
    cleanups.push(async () => socket.dispose());
    const held = socket.subscribe<unknown>({ query: print(RedPacketUpdatedDocument), variables: { packetId } });
    await held.until((all) => all.length >= 1);
    const readOverWs = async () => (await socket.subscribe<unknown>({ query: print(RedPacketDocument), variables: { id: packetId } }).until((all) => all.length >= 1))[0]!;
    expect((await readOverWs()).errors).toBeUndefined();
    await stopChild(redis);

    const viaHttp = (language: string) => gql(server.url, RedPacketDocument, { id: packetId }, token, { 'accept-language': language });
    const zh = await viaHttp('zh-CN,zh;q=0.9');
    expect(errorCodes(zh), JSON.stringify(zh.body)).toEqual(['SERVICE_UNAVAILABLE']);
    expect(zh.body.errors![0]!.message).toBe('服务暂时不可用，请稍后重试');
    const en = await viaHttp('en-US');
    expect(errorCodes(en)).toEqual(['SERVICE_UNAVAILABLE']);
    expect(en.body.errors![0]!.message).toBe('the service is briefly unavailable; retry shortly');
    const overWs = await readOverWs();
    expect(overWs.errors?.[0]?.extensions?.code, JSON.stringify(overWs)).toBe('SERVICE_UNAVAILABLE');
    expect(overWs.errors?.[0]?.message).toBe('服务暂时不可用，请稍后重试');
    // Back, empty, so the test's cleanup can delete its keys and then drop its schema.
    redis = await startThrowawayRedis(redisPort, []);
  }, 90_000);
});

describe.concurrent('Redis hung: stopped, its connections left open', () => {
  it('answers SERVICE_UNAVAILABLE once a command waits past REDIS_COMMAND_TIMEOUT_MS, and serves again once it resumes', async () => {
    const redisPort = await freePort();
    const redis = await startThrowawayRedis(redisPort, []);
    cleanups.push(async () => {
      redis.kill('SIGCONT');
      await stopChild(redis);
    });
    const env = testEnv('outage_hung', { REDIS_URL: `redis://127.0.0.1:${redisPort}`, REDIS_COMMAND_TIMEOUT_MS: '1000' });
    const { server, packetId } = await setUp(env, 1);
    const token = await tokenOf('outage-waiter');
    const read = () => gql(server.url, RedPacketDocument, { id: packetId }, token);

    // The outage counter, read from /metrics (which needs no Redis).
    const unavailableAnswers = async () => {
      const text = await (await fetch(new URL('/metrics', server.url))).text();
      const line = text.split('\n').find((entry) => entry.startsWith('store_errors_total{source="request"} '));
      return line ? Number(line.split(' ')[1]) : 0;
    };
    const countedBefore = await unavailableAnswers();

    redis.kill('SIGSTOP');
    const started = performance.now();
    const hung = await read();
    expect(errorCodes(hung), JSON.stringify(hung.body)).toEqual(['SERVICE_UNAVAILABLE']);
    expect(performance.now() - started, 'answered within a few command timeouts').toBeLessThan(8_000);
    expect(await unavailableAnswers()).toBe(countedBefore + 1);
    // Logged with a stable message an alert can match, and the driver's error.
    const outageLines = server
      .output()
      .split('\n')
      .filter((line) => line.includes('"outage":true'));
    expect(outageLines.map((line) => JSON.parse(line))).toMatchObject([
      { level: 50, msg: 'a store is unreachable or too slow; answered SERVICE_UNAVAILABLE', err: { message: 'Command timed out' } },
    ]);

    redis.kill('SIGCONT');
    await waitFor('Redis to answer again', async () => errorCodes(await read()).length === 0, { timeoutMs: 20_000 });
  }, 60_000);
});

describe.concurrent('Redis hung, with the default command timeout', () => {
  it('still serves /metrics within a scrape timeout, the journal gauges as they were and the outage counted', async () => {
    const redisPort = await freePort();
    const redis = await startThrowawayRedis(redisPort, []);
    cleanups.push(async () => {
      redis.kill('SIGCONT');
      await stopChild(redis);
    });
    const env = testEnv('outage_scrape', { REDIS_URL: `redis://127.0.0.1:${redisPort}` });
    const { server, packetId } = await setUp(env, 1);
    const scrape = async () => {
      const started = performance.now();
      const text = await (await fetch(new URL('/metrics', server.url))).text();
      return { ms: performance.now() - started, text };
    };
    expect((await scrape()).text).toMatch(/^journal_depth 0$/m);

    redis.kill('SIGSTOP');
    const hung = gql(server.url, RedPacketDocument, { id: packetId }, await tokenOf('outage-scraper'));
    // A Redis command waits up to 5 s here; Prometheus gives a scrape 10 s by default.
    for (let i = 0; i < 3; i++) {
      const { ms, text } = await scrape();
      expect(ms, `scrape ${i}`).toBeLessThan(2_500);
      expect(text).toMatch(/^journal_depth 0$/m);
    }
    expect(errorCodes(await hung)).toEqual(['SERVICE_UNAVAILABLE']);
    expect((await scrape()).text).toMatch(/^store_errors_total\{source="request"\} [1-9]/m);
    redis.kill('SIGCONT');
  }, 60_000);
});

describe.concurrent('A table locked in PostgreSQL', () => {
  it('answers SERVICE_UNAVAILABLE once a statement waits past DATABASE_LOCK_TIMEOUT_MS; the grab stands, and its retry finds it', async () => {
    const env = testEnv('outage_locked', { DATABASE_LOCK_TIMEOUT_MS: '1000', JOURNAL_SWEEP_AFTER_MS: '500', SWEEP_INTERVAL_MS: '200' });
    const { stores, server, packetId } = await setUp(env, 1);
    const redPackets = redPacketsAt(server.url);
    // Held by hand, as an operator's migration or a stray session would.
    const holder = await stores.sql.connect();
    let answered: Awaited<ReturnType<typeof redPackets.tryGrab>>;
    let waitedMs: number;
    try {
      await holder.query('BEGIN; LOCK TABLE red_packet_grab IN ACCESS EXCLUSIVE MODE');
      const started = performance.now();
      answered = await redPackets.tryGrab('locked-grabber', packetId);
      waitedMs = performance.now() - started;
      // Readiness pings do not touch the table: the instance is up, one table is not.
      expect((await fetch(new URL('/ready', server.url))).status).toBe(200);
    } finally {
      await holder.query('COMMIT');
      holder.release();
    }
    expect(answered.errors?.map((error) => error.extensions?.code)).toEqual(['SERVICE_UNAVAILABLE']);
    expect(waitedMs, 'a few lock timeouts, not as long as the lock').toBeLessThan(6_000);
    const retried = await redPackets.grab('locked-grabber', packetId);
    expect(retried.__typename).toBe('AlreadyGrabbed');
    await waitFor('the journal to drain', async () => (await stores.redis.xlen(`{rp:${packetId}}:journal`)) === 0, { timeoutMs: 20_000 });
    expect((await stores.sql.query('SELECT user_id FROM red_packet_grab')).rows).toEqual([{ user_id: 'locked-grabber' }]);
  }, 60_000);
});
