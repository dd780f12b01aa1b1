import { type RandomSource, cryptoRandom, shuffle } from '../random.ts';

export type SplitMode = 'RANDOM' | 'NORMAL' | 'EQUAL';

export interface SplitSpec {
  totalAmount: number;
  count: number;
  minAmount: number;
  maxAmount: number;
  mode: SplitMode;
}

export const SPLIT_LIMITS = { maxCount: 10_000, maxTotalAmount: 100_000_000 } as const;

/** Why a spec cannot be split (the bound that count shares of it miss the total by), or null when it can. */
export function splitProblem({ totalAmount, count, minAmount, maxAmount }: SplitSpec): { bound: 'min' | 'max'; product: number; total: number } | null {
  if (count * minAmount > totalAmount) return { bound: 'min', product: count * minAmount, total: totalAmount };
  if (count * maxAmount < totalAmount) return { bound: 'max', product: count * maxAmount, total: totalAmount };
  return null;
}

/** The largest share any split of this spec may hand out, used when maxAmount is not given. */
export function widestMaxAmount(totalAmount: number, count: number, minAmount: number): number {
  return totalAmount - (count - 1) * minAmount;
}

/**
 * Splits `totalAmount` into exactly `count` shares in [minAmount, maxAmount] that sum
 * to `totalAmount`, in shuffled order. The spec must be feasible (see splitProblem).
 */
export function splitAmount(spec: SplitSpec, random: RandomSource = cryptoRandom): number[] {
  const problem = splitProblem(spec);
  if (problem) throw new RangeError(`count × ${problem.bound}Amount (${problem.product}) misses totalAmount (${problem.total})`);
  const shares = spec.mode === 'RANDOM' ? doubleAverage(spec, random) : spec.mode === 'NORMAL' ? bellShaped(spec, random) : equal(spec);
  return shuffle(shares, random);
}

/**
 * WeChat's "double average": each share is uniform in [min, 2 × the remaining mean],
 * narrowed only as far as needed for the shares still to come to stay feasible.
 */
function doubleAverage({ totalAmount, count, minAmount, maxAmount }: SplitSpec, random: RandomSource): number[] {
  const shares: number[] = [];
  let remaining = totalAmount;
  for (let left = count; left > 1; left--) {
    const low = Math.max(minAmount, remaining - (left - 1) * maxAmount);
    const high = Math.min(maxAmount, Math.floor((2 * remaining) / left), remaining - (left - 1) * minAmount);
    const share = random.int(low, high + 1);
    shares.push(share);
    remaining -= share;
  }
  shares.push(remaining);
  return shares;
}

/**
 * Bell-shaped around the mean. Shares start equal; then, pair by pair, an amount d
 * moves from one share to the other. d = D − √u with u uniform in [0, D²] (square the
 * range, draw, take the root) has a density that falls linearly from 0 to D, so most
 * shares stay near the mean and few reach the bounds. Moving amounts between pairs
 * keeps the sum exact.
 */
function bellShaped(spec: SplitSpec, random: RandomSource): number[] {
  const { minAmount, maxAmount } = spec;
  const shares = equal(spec);
  shuffle(shares, random);
  for (let i = 0; i + 1 < shares.length; i += 2) {
    const a = shares[i]!;
    const b = shares[i + 1]!;
    // a gains d and b loses d: both must stay inside the bounds.
    const reach = Math.min(maxAmount - a, b - minAmount, a - minAmount, maxAmount - b);
    if (reach <= 0) continue;
    const magnitude = Math.min(reach, Math.floor(reach + 1 - Math.sqrt(random.unit() * (reach + 1) ** 2)));
    const d = random.int(0, 2) === 0 ? magnitude : -magnitude;
    shares[i] = a + d;
    shares[i + 1] = b - d;
  }
  return shares;
}

/** Equal shares; the cents that do not divide evenly go one each to the first shares. */
function equal({ totalAmount, count }: SplitSpec): number[] {
  const base = Math.floor(totalAmount / count);
  const extra = totalAmount - base * count;
  return Array.from({ length: count }, (_, i) => base + (i < extra ? 1 : 0));
}
