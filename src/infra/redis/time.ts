import type { RedisClient } from './connection.ts';

/** Redis TIME in ms: the one clock every instance and every script agrees on. */
export async function redisTimeMs(redis: RedisClient): Promise<number> {
  const [seconds, micros] = await redis.time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}
