import { PrismaPg } from '@prisma/adapter-pg';
import { GraphQLError } from 'graphql';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { createErrorMasking, isStoreOutage } from '../src/errorMasking.ts';
import { PrismaClient } from '../src/generated/prisma/client.ts';
import { TEST_DATABASE_URL, TEST_REDIS_URL } from './support/env.ts';
import { freePort } from './support/server.ts';

// The error shapes come from the real clients against real (or absent) servers.
const closers: (() => unknown)[] = [];
afterAll(async () => {
  for (const close of closers) await close();
});

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected a rejection');
}

const deadUrl = async (base: string) => {
  const url = new URL(base);
  url.port = String(await freePort());
  return url.toString();
};

describe('store outages are recognised', () => {
  it('ioredis: a server that does not answer, and a connection closed by hand', async () => {
    const redis = new Redis(await deadUrl(TEST_REDIS_URL), { maxRetriesPerRequest: 1, retryStrategy: () => 50, lazyConnect: true });
    redis.on('error', () => undefined);
    closers.push(() => redis.disconnect());
    const error = await rejection(redis.get('anything'));
    expect((error as Error).name).toBe('MaxRetriesPerRequestError');
    expect(isStoreOutage(error)).toBe(true);

    const closed = new Redis(TEST_REDIS_URL, { enableOfflineQueue: false, lazyConnect: true });
    closed.on('error', () => undefined);
    expect(isStoreOutage(await rejection(closed.get('anything')))).toBe(true);
  });

  it('pg: a refused connection, and a backend terminated by an administrator', async () => {
    const refused = new pg.Pool({ connectionString: await deadUrl(TEST_DATABASE_URL) });
    closers.push(() => refused.end());
    expect(isStoreOutage(await rejection(refused.query('SELECT 1')))).toBe(true);

    const victim = new pg.Client({ connectionString: TEST_DATABASE_URL });
    victim.on('error', () => undefined);
    await victim.connect();
    const { rows } = await victim.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
    await admin.connect();
    await admin.query('SELECT pg_terminate_backend($1)', [rows[0]!.pid]);
    await admin.end();
    expect(isStoreOutage(await rejection(victim.query('SELECT 1')))).toBe(true);
  });

  it('Prisma with the pg adapter: an unreachable database', async () => {
    const prisma = new PrismaClient({ adapter: new PrismaPg({ connectionString: await deadUrl(TEST_DATABASE_URL) }) });
    closers.push(() => prisma.$disconnect());
    const error = await rejection(prisma.$queryRaw`SELECT 1`);
    expect(isStoreOutage(error), String(error)).toBe(true);
  });
});

describe('ordinary failures are not outages', () => {
  it('a Redis command error, a SQL error through pg and through Prisma', async () => {
    const redis = new Redis(TEST_REDIS_URL);
    closers.push(() => redis.disconnect());
    expect(isStoreOutage(await rejection(redis.call('NO-SUCH-COMMAND')))).toBe(false);

    const pool = new pg.Pool({ connectionString: TEST_DATABASE_URL });
    closers.push(() => pool.end());
    expect(isStoreOutage(await rejection(pool.query('SELECT * FROM no_such_table_anywhere')))).toBe(false);
    // A NUL in the query text is a protocol violation (08P01), in a parameter an encoding error (22021).
    expect(isStoreOutage(await rejection(pool.query("SELECT 'a\u0000b'")))).toBe(false);
    expect(isStoreOutage(await rejection(pool.query('SELECT $1::text', ['a\u0000b'])))).toBe(false);

    const prisma = new PrismaClient({ adapter: new PrismaPg({ connectionString: TEST_DATABASE_URL }) });
    closers.push(() => prisma.$disconnect());
    expect(isStoreOutage(await rejection(prisma.$queryRaw`SELECT 1/0`))).toBe(false);
    expect(isStoreOutage(new Error('boom'))).toBe(false);
  });
});

describe('the masking function', () => {
  const located = (original: Error) => new GraphQLError(original.message, { path: ['grabRedPacket'], originalError: original });

  it('turns an outage into SERVICE_UNAVAILABLE with a retry hint, at the same path', async () => {
    const outage = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6379'), { code: 'ECONNREFUSED' });
    const masked = createErrorMasking(false)(located(outage), 'Unexpected error.') as GraphQLError;
    expect(masked.message).not.toContain('6379');
    expect(masked.extensions).toEqual({ code: 'SERVICE_UNAVAILABLE', retryAfterMs: 1000 });
    expect(masked.path).toEqual(['grabRedPacket']);
  });

  it('hides anything else unless errors are exposed on purpose', () => {
    const bug = new Error('Invalid `prisma.goods.findUnique()` invocation in /app/src/x.ts:12');
    const hidden = createErrorMasking(false)(located(bug), 'Unexpected error.') as GraphQLError;
    expect(hidden.message).toBe('Unexpected error.');
    expect(hidden.extensions.code).toBe('INTERNAL_SERVER_ERROR');
    expect(JSON.stringify(hidden.toJSON())).not.toMatch(/prisma|x\.ts|originalError/);
    const shown = createErrorMasking(true)(located(bug), 'Unexpected error.') as GraphQLError;
    expect((shown.extensions.originalError as { message: string }).message).toBe(bug.message);
  });
});
