import type { RedisClient } from './connection.ts';
import { redisTimeMs } from './time.ts';

/** Under the key prefix: the ms that TEST_CLOCK adds to Redis TIME. */
export const TEST_CLOCK_KEY = 'testclock:offsetMs';

/**
 * The time campaign scripts see: Redis TIME plus an offset the caller passes in as ARGV.
 * The offset is 0, and nothing is read, unless the server runs with TEST_CLOCK=1, which
 * config allows only with NODE_ENV=test. Then it comes from TEST_CLOCK_KEY, so a test
 * can cross a midnight or a whole day of hourly releases without waiting, while every
 * time inside a script still comes from one Redis clock.
 */
export class ScriptClock {
  constructor(
    private readonly redis: RedisClient,
    private readonly testClock: boolean,
  ) {}

  async offsetMs(): Promise<number> {
    if (!this.testClock) return 0;
    return Number((await this.redis.get(TEST_CLOCK_KEY)) ?? 0);
  }

  /** What `now_ms() + offset` gives inside a script, read from Node. */
  async nowMs(): Promise<number> {
    const [now, offset] = await Promise.all([redisTimeMs(this.redis), this.offsetMs()]);
    return now + offset;
  }
}
