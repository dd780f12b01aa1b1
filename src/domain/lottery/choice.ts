import { DRAW_RANDOM_RANGE } from './settings.ts';

export type WeightedChoice =
  /** `u` fell in the top sliver of the range that a reduction modulo the total would bias; draw a new one. */
  | { kind: 'reroll' }
  /** `index` into the weights, or null for no prize. `roll` is null when nothing could be won. */
  | { kind: 'chosen'; total: number; roll: number | null; index: number | null };

/**
 * The WEIGHTED choice exactly as lua/drawLottery.lua makes it, for auditing and replaying
 * a journaled draw: `weights` are those of the prizes that were available (the draw's
 * `pool`, in order), `u` the random input stored with it.
 */
export function chooseWeighted(weights: number[], noPrizeWeight: number, u: number, range = DRAW_RANDOM_RANGE): WeightedChoice {
  const total = weights.reduce((sum, weight) => sum + weight, 0) + noPrizeWeight;
  if (weights.length === 0 || total === 0) return { kind: 'chosen', total, roll: null, index: null };
  if (u >= range - (range % total)) return { kind: 'reroll' };
  const roll = u % total;
  let cumulative = 0;
  for (let i = 0; i < weights.length; i++) {
    cumulative += weights[i]!;
    if (roll < cumulative) return { kind: 'chosen', total, roll, index: i };
  }
  return { kind: 'chosen', total, roll, index: null };
}
