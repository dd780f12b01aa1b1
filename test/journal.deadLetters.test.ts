import { randomUUID } from 'node:crypto';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type App, createApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { RedPacketStore, redPacketKeys } from '../src/domain/redPackets/store.ts';
import { Prisma } from '../src/generated/prisma/client.ts';
import { type JournalEntry, journalEntry } from '../src/infra/journal/journal.ts';
import { JournalDeadLettersDocument, RedeemPointsDocument } from './gql/generated.ts';
import { errorCodes, gql } from './support/client.ts';
import { testEnv } from './support/env.ts';
import { pointsAt } from './support/points.ts';
import { sleep } from './support/poll.ts';
import { expectRedPacketInvariants } from './support/redPacketInvariants.ts';
import { type ServerProcess, startServerProcess } from './support/server.ts';
import { type Stores, openStores } from './support/stores.ts';
import { openInApp } from './support/teams.ts';
import { tokenOf } from './support/tokens.ts';

const env = testEnv('journal_dead', { JOURNAL_SWEEP_AFTER_MS: '100', SWEEP_INTERVAL_MS: '600000', LOG_LEVEL: 'silent' });
let stores: Stores;
let server: ServerProcess;
const apps: App[] = [];
/** Every line the in-process apps logged, parsed. */
const logged: Record<string, unknown>[] = [];

/** An app in this process, its background sweeps out of the way: the tests call sweep() themselves. */
async function instance(): Promise<App> {
  const config = loadConfig(env.vars);
  const log = pino({ level: 'info' }, { write: (line: string) => void logged.push(JSON.parse(line) as Record<string, unknown>) });
  const app = await createApp(config, log);
  apps.push(app);
  return app;
}

beforeAll(async () => {
  server = await startServerProcess({ ...env.vars, LOG_LEVEL: 'info' });
  stores = openStores(env);
});

afterAll(async () => {
  for (const app of apps) await app.close().catch(() => undefined);
  await server?.stop();
  await stores?.cleanup();
});

// Redis holds bytes: a lone surrogate never reaches it (ioredis sends UTF-8), a NUL does.
const POISONED_USER = 'mallory\u0000\u0001 ✓ 🧧';

async function packetWith(app: App, count: number) {
  const packet = await app.redPackets.create('dead-letter-sender', { totalAmount: count * 100, count, mode: 'EQUAL', minAmount: 1, expiresInSeconds: 3600, fundedBy: 'SHOP' });
  return { packet, keys: redPacketKeys(packet.id) };
}

/** Runs the real grab script, as a caller would before committing; returns the entry it journaled. */
async function grabInRedis(app: App, packetId: string, user: string): Promise<JournalEntry> {
  const keys = redPacketKeys(packetId);
  const reply = await new RedPacketStore(app.redis, app.scripts).grab(packetId, user, randomUUID());
  expect(reply.kind).toBe('granted');
  return reply.kind === 'granted' ? reply.entry : journalEntry(keys.journal, '', []);
}

async function deadLetters(stream: string) {
  const { rows } = await stores.sql.query<{ entry_id: string; kind: string; fields: string; error_code: string; error_message: string }>(
    'SELECT entry_id, kind, fields, error_code, error_message FROM journal_dead_letter WHERE stream = $1',
    [stream],
  );
  return rows;
}

describe('a journal entry PostgreSQL refuses', () => {
  it("is dead-lettered alone: the batch's healthy entries commit and are acknowledged, and Redis is rebuilt from PostgreSQL", async () => {
    const app = await instance();
    const { packet, keys } = await packetWith(app, 10);
    const healthy: JournalEntry[] = [];
    for (let i = 0; i < 6; i++) healthy.push(await grabInRedis(app, packet.id, `healthy-${i}`));
    const poisoned = await grabInRedis(app, packet.id, POISONED_USER);
    healthy.push(await grabInRedis(app, packet.id, 'healthy-after'));
    expect(await app.redis.xlen(keys.journal)).toBe(8);

    // Committed in one tick: one group commit holds them all.
    const outcomes = await Promise.allSettled([...healthy, poisoned].map((entry) => app.journal.commit(entry)));
    expect(outcomes.slice(0, -1).map((outcome) => outcome.status === 'fulfilled' && outcome.value)).toEqual(healthy.map(() => 'persisted'));
    const refusal = outcomes.at(-1)!;
    expect(refusal.status).toBe('rejected');
    expect(refusal.status === 'rejected' && (refusal.reason as { extensions: unknown }).extensions).toEqual({ code: 'BAD_USER_INPUT' });

    const { rows } = await stores.sql.query<{ user_id: string }>('SELECT user_id FROM red_packet_grab WHERE packet_id = $1 ORDER BY user_id', [packet.id]);
    expect(rows.map((row) => row.user_id)).toEqual(healthy.map((entry) => entry.fields.user).sort());
    const [letter, ...more] = await deadLetters(keys.journal);
    expect(more).toEqual([]);
    expect(letter).toMatchObject({ entry_id: poisoned.id, kind: 'redPacket.grab', error_code: '22021' });
    // An operator reads the fields back exactly, NUL included.
    expect(JSON.parse(letter!.fields)).toEqual(poisoned.fields);
    expect(JSON.parse(letter!.fields).user).toBe(POISONED_USER);
    expect(await app.redis.xlen(keys.journal)).toBe(0);

    // One line names the entry.
    const lines = logged.filter((line) => line.entryId === poisoned.id);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 50, stream: keys.journal, kind: 'redPacket.grab', code: '22021' });

    // The poisoned grab's share went back: Redis is rebuilt from PostgreSQL.
    expect((await app.redPackets.get(packet.id))?.remainingCount).toBe(10 - healthy.length);
    await expectRedPacketInvariants({ ...stores, redis: app.redis }, packet.id);
  });

  it('is dead-lettered once by sweepers racing each other, which then stop failing on it', async () => {
    const [a, b] = await Promise.all([instance(), instance()]);
    const { packet, keys } = await packetWith(a, 5);
    await grabInRedis(a, packet.id, 'swept-healthy');
    // Written by hand in the format the grab script writes, as an older release or a bug might.
    const poisonedId = await a.redis.xadd(
      keys.journal,
      '*',
      'kind',
      'redPacket.grab',
      'grant',
      randomUUID(),
      'packet',
      packet.id,
      'user',
      'x\u0000y',
      'index',
      '4',
      'amount',
      '100',
      'at',
      String(Date.now()),
    );
    await sleep(150);
    await Promise.all([a.journal.sweep(), b.journal.sweep(), a.journal.sweep()]);

    expect(await a.redis.xlen(keys.journal)).toBe(0);
    expect((await deadLetters(keys.journal)).map((row) => row.entry_id)).toEqual([poisonedId]);
    const { rows } = await stores.sql.query<{ user_id: string }>('SELECT user_id FROM red_packet_grab WHERE packet_id = $1', [packet.id]);
    expect(rows.map((row) => row.user_id)).toEqual(['swept-healthy']);
    expect(await Promise.all([a.journal.sweep(), b.journal.sweep()])).toEqual([0, 0]);
    expect(logged.filter((line) => line.entryId === poisonedId)).toHaveLength(1);
  });

  it('is dead-lettered when its fields are not what its kind writes', async () => {
    const app = await instance();
    const { packet, keys } = await packetWith(app, 3);
    await grabInRedis(app, packet.id, 'unread-healthy');
    // A grab without its share index and amount.
    const unreadableId = await app.redis.xadd(keys.journal, '*', 'kind', 'redPacket.grab', 'grant', randomUUID(), 'packet', packet.id, 'user', 'unread-user', 'at', String(Date.now()));
    await sleep(150);
    await app.journal.sweep();

    expect(await app.redis.xlen(keys.journal)).toBe(0);
    expect((await deadLetters(keys.journal)).map((row) => row.entry_id)).toEqual([unreadableId]);
    const { rows } = await stores.sql.query<{ user_id: string }>('SELECT user_id FROM red_packet_grab WHERE packet_id = $1', [packet.id]);
    expect(rows.map((row) => row.user_id)).toEqual(['unread-healthy']);
  });

  it('does not block the rebuild of a campaign whose journal holds it', async () => {
    const app = await instance();
    const { packet, keys } = await packetWith(app, 4);
    await grabInRedis(app, packet.id, 'before-the-loss');
    const poisoned = await grabInRedis(app, packet.id, POISONED_USER);
    // Redis loses the packet but for its journal; the next grab rebuilds it, committing the journal first.
    await app.redis.del(keys.meta, keys.shares, keys.grabs);

    const share = await app.redPackets.grab('after-the-loss', packet.id);
    expect(share.remainingCount).toBe(2);
    expect((await deadLetters(keys.journal)).map((row) => row.entry_id)).toEqual([poisoned.id]);
    const grabs = await expectRedPacketInvariants({ ...stores, redis: app.redis }, packet.id);
    expect(grabs.map((grab) => grab.user_id).sort()).toEqual(['after-the-loss', 'before-the-loss']);
  });
});

describe('a journal commit that fails for want of a database', () => {
  it('is not dead-lettered: the entry stays in its stream and its caller may retry', async () => {
    const app = await instance();
    let terminations = 0;
    // A handler whose connection dies under it, as when PostgreSQL restarts.
    app.journal.register(
      {
        kind: 'test.connectionLost',
        async persist(db) {
          terminations++;
          await db.query(Prisma.sql`SELECT pg_terminate_backend(pg_backend_pid())`);
          return { conflicts: [], replayed: [] };
        },
      },
      async () => undefined,
    );
    const { packet, keys } = await packetWith(app, 3);
    const healthy = await grabInRedis(app, packet.id, 'beside-the-outage');
    const id = await app.redis.xadd(keys.journal, '*', 'kind', 'test.connectionLost', 'user', 'nobody');
    const [grabbed, lost] = await Promise.allSettled([app.journal.commit(healthy), app.journal.commit(journalEntry(keys.journal, id!, ['kind', 'test.connectionLost', 'user', 'nobody']))]);

    expect(grabbed).toEqual({ status: 'fulfilled', value: 'persisted' });
    expect(lost.status === 'rejected' && (lost.reason as { extensions: unknown }).extensions).toEqual({ code: 'SERVICE_UNAVAILABLE', retryAfterMs: 1000 });
    // Retried as today, never split or dead-lettered.
    expect(terminations).toBe(3);
    expect(await deadLetters(keys.journal)).toEqual([]);
    expect((await app.redis.xrange(keys.journal, '-', '+')).map(([entryId]) => entryId)).toEqual([id]);
    await app.redis.xdel(keys.journal, id!);
  });
});

describe("the sweeper's log", () => {
  it('is one line a round, however many streams it swept, with the counts and the first streams named', async () => {
    // Whatever the tests before left behind is swept by an instance of its own: its line is not this one's.
    await (await instance()).journal.sweep();
    const app = await instance();
    const streams: string[] = [];
    for (let i = 0; i < 12; i++) {
      const { packet, keys } = await packetWith(app, 3);
      streams.push(keys.journal);
      // Entries of a caller that died before committing them: three in the first stream, one in each other.
      for (let grab = 0; grab < (i === 0 ? 3 : 1); grab++) await grabInRedis(app, packet.id, `left-behind-${grab}`);
    }
    const mark = logged.length;
    await sleep(200);
    expect(await app.journal.sweep()).toBe(14);
    const lines = logged.slice(mark).filter((line) => line.msg === 'sweeping journal entries left behind');
    expect(lines).toEqual([expect.objectContaining({ level: 40, streams: 12, entries: 14, skipped: 0 })]);
    const named = lines[0]!.firstStreams as string[];
    expect(named).toHaveLength(10);
    expect(streams).toEqual(expect.arrayContaining(named));
    for (const stream of streams) expect(await app.redis.xlen(stream)).toBe(0);

    // Another round soon after (as every round is while PostgreSQL is down) is held back.
    const { packet } = await packetWith(app, 3);
    await grabInRedis(app, packet.id, 'left-behind-again');
    await sleep(200);
    expect(await app.journal.sweep()).toBe(1);
    expect(logged.slice(mark).filter((line) => line.msg === 'sweeping journal entries left behind')).toHaveLength(1);
  });
});

describe('an entry its handler cannot read', () => {
  it('is split from the healthy ones and dead-lettered: left in its stream it would fail every sweep and rebuild', async () => {
    const app = await instance();
    const persisted: string[] = [];
    app.journal.register(
      {
        kind: 'test.unreadable',
        async persist(_db, entries) {
          for (const { fields } of entries) if (fields.n === 'bad') throw new TypeError('cannot read this entry');
          persisted.push(...entries.map(({ fields }) => fields.n!));
          return { conflicts: [], replayed: [] };
        },
      },
      async () => undefined,
    );
    const stream = `{test:${randomUUID()}}:journal`;
    const entries: JournalEntry[] = [];
    for (const n of ['1', '2', 'bad', '3']) entries.push(journalEntry(stream, (await app.redis.xadd(stream, '*', 'kind', 'test.unreadable', 'n', n))!, ['kind', 'test.unreadable', 'n', n]));
    const outcomes = await Promise.allSettled(entries.map((entry) => app.journal.commit(entry)));

    expect(outcomes.map((outcome) => (outcome.status === 'fulfilled' ? outcome.value : (outcome.reason as { extensions: { code: string } }).extensions.code))).toEqual([
      'persisted',
      'persisted',
      'BAD_USER_INPUT',
      'persisted',
    ]);
    expect(persisted.sort()).toEqual(['1', '2', '3']);
    expect(await app.redis.xrange(stream, '-', '+')).toEqual([]);
    expect((await deadLetters(stream)).map((letter) => [letter.entry_id, JSON.parse(letter.fields)])).toEqual([[entries[2]!.id, { kind: 'test.unreadable', n: 'bad' }]]);
    expect(logged.filter((line) => line.entryId === entries[2]!.id)).toMatchObject([{ level: 50, stream, kind: 'test.unreadable' }]);
    await app.redis.del(stream);
  });
});

describe('an entry its first committer finds gone from its stream', () => {
  it('has its keys rebuilt when Redis lost it, and not when another committer replayed and deleted it first', async () => {
    const [first, other] = await Promise.all([instance(), instance()]);
    const kind = 'test.twoCommitters';
    const forgotten: string[] = [];
    let otherIsDone!: () => void;
    const otherDone = new Promise<void>((resolve) => (otherIsDone = resolve));
    // The first committer inserts every entry, and is held until the other is done.
    first.journal.register(
      {
        kind,
        async persist() {
          await otherDone;
          return { conflicts: [], replayed: [] };
        },
      },
      async (entry) => forgotten.push(entry.fields.n!),
    );
    // The other finds every entry already in PostgreSQL (a sweeper, or a caller making sure).
    other.journal.register({ kind, persist: async (_db, entries) => ({ conflicts: [], replayed: entries }) }, async (entry) => forgotten.push(entry.fields.n!));
    const stream = `{test:${randomUUID()}}:journal`;
    const entry = async (n: string) => journalEntry(stream, (await first.redis.xadd(stream, '*', 'kind', kind, 'n', n))!, ['kind', kind, 'n', n]);
    const [replayed, lost] = [await entry('replayed'), await entry('lost')];

    const committed = Promise.all([first.journal.commit(replayed), first.journal.commit(lost)]);
    await sleep(50);
    expect(await other.journal.commit(replayed)).toBe('persisted');
    await first.redis.xdel(stream, lost.id);
    otherIsDone();

    expect(await committed).toEqual(['persisted', 'persisted']);
    // A rebuild drops what lives only in Redis (a team's seat locks): only the lost entry's keys go.
    expect(forgotten).toEqual(['lost']);
    expect(logged.filter((line) => line.msg === 'committed journal entries whose stream Redis had lost; their keys are rebuilt')).toMatchObject([{ entries: 1 }]);
    await first.redis.del(stream, `${stream}:deletedByOthers`);
  });
});

describe('journalDeadLetters', () => {
  it('is for operators: UNAUTHENTICATED anonymously, FORBIDDEN for a user, the dead letters for an operator', async () => {
    const anonymous = await gql(server.url, JournalDeadLettersDocument, { limit: 10 });
    expect(errorCodes(anonymous)).toEqual(['UNAUTHENTICATED']);
    const user = await gql(server.url, JournalDeadLettersDocument, { limit: 10 }, await tokenOf('curious-user'));
    expect(errorCodes(user)).toEqual(['FORBIDDEN']);
    expect(user.body.data).toBeNull();

    const { body } = await gql(server.url, JournalDeadLettersDocument, { limit: 10 }, await tokenOf('ops', { admin: true }));
    expect(body.errors).toBeUndefined();
    const letters = body.data!.journalDeadLetters;
    // The earlier tests' entries, newest first.
    expect(letters.length).toBeGreaterThanOrEqual(3);
    expect(letters.map((letter) => letter.createdAt)).toEqual(
      letters
        .map((letter) => letter.createdAt)
        .sort()
        .reverse(),
    );
    const withUser = letters.find((letter) => JSON.parse(letter.fields).user === POISONED_USER);
    expect(withUser).toMatchObject({ kind: 'redPacket.grab', code: '22021', error: expect.stringContaining('0x00') });
    expect(withUser!.stream).toMatch(/^\{rp:.+\}:journal$/);
    expect(withUser!.entryId).toMatch(/^\d+-\d+$/);
    const invalid = await gql(server.url, JournalDeadLettersDocument, { limit: 0 }, await tokenOf('ops', { admin: true }));
    expect(errorCodes(invalid)).toEqual(['BAD_USER_INPUT']);
  });
});

describe('the caller of an entry PostgreSQL refuses', () => {
  it('gets BAD_USER_INPUT for a seat confirmation; the team is rebuilt from PostgreSQL without the member', async () => {
    const app = await instance();
    const team = await openInApp(app, 'team-leader', `poison-${randomUUID().slice(0, 8)}`, { lockSeconds: 600, formationSeconds: 3600 });
    await app.teams.lock('team-buyer', team.id);

    await expect(app.teams.confirm('team-buyer', team.id, 'pay\u0000ref')).rejects.toMatchObject({ extensions: { code: 'BAD_USER_INPUT' } });
    // Live seat locks are only in Redis, so the rebuild, as after a conflict, has none.
    expect(await app.teams.get(team.id)).toMatchObject({ members: [{ userId: 'team-leader' }], locks: [], freeSeats: 2 });
    await app.teams.lock('team-buyer', team.id);
    const joined = await app.teams.confirm('team-buyer', team.id, 'pay-ref');
    expect(joined.members.map((member) => member.userId)).toEqual(['team-leader', 'team-buyer']);
  });

  // With NUL refused at the GraphQL edge the same request gets BAD_USER_INPUT before Redis;
  // either way nothing changes.
  it('gets BAD_USER_INPUT, and the balance and stock are as before', async () => {
    const points = pointsAt(server.url);
    const goods = await points.createGoods('operator', { title: 'mug', pointsCost: 10, stock: 5 });
    await points.award('operator', { userId: 'nul-redeemer', amount: 100 });
    const state = async () => ({
      balance: (await points.me('nul-redeemer')).pointsBalance,
      stock: (await points.goods('nul-redeemer', goods.id))?.remainingStock,
    });

    const refused = await points.raw(RedeemPointsDocument, { goodsId: goods.id, requestId: 'request\u0000id' }, 'nul-redeemer');
    expect(errorCodes(refused)).toEqual(['BAD_USER_INPUT']);
    expect(await state()).toEqual({ balance: 100, stock: 5 });
    expect((await points.tryRedeem('nul-redeemer', goods.id, 'a-plain-request')).result?.__typename).toBe('Redemption');
    expect(await state()).toEqual({ balance: 90, stock: 4 });
  });
});
