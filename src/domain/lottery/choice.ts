import { DRAW_RANDOM_RANGE, type LotterySettings } from './settings.ts';

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

/**
 * A journaled WEIGHTED draw replayed against the settings it was drawn with: the prizes of
 * its pool (positions in `settings.prizes`), and the choice they make of `u`.
 */
export function replayWeightedDraw(settings: Pick<LotterySettings, 'prizes' | 'noPrizeWeight' | 'soldOutOdds'>, pool: number[], u: number) {
  const prizes = pool.map((position) => settings.prizes[position]);
  // NO_PRIZE: the weights of the prizes left out of the pool (sold out) lose, as noPrizeWeight does.
  const soldOutWeight = settings.soldOutOdds === 'NO_PRIZE' ? settings.prizes.reduce((sum, prize, position) => (pool.includes(position) ? sum : sum + prize.weight), 0) : 0;
  const choice = chooseWeighted(
    prizes.map((prize) => prize?.weight ?? 0),
    settings.noPrizeWeight + soldOutWeight,
    u,
  );
  return { prizes, choice };
}
