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

describe('the rebuild lock', () => {
  it('stays held while a rebuild runs past its first lease, then goes', async () => {
    const keys = { meta: 'long:meta', rebuilding: 'long:rebuilding' };
    const [{ redis }, other] = instances as [(typeof instances)[0], (typeof instances)[0]];
    let leaseSeen = 0;
    let secondRebuilds = 0;
    let second: Promise<boolean> | undefined;
    const first = rebuildOnce(instances[0]!, keys, async () => {
      // 4.5 s into a 10 s lease: unrenewed, at most 5.5 s would be left.
      await sleep(4_500);
      leaseSeen = await redis.pttl(keys.rebuilding);
      // Another instance finding the keys missing now waits instead of rebuilding too.
      second = rebuildOnce(other, keys, async () => {
        secondRebuilds++;
        return true;
      });
      await sleep(100);
      await redis.set(keys.meta, 'built');
      return true;
    });
    expect(await first).toBe(true);
    expect(await second).toBe(true);
    expect(leaseSeen).toBeGreaterThan(7_000);
    expect(secondRebuilds).toBe(0);
    expect(await redis.exists(keys.rebuilding)).toBe(0);
  }, 15_000);
});
