import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type SplitMode, type SplitSpec, splitAmount, splitProblem, widestMaxAmount } from '../src/domain/redPackets/split.ts';

const MODES: SplitMode[] = ['RANDOM', 'NORMAL', 'EQUAL'];

/** Feasible specs across the whole allowed range, with and without an explicit maxAmount. */
const feasibleSpec = fc
  .record({
    count: fc.integer({ min: 1, max: 2_000 }),
    minAmount: fc.integer({ min: 1, max: 500 }),
    mode: fc.constantFrom(...MODES),
    extra: fc.integer({ min: 0, max: 1_000_000 }),
    maxSlack: fc.option(fc.integer({ min: 0, max: 5_000 }), { nil: undefined }),
  })
  .map(({ count, minAmount, mode, extra, maxSlack }): SplitSpec => {
    const totalAmount = count * minAmount + extra;
    const mean = Math.ceil(totalAmount / count);
    const maxAmount = maxSlack === undefined ? widestMaxAmount(totalAmount, count, minAmount) : Math.max(minAmount, mean + maxSlack);
    return { count, minAmount, mode, totalAmount, maxAmount };
  });

function stats(values: number[]) {
  const mean = values.reduce((a, b) => a + b, 0) / values.length;
  const variance = values.reduce((sum, value) => sum + (value - mean) ** 2, 0) / values.length;
  return { mean, sd: Math.sqrt(variance) };
}

describe('splitting a red packet', () => {
  it('gives exactly count shares that sum to the total, each within [min, max], in every mode', () => {
    fc.assert(
      fc.property(feasibleSpec, (spec) => {
        const shares = splitAmount(spec);
        expect(shares).toHaveLength(spec.count);
        expect(shares.reduce((a, b) => a + b, 0)).toBe(spec.totalAmount);
        // One assertion for all shares: three per share made this the suite's slowest pure test.
        expect(shares.filter((share) => !Number.isInteger(share) || share < spec.minAmount || share > spec.maxAmount)).toEqual([]);
      }),
      { numRuns: 300 },
    );
  });

  it('refuses impossible specs', () => {
    fc.assert(
      fc.property(fc.integer({ min: 2, max: 1000 }), fc.integer({ min: 1, max: 100 }), fc.constantFrom(...MODES), (count, minAmount, mode) => {
        const spec = { count, minAmount, mode, totalAmount: count * minAmount - 1, maxAmount: count * minAmount };
        expect(splitProblem(spec)).not.toBeNull();
        expect(() => splitAmount(spec)).toThrow(RangeError);
      }),
    );
    expect(splitProblem({ count: 3, minAmount: 1, maxAmount: 10, totalAmount: 31, mode: 'RANDOM' })).toEqual({ bound: 'max', product: 30, total: 31 });
  });

  it('EQUAL differs by at most one cent between shares', () => {
    fc.assert(
      fc.property(feasibleSpec, (spec) => {
        const shares = splitAmount({ ...spec, mode: 'EQUAL', maxAmount: widestMaxAmount(spec.totalAmount, spec.count, spec.minAmount) });
        expect(Math.max(...shares) - Math.min(...shares)).toBeLessThanOrEqual(1);
      }),
      { numRuns: 200 },
    );
  });

  it('shuffles: the share handed out first has the overall mean on average, in every mode', () => {
    for (const mode of MODES) {
      const firsts = Array.from({ length: 4000 }, () => splitAmount({ totalAmount: 10_000, count: 10, minAmount: 1, maxAmount: 9_991, mode })[0]!);
      // Mean 1000; the standard error is at most ~20 for these spreads.
      expect(Math.abs(stats(firsts).mean - 1000), mode).toBeLessThan(80);
    }
  });

  it('RANDOM keeps every share below twice the mean of what remained when it was cut', () => {
    // With a generous total and min 1, "double average" bounds the first cut by 2 × mean.
    for (let run = 0; run < 500; run++) {
      const shares = splitAmount({ totalAmount: 10_000, count: 10, minAmount: 1, maxAmount: 9_991, mode: 'RANDOM' });
      expect(Math.max(...shares)).toBeLessThanOrEqual(10_000 - 9);
    }
    const all = Array.from({ length: 2000 }, () => splitAmount({ totalAmount: 100_000, count: 100, minAmount: 1, maxAmount: 99_901, mode: 'RANDOM' })).flat();
    const { mean, sd } = stats(all);
    expect(mean).toBe(1000);
    // Uniform on [1, 2 × mean] has sd ≈ mean / √3 ≈ 577; later cuts narrow a little.
    expect(sd).toBeGreaterThan(400);
    expect(sd).toBeLessThan(800);
  });

  it('NORMAL is bell-shaped: concentrated around the mean, tighter than RANDOM, symmetric', () => {
    const spec = { totalAmount: 100_000, count: 100, minAmount: 1, maxAmount: 99_901 };
    const normal = Array.from({ length: 1000 }, () => splitAmount({ ...spec, mode: 'NORMAL' })).flat();
    const random = Array.from({ length: 1000 }, () => splitAmount({ ...spec, mode: 'RANDOM' })).flat();
    const n = stats(normal);
    expect(n.mean).toBe(1000);
    expect(n.sd).toBeLessThan(stats(random).sd);
    // A triangular density around the mean: about 1 - (1 - 1/2)^2 = 75% of the moves fall within half the reach.
    const near = normal.filter((share) => Math.abs(share - 1000) <= 500).length / normal.length;
    expect(near).toBeGreaterThan(0.7);
    const above = normal.filter((share) => share > 1000).length;
    const below = normal.filter((share) => share < 1000).length;
    expect(Math.abs(above - below) / normal.length).toBeLessThan(0.03);
  });
});
