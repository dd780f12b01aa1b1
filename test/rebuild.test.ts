import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { rebuildOnce } from '../src/infra/campaign/rebuild.ts';
import { Scripts } from '../src/infra/redis/scripts.ts';
import { TEST_REDIS_URL, testEnv } from './support/env.ts';
import { sleep } from './support/poll.ts';
import { deleteKeys } from './support/stores.ts';

const env = testEnv('rebuild');
// Two instances' connections: their commands interleave as two processes' would.
const instances = [0, 1].map(() => {
  const redis = new Redis(TEST_REDIS_URL, { keyPrefix: env.keyPrefix });
  return { redis, scripts: new Scripts(redis) };
});

afterAll(async () => {
  await deleteKeys(instances[0]!.redis, env.keyPrefix);
  for (const { redis } of instances) redis.disconnect();
});

describe('a rebuild of missing keys', () => {
  it('runs once per loss, however many callers of two instances find the keys missing at once', async () => {
    const keys = { meta: 'campaign:meta', rebuilding: 'campaign:rebuilding' };
    const [{ redis }] = instances as [(typeof instances)[0]];
    const rebuildsPerRound: number[] = [];
    for (let round = 0; round < 20; round++) {
      await redis.del(keys.meta);
      let rebuilds = 0;
      // A second rebuild would overwrite keys that scripts have been changing since the first.
      const rebuild = async () => {
        rebuilds++;
        await sleep(5);
        await redis.set(keys.meta, String(round));
        return true;
      };
      // A crowd arriving over a few milliseconds.
      const found = await Promise.all(
        Array.from({ length: 60 }, async (_, i) => {
          await sleep(i % 10);
          return rebuildOnce(instances[i % 2]!, keys, rebuild);
        }),
      );
      expect(found.every(Boolean)).toBe(true);
      rebuildsPerRound.push(rebuilds);
    }
    expect(rebuildsPerRound).toEqual(rebuildsPerRound.map(() => 1));
  });
});
