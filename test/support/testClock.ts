import type { RedisClient } from '../../src/infra/redis/connection.ts';
import { TEST_CLOCK_KEY } from '../../src/infra/redis/testClock.ts';

/** Makes scripts of servers started with TEST_CLOCK=1 (and this key prefix) see `atMs` as now, from now on. */
export async function moveClockTo(redis: RedisClient, atMs: number): Promise<void> {
  const [seconds, micros] = await redis.time();
  await redis.set(TEST_CLOCK_KEY, String(atMs - (Number(seconds) * 1000 + Math.floor(Number(micros) / 1000))));
}
