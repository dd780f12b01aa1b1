import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { aliasScope } from '../src/domain/privacy.ts';
import { DATA_DIR_LOCK_FILE } from '../src/infra/db/dataDirLock.ts';
import { TEST_REDIS_URL, testEnv } from './support/env.ts';
import { stopAll, stopWithin } from './support/lifecycle.ts';
import { aliasOf } from './support/privacy.ts';
import { redPacketsAt } from './support/redPackets.ts';
import { type ServerProcess, runUntilExit, startServerProcess } from './support/server.ts';
import { deleteKeys, stateKeys } from './support/stores.ts';

// No DATABASE_URL at all (config treats '' as unset): the server falls back to PGlite in PGLITE_DIR.
const dir = mkdtempSync(join(tmpdir(), 'campaign-pglite-'));
const env = testEnv('embedded', { DATABASE_URL: '', PGLITE_DIR: dir });
let redis: Redis;
let server: ServerProcess | undefined;

beforeAll(() => {
  redis = new Redis(TEST_REDIS_URL, { keyPrefix: env.keyPrefix });
});

afterAll(async () => {
  try {
    await stopAll(server);
  } finally {
    await deleteKeys(redis, env.keyPrefix);
    redis.disconnect();
    rmSync(dir, { recursive: true, force: true });
  }
});

const appliedMigrations = (output: string) => output.split('\n').filter((line) => line.includes('applied migration'));

describe('the embedded database', () => {
  it('serves red packets from PGlite, and keeps them across a restart without re-applying migrations', async () => {
    const sender = 'pglite-sender';
    const first = 'pglite-first';
    const second = 'pglite-second';

    // First start: a fresh directory, so every migration is applied.
    server = await startServerProcess(env.vars);
    expect(server.output()).toContain('"database":"pglite"');
    expect(appliedMigrations(server.output()).length).toBeGreaterThan(0);
    // The outboxes are read from PGlite as from PostgreSQL; there is no pool to show.
    const metrics = (await (await fetch(new URL('/metrics', server.url))).text()).split('\n');
    for (const outbox of ['redemption', 'refund']) expect(metrics).toContain(`outbox_pending{outbox="${outbox}"} 0`);
    expect(metrics.filter((line) => line.includes('postgres_pool_'))).toEqual([]);

    let redPackets = redPacketsAt(server.url);
    const packet = await redPackets.create(sender, { totalAmount: 900, count: 3, mode: 'EQUAL' });
    expect(packet).toMatchObject({ status: 'ACTIVE', remainingCount: 3, remainingAmount: 900 });
    const grab = await redPackets.grab(first, packet.id);
    expect(grab).toMatchObject({ __typename: 'GrabbedShare', amount: 300, remainingCount: 2 });
    const before = await redPackets.packet(sender, packet.id);
    // The sender sees the grabber's alias in this packet, the same after the restart.
    expect(before?.shares).toEqual([expect.objectContaining({ userId: aliasOf(aliasScope.redPacket(packet.id), 'pglite-first'), amount: 300 })]);

    expect(await stopWithin(server)).toBe(0);
    server = undefined;

    // Drop the packet from Redis too, so the second start can only know it from PGlite.
    await deleteKeys(redis, env.keyPrefix);

    server = await startServerProcess(env.vars);
    expect(server.output()).toContain('"database":"pglite"');
    expect(appliedMigrations(server.output())).toEqual([]);

    redPackets = redPacketsAt(server.url);
    const after = await redPackets.packet(sender, packet.id);
    expect(after).toMatchObject({ id: packet.id, status: 'ACTIVE', totalAmount: 900, count: 3, remainingCount: 2, remainingAmount: 600 });
    expect(after?.shares).toEqual(before?.shares);

    // The rebuilt packet still knows who grabbed, and hands out what is left.
    const again = await redPackets.grab(first, packet.id);
    expect(again).toMatchObject({ __typename: 'AlreadyGrabbed', share: { amount: 300 } });
    const next = await redPackets.grab(second, packet.id);
    expect(next).toMatchObject({ __typename: 'GrabbedShare', amount: 300, remainingCount: 1 });

    expect(await stopWithin(server)).toBe(0);
    server = undefined;
  });

  it('deleted and created anew, takes the key prefix over: what the old database left in Redis is gone, a longer prefix another deployment claimed stays', async () => {
    const sender = 'pglite-sender';
    server = await startServerProcess(env.vars);
    const packet = await redPacketsAt(server.url).create(sender, { totalAmount: 500, count: 5, mode: 'EQUAL' });
    expect(await stopWithin(server)).toBe(0);
    server = undefined;
    expect((await stateKeys(redis, env.keyPrefix)).some((key) => key.includes(packet.id))).toBe(true);

    // A deployment on the same Redis under a longer prefix: its keys only look like the old database's.
    await redis.set('prod:database', 'postgresql:11111111-1111-1111-1111-111111111111');
    await redis.set('prod:{shop}:balance:someone', '7');
    // A key of the old database's that ends in the owner key's name without being one (a user named so).
    await redis.hset('{shop}:balance:database', 'balance', '5');

    rmSync(dir, { recursive: true, force: true });
    server = await startServerProcess(env.vars);
    expect(server.output()).toContain('deleted the Redis keys another embedded database left');
    expect((await stateKeys(redis, env.keyPrefix)).filter((key) => key.includes(packet.id))).toEqual([]);
    expect(await redis.get('prod:{shop}:balance:someone')).toBe('7');
    expect(await redis.exists('{shop}:balance:database')).toBe(0);
    expect(await redis.get('prod:database')).toBe('postgresql:11111111-1111-1111-1111-111111111111');
    expect(await redPacketsAt(server.url).packet(sender, packet.id)).toBeNull();
    expect(await stopWithin(server)).toBe(0);
    server = undefined;
  });

  it('created anew, never takes over a key prefix a PostgreSQL database owns: a live deployment may have grants in flight', async () => {
    await redis.set('database', 'postgresql:00000000-0000-0000-0000-000000000000');
    await redis.set('{shop}:balance:someone', '10');
    rmSync(dir, { recursive: true, force: true });
    const result = await runUntilExit(env.vars, 45_000);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain('belong to another database (postgresql:00000000-0000-0000-0000-000000000000');
    expect(await redis.get('{shop}:balance:someone')).toBe('10');
  });
});

describe('one data directory, one process', () => {
  it("refuses a second server on a PGLITE_DIR another has open, which serves on; a dead process's lock is taken over", async () => {
    // The directory the tests above left, migrated: a start on it is quick. Their keys go,
    // so that this database owns the prefix.
    await deleteKeys(redis, env.keyPrefix);
    mkdirSync(dir, { recursive: true });
    const lockFile = join(dir, DATA_DIR_LOCK_FILE);
    // The lock of a process that is gone, as a SIGKILL leaves it.
    writeFileSync(lockFile, `${spawnSync(process.execPath, ['-e', '']).pid}\n`);
    server = await startServerProcess(env.vars);
    const redPackets = redPacketsAt(server.url);
    const packet = await redPackets.create('lock-sender', { totalAmount: 200, count: 2, mode: 'EQUAL' });

    // PORT=0: another port, so nothing but the directory stops it.
    const second = await runUntilExit(env.vars, 30_000);
    expect(second.code, second.output).toBe(78);
    expect(second.stderr.trim()).toBe(
      `cannot start: the embedded database in PGLITE_DIR=${dir} is open in process ${server.child.pid}, and PGlite serves one process: stop that one, or give this one another PGLITE_DIR`,
    );

    // A grab is committed in PGlite before it is answered: the first still writes there.
    expect(await redPackets.grab('lock-grabber', packet.id)).toMatchObject({ __typename: 'GrabbedShare', amount: 100, remainingCount: 1 });
    expect(await stopWithin(server)).toBe(0);
    server = undefined;
    expect(existsSync(lockFile)).toBe(false);
  });
});
