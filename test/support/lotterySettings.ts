import type { LotterySettings } from '../../src/domain/lottery/settings.ts';
import { type LotteryStore, emptySnapshot } from '../../src/domain/lottery/store.ts';

/** A running WEIGHTED activity's settings, for writing straight to Redis (no PostgreSQL row). */
export function weightedSettings(weights: number[], noPrizeWeight: number, stockOf: (i: number) => number): LotterySettings {
  const now = Date.now();
  return {
    version: 1,
    title: 'weighted',
    strategy: 'WEIGHTED',
    startsAtMs: now - 60_000,
    endsAtMs: now + 3_600_000,
    retainUntilMs: now + 7_200_000,
    paused: false,
    noPrizeWeight,
    dailyDrawLimit: 0,
    dailyWinLimit: 0,
    timezone: 'Asia/Shanghai',
    utcOffsets: [[0, 480]],
    prizes: weights.map((weight, i) => ({ id: `prize-${i}`, title: `prize ${i}`, kind: 'GOODS', points: 0, weight, totalStock: stockOf(i), dailyStock: 0, hourlyQuota: [] })),
  };
}

/** Writes a fresh activity's keys, as creating it would. */
export function writeActivity(store: LotteryStore, activityId: string, settings: LotterySettings): Promise<void> {
  return store.write(emptySnapshot(activityId, settings, 0));
}
