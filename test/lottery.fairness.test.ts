import { randomInt, randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chooseWeighted } from '../src/domain/lottery/choice.ts';
import { DRAW_RANDOM_RANGE, type LotterySettings } from '../src/domain/lottery/settings.ts';
import { type DrawReply, LotteryStore, lotteryKeys } from '../src/domain/lottery/store.ts';
import { Scripts } from '../src/infra/redis/scripts.ts';
import { chiSquareTest } from './support/chiSquare.ts';
import { TEST_REDIS_URL, testEnv } from './support/env.ts';
import { weightedSettings, writeActivity } from './support/lotterySettings.ts';
import { deleteKeys } from './support/stores.ts';

// The statistics run the real script against real Redis, in-process: what is tested
// is the choice (script + crypto input), not HTTP. Calls are issued a chunk at a time,
// which ioredis pipelines.
const env = testEnv('lot_fair');
let redis: Redis;
let store: LotteryStore;

beforeAll(() => {
  redis = new Redis(TEST_REDIS_URL, { keyPrefix: env.keyPrefix });
  store = new LotteryStore(redis, new Scripts(redis));
});

afterAll(async () => {
  await deleteKeys(redis, env.keyPrefix);
  redis.disconnect();
});

const WEIGHTS = [1, 3, 6, 10, 20, 60];
const CHUNK = 5_000;
/** Enough for a chi-square test to see the biased choosers below many times over: the rarest prize is expected 600 times. */
const DRAWS = 60_000;
const P_THRESHOLD = 0.001;

/** A WEIGHTED activity written straight to Redis (as a rebuild would), running now. */
async function activity(weights: number[], noPrizeWeight: number, stock: (i: number) => number): Promise<{ id: string; settings: LotterySettings }> {
  const id = randomUUID();
  const settings = weightedSettings(weights, noPrizeWeight, stock);
  await writeActivity(store, id, settings);
  return { id, settings };
}

interface Drawn {
  randomInput: number;
  prizeId: string | null;
}

/** `count` draws through the script, each with its own crypto input (rerolled like the service does). */
async function drawMany(activityId: string, count: number): Promise<Drawn[]> {
  const drawn: Drawn[] = [];
  for (let done = 0; done < count; done += CHUNK) {
    const size = Math.min(CHUNK, count - done);
    const replies = await Promise.all(
      Array.from({ length: size }, async (_, i) => {
        for (;;) {
          const randomInput = randomInt(0, DRAW_RANDOM_RANGE);
          const reply = await store.draw({ activityId, userId: `u${(done + i) % 1000}`, drawId: randomUUID(), requestId: null, randomInput, clockOffsetMs: 0 });
          if (reply.kind !== 'reroll') return { randomInput, reply };
        }
      }),
    );
    for (const { randomInput, reply } of replies) {
      if (reply.kind !== 'drawn') throw new Error(`unexpected reply ${JSON.stringify(reply)}`);
      drawn.push({ randomInput, prizeId: reply.prize?.id ?? null });
    }
    // Nothing persists these draws; keep the stream from growing.
    await redis.del(lotteryKeys(activityId).journal);
  }
  return drawn;
}

/** Counts per prize (in settings order), then the no-prize outcome. */
function tally(prizeIds: string[], outcomes: (string | null)[]): number[] {
  const counts = new Array<number>(prizeIds.length + 1).fill(0);
  for (const outcome of outcomes) counts[outcome === null ? prizeIds.length : prizeIds.indexOf(outcome)]!++;
  return counts;
}

const expectedProbabilities = (weights: number[], noPrizeWeight: number) => {
  const total = weights.reduce((a, b) => a + b, 0) + noPrizeWeight;
  return [...weights.map((weight) => weight / total), noPrizeWeight / total];
};

describe('WEIGHTED draws are fair', () => {
  let drawn: Drawn[];
  let prizeIds: string[];

  beforeAll(async () => {
    const { id, settings } = await activity(WEIGHTS, 0, () => 10_000_000);
    prizeIds = settings.prizes.map((prize) => prize.id);
    drawn = await drawMany(id, DRAWS);
  }, 120_000);

  it(`${DRAWS.toLocaleString('en')} draws over weights [1, 3, 6, 10, 20, 60] pass a chi-square test at p > 0.001`, () => {
    const counts = tally(
      prizeIds,
      drawn.map((draw) => draw.prizeId),
    );
    expect(counts.reduce((a, b) => a + b, 0)).toBe(DRAWS);
    expect(counts.at(-1), 'no-prize weight is 0: every draw wins').toBe(0);
    const { pValue, statistic } = chiSquareTest(counts.slice(0, -1), expectedProbabilities(WEIGHTS, 0).slice(0, -1));
    expect(pValue, `chi-square ${statistic.toFixed(2)} over counts ${counts.join(', ')}`).toBeGreaterThan(P_THRESHOLD);
  });

  it('makes every choice exactly as the audit replay does from the stored random input', () => {
    const mismatches = drawn.filter(({ randomInput, prizeId }) => {
      const choice = chooseWeighted(WEIGHTS, 0, randomInput);
      return choice.kind !== 'chosen' || prizeId !== (choice.index === null ? null : prizeIds[choice.index]);
    });
    expect(mismatches).toEqual([]);
  });

  it('fails the same check for deliberately biased choosers fed the same random inputs, so the check can fail', () => {
    const total = WEIGHTS.reduce((a, b) => a + b, 0);
    const probabilities = expectedProbabilities(WEIGHTS, 0).slice(0, -1);
    // One random number reused across the loop, compared with each weight instead of the cumulative sums.
    const withoutCumulativeSums = drawn.map(({ randomInput }) => {
      const r = randomInput % total;
      const index = WEIGHTS.findIndex((weight) => r < weight);
      return index < 0 ? null : prizeIds[index]!;
    });
    // Modulo bias: a one-byte random number reduced modulo the total.
    const moduloBias = drawn.map(({ randomInput }) => {
      const r = (randomInput % 256) % total;
      let cumulative = 0;
      return prizeIds[
        WEIGHTS.findIndex((weight) => {
          cumulative += weight;
          return r < cumulative;
        })
      ]!;
    });
    for (const [name, outcomes] of [
      ['without cumulative sums', withoutCumulativeSums],
      ['with modulo bias', moduloBias],
    ] as const) {
      const counts = tally(prizeIds, outcomes);
      const { pValue } = chiSquareTest(counts.slice(0, -1).concat(counts.at(-1)!), [...probabilities, 0]);
      expect(pValue, `${name}: counts ${counts.join(', ')}`).toBeLessThan(P_THRESHOLD);
    }
  });
});

describe('the probability is weight / (sum of available weights + noPrizeWeight)', () => {
  it('leaves an exhausted prize out and renormalizes over the rest, no-prize weight included', async () => {
    // The 60-weight prize has 0 stock; 50 of 90 weight is left to the no-prize outcome.
    const weights = [10, 30, 60];
    const { id, settings } = await activity(weights, 50, (i) => (i === 2 ? 0 : 10_000_000));
    const outcomes = (await drawMany(id, 30_000)).map((draw) => draw.prizeId);
    const counts = tally(
      settings.prizes.map((prize) => prize.id),
      outcomes,
    );
    expect(counts[2], 'the exhausted prize').toBe(0);
    const { pValue, statistic } = chiSquareTest([counts[0]!, counts[1]!, counts[3]!], [10 / 90, 30 / 90, 50 / 90]);
    expect(pValue, `chi-square ${statistic.toFixed(2)} over ${counts.join(', ')}`).toBeGreaterThan(P_THRESHOLD);
  });

  it('stops choosing a prize the moment its stock runs out, and never oversells it', async () => {
    const { id, settings } = await activity([50, 50], 0, (i) => (i === 0 ? 100 : 10_000_000));
    const outcomes = (await drawMany(id, 2_000)).map((draw) => draw.prizeId);
    expect(outcomes.filter((outcome) => outcome === settings.prizes[0]!.id)).toHaveLength(100);
    expect(await redis.hget(lotteryKeys(id).stock, settings.prizes[0]!.id)).toBe('0');
  });

  it('rejects a random input from the biased top of the range before changing anything', async () => {
    const { id } = await activity(WEIGHTS, 7, () => 1_000);
    const keys = lotteryKeys(id);
    const before = await Promise.all([redis.hgetall(keys.stock), redis.hgetall(keys.daily), redis.xlen(keys.journal)]);
    // The total is 107, which does not divide 2^48 - 1: the last (range mod 107) inputs are rejected.
    const lastAccepted = DRAW_RANDOM_RANGE - (DRAW_RANDOM_RANGE % 107) - 1;
    const attempt = (randomInput: number): Promise<DrawReply> => store.draw({ activityId: id, userId: 'edge', drawId: randomUUID(), requestId: null, randomInput, clockOffsetMs: 0 });
    expect((await attempt(lastAccepted + 1)).kind).toBe('reroll');
    expect((await attempt(DRAW_RANDOM_RANGE - 1)).kind).toBe('reroll');
    expect(await Promise.all([redis.hgetall(keys.stock), redis.hgetall(keys.daily), redis.xlen(keys.journal)])).toEqual(before);
    expect((await attempt(lastAccepted)).kind).toBe('drawn');
    expect(chooseWeighted(WEIGHTS, 7, lastAccepted + 1)).toEqual({ kind: 'reroll' });
  });
});
