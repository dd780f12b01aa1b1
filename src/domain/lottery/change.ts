import { randomUUID } from 'node:crypto';
import type { CreateLotteryInput, UpdateLotteryInput } from './input.ts';
import { LOTTERY_LIMITS, type LotterySettings, type SettingsIssue, lotteryRetainUntil, settingsIssues } from './settings.ts';
import { utcOffsetTable } from './timezone.ts';

/** Version 1 of a new activity's settings: not paused, every prize given a fresh id. */
export function firstSettings(input: CreateLotteryInput): LotterySettings {
  const startsAtMs = input.startsAt.getTime();
  const endsAtMs = input.endsAt.getTime();
  return {
    version: 1,
    title: input.title,
    strategy: input.strategy,
    startsAtMs,
    endsAtMs,
    retainUntilMs: lotteryRetainUntil(endsAtMs),
    paused: false,
    noPrizeWeight: input.noPrizeWeight,
    dailyDrawLimit: input.dailyDrawLimit,
    dailyWinLimit: input.dailyWinLimit,
    timezone: input.timezone,
    utcOffsets: utcOffsetTable(input.timezone, startsAtMs, endsAtMs),
    prizes: input.prizes.map((prize) => ({
      id: randomUUID(),
      title: prize.title,
      kind: prize.kind,
      points: prize.points ?? 0,
      weight: prize.weight,
      totalStock: prize.totalStock,
      dailyStock: prize.dailyStock ?? 0,
      hourlyQuota: prize.hourlyQuota ?? [],
    })),
  };
}

export type SettingsChange = { kind: 'changed'; settings: LotterySettings; topUps: Map<string, number> } | { kind: 'invalid'; issues: SettingsIssue[] };

/**
 * The next version of an activity's settings with an operator's change applied, and the
 * stock to add per prize; or why the change does not fit this activity.
 */
export function changeSettings(current: LotterySettings, input: UpdateLotteryInput): SettingsChange {
  const issues: SettingsIssue[] = [];
  const weighted = current.strategy === 'WEIGHTED';
  const onlyFor = (applies: boolean, path: (string | number)[], message: string) => {
    if (!applies) issues.push({ path, message });
  };
  onlyFor(weighted || input.noPrizeWeight == null, ['noPrizeWeight'], 'noPrizeWeight is for WEIGHTED activities');

  const topUps = new Map<string, number>();
  const prizes = current.prizes.map((prize) => ({ ...prize }));
  (input.prizes ?? []).forEach((change, i) => {
    const prize = prizes.find((candidate) => candidate.id === change.prizeId);
    if (!prize) {
      issues.push({ path: ['prizes', i, 'prizeId'], message: `prize ${change.prizeId} is not in this activity` });
      return;
    }
    onlyFor(weighted || change.weight == null, ['prizes', i, 'weight'], 'weight is for WEIGHTED activities');
    onlyFor(weighted || change.dailyStock == null, ['prizes', i, 'dailyStock'], 'dailyStock is for WEIGHTED activities');
    onlyFor(change.hourlyQuota == null || prize.hourlyQuota.length === 24, ['prizes', i, 'hourlyQuota'], 'hourlyQuota is for the scheduled prizes of TIMED activities');
    if (change.weight != null) prize.weight = change.weight;
    if (change.dailyStock != null) prize.dailyStock = change.dailyStock;
    if (change.hourlyQuota != null) prize.hourlyQuota = change.hourlyQuota;
    if (change.addStock != null) {
      prize.totalStock += change.addStock;
      topUps.set(prize.id, change.addStock);
      onlyFor(prize.totalStock <= LOTTERY_LIMITS.maxStock, ['prizes', i, 'addStock'], `a prize's totalStock is at most ${LOTTERY_LIMITS.maxStock}`);
    }
  });

  const endsAtMs = input.endsAt?.getTime() ?? current.endsAtMs;
  const settings: LotterySettings = {
    ...current,
    version: current.version + 1,
    endsAtMs,
    retainUntilMs: Math.max(current.retainUntilMs, lotteryRetainUntil(endsAtMs)),
    paused: input.paused ?? current.paused,
    noPrizeWeight: input.noPrizeWeight ?? current.noPrizeWeight,
    dailyDrawLimit: input.dailyDrawLimit ?? current.dailyDrawLimit,
    dailyWinLimit: input.dailyWinLimit ?? current.dailyWinLimit,
    utcOffsets: endsAtMs === current.endsAtMs ? current.utcOffsets : utcOffsetTable(current.timezone, current.startsAtMs, endsAtMs),
    prizes,
  };
  issues.push(...settingsIssues(settings));
  return issues.length > 0 ? { kind: 'invalid', issues } : { kind: 'changed', settings, topUps };
}
