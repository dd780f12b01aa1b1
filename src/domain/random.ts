import { randomInt } from 'node:crypto';

/**
 * The randomness the domain uses, injectable so tests can replay it. The default
 * is Node's crypto: `randomInt` is uniform without modulo bias.
 */
export interface RandomSource {
  /** Uniform integer in [min, max). */
  int(min: number, max: number): number;
  /** Uniform float in [0, 1) with 47 bits of precision. */
  unit(): number;
}

// randomInt accepts ranges below 2^48.
const UNIT_RESOLUTION = 2 ** 47;

export const cryptoRandom: RandomSource = {
  int: (min, max) => randomInt(min, max),
  unit: () => randomInt(0, UNIT_RESOLUTION) / UNIT_RESOLUTION,
};

/** Fisher-Yates, in place. */
export function shuffle<T>(items: T[], random: RandomSource): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = random.int(0, i + 1);
    [items[i], items[j]] = [items[j]!, items[i]!];
  }
  return items;
}
