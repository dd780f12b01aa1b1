import { PrismaPg } from '@prisma/adapter-pg';
import { GraphQLError } from 'graphql';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { ServiceUnavailableError } from '../src/domain/errors.ts';
import { createErrorMasking, isStoreOutage } from '../src/errorMasking.ts';
import { unavailableError } from '../src/errors.ts';
import { PrismaClient } from '../src/generated/prisma/client.ts';
import { servingRequest } from '../src/requestId.ts';
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

describe('an exhausted pool is an outage', () => {
  it('Prisma: a transaction that found no free connection within its maxWait', async () => {
    const prisma = new PrismaClient({ adapter: new PrismaPg(new pg.Pool({ connectionString: TEST_DATABASE_URL, max: 1 })) });
    closers.push(() => prisma.$disconnect());
    let release = () => {};
    const holding = prisma.$transaction(() => new Promise<void>((resolve) => (release = resolve)), { timeout: 10_000 });
    try {
      const error = await rejection(prisma.$transaction(async (tx) => tx.$queryRaw`SELECT 1`, { maxWait: 200 }));
      expect((error as { code?: string }).code).toBe('P2028');
      expect(isStoreOutage(error), String(error)).toBe(true);
    } finally {
      release();
      await holding;
    }
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

  describe('in the language of the request being served (Yoga passes masking no context)', () => {
    const mask = createErrorMasking(false);
    const asCaller = (language: string | undefined, error: Error) => servingRequest({ id: 'r', language }, () => mask(located(error), 'Unexpected error.') as GraphQLError);
    const outage = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6379'), { code: 'ECONNREFUSED' });
    const rebuilding = new ServiceUnavailableError('the team is being rebuilt; try again');

    it("words an outage, a service's own SERVICE_UNAVAILABLE and an unexpected error in Chinese for zh-CN", () => {
      for (const error of [outage, rebuilding]) {
        const masked = asCaller('zh-CN,zh;q=0.9', error);
        expect(masked.message).toBe('服务暂时不可用，请稍后重试');
        expect(masked.extensions).toEqual({ code: 'SERVICE_UNAVAILABLE', retryAfterMs: 1000 });
        expect(masked.path).toEqual(['grabRedPacket']);
      }
      const bug = asCaller('zh-CN', new Error('boom'));
      expect(bug.message).toBe('服务器出现意外错误');
      expect(bug.extensions.code).toBe('INTERNAL_SERVER_ERROR');
    });

    it("keeps a service's English, with its detail, for English and for callers who name no language", () => {
      for (const language of ['en-US', undefined]) {
        expect(asCaller(language, rebuilding).message).toBe('the team is being rebuilt; try again');
        expect(asCaller(language, outage).message).toBe('the service is briefly unavailable; retry shortly');
        expect(asCaller(language, new Error('boom')).message).toBe('Unexpected error.');
      }
    });

    it('leaves a refusal already worded for its caller as it is', () => {
      const refusal = unavailableError('暂时无法校验令牌，请稍后重试');
      expect(servingRequest({ id: 'r', language: 'zh-CN' }, () => mask(refusal, 'Unexpected error.'))).toBe(refusal);
    });
  });
});
