import { randomUUID } from 'node:crypto';
import { type RuleInputIssue, ruleInputIssue } from '../../i18n/issues.ts';
import type { InputRule, RuleValues } from '../../i18n/messages.ts';
import type { CreateLotteryInput, UpdateLotteryInput } from './input.ts';
import { LOTTERY_LIMITS, type LotterySettings, lotteryRetainUntil, settingsIssues } from './settings.ts';
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
    soldOutOdds: input.soldOutOdds,
    dailyDrawLimit: input.dailyDrawLimit,
    dailyWinLimit: input.dailyWinLimit,
    drawCostPoints: input.drawCostPoints,
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

export type SettingsChange = { kind: 'changed'; settings: LotterySettings; topUps: Map<string, number> } | { kind: 'unchanged' } | { kind: 'invalid'; issues: RuleInputIssue[] };

/**
 * The next version of an activity's settings with an operator's change applied, and the
 * stock to add per prize; or why the change does not fit this activity at `nowMs`.
 */
export function changeSettings(current: LotterySettings, input: UpdateLotteryInput, nowMs: number): SettingsChange {
  const issues: RuleInputIssue[] = [];
  const weighted = current.strategy === 'WEIGHTED';
  const onlyFor = (applies: boolean, path: (string | number)[], rule: InputRule, values?: RuleValues) => {
    if (!applies) issues.push(ruleInputIssue(path, rule, values));
  };
  onlyFor(weighted || input.noPrizeWeight == null, ['noPrizeWeight'], 'ONLY_WEIGHTED', { field: 'noPrizeWeight' });
  // Subscribers of an ended activity were told it ended; a TIMED one would also release
  // every hour since its end at once. Nothing else of it changes either.
  const ended = current.endsAtMs <= nowMs;
  onlyFor(input.endsAt == null || !ended, ['endsAt'], 'ENDED_STAYS_ENDED');
  for (const field of ['paused', 'noPrizeWeight', 'soldOutOdds', 'dailyDrawLimit', 'dailyWinLimit', 'prizes'] as const) onlyFor(input[field] == null || !ended, [field], 'ENDED_NO_CHANGE');

  const topUps = new Map<string, number>();
  const prizes = current.prizes.map((prize) => ({ ...prize }));
  (input.prizes ?? []).forEach((change, i) => {
    const prize = prizes.find((candidate) => candidate.id === change.prizeId);
    if (!prize) {
      issues.push(ruleInputIssue(['prizes', i, 'prizeId'], 'UNKNOWN_PRIZE', { prizeId: change.prizeId }));
      return;
    }
    onlyFor(weighted || change.weight == null, ['prizes', i, 'weight'], 'ONLY_WEIGHTED', { field: 'weight' });
    onlyFor(weighted || change.dailyStock == null, ['prizes', i, 'dailyStock'], 'ONLY_WEIGHTED', { field: 'dailyStock' });
    onlyFor(weighted || !change.clearDailyStock, ['prizes', i, 'clearDailyStock'], 'ONLY_WEIGHTED', { field: 'clearDailyStock' });
    onlyFor(change.hourlyQuota == null || prize.hourlyQuota.length === 24, ['prizes', i, 'hourlyQuota'], 'HOURLY_QUOTA_ONLY_SCHEDULED');
    if (change.weight != null) prize.weight = change.weight;
    if (change.dailyStock != null) prize.dailyStock = change.dailyStock;
    if (change.clearDailyStock) prize.dailyStock = 0;
    if (change.hourlyQuota != null) prize.hourlyQuota = change.hourlyQuota;
    if (change.addStock != null) {
      prize.totalStock += change.addStock;
      topUps.set(prize.id, change.addStock);
      onlyFor(prize.totalStock <= LOTTERY_LIMITS.maxStock, ['prizes', i, 'addStock'], 'TOTAL_STOCK_TOO_BIG', { max: LOTTERY_LIMITS.maxStock });
    }
  });

  // An end already past ends the activity now: recorded as given, it would date every draw
  // made since then after the end. One before the start is refused below.
  const givenEndMs = input.endsAt?.getTime() ?? current.endsAtMs;
  const endsAtMs = givenEndMs > current.startsAtMs ? Math.max(givenEndMs, nowMs) : givenEndMs;
  const changed = {
    ...current,
    version: current.version + 1,
    endsAtMs,
    retainUntilMs: Math.max(current.retainUntilMs, lotteryRetainUntil(endsAtMs)),
    paused: input.paused ?? current.paused,
    noPrizeWeight: input.noPrizeWeight ?? current.noPrizeWeight,
    soldOutOdds: input.soldOutOdds ?? current.soldOutOdds,
    dailyDrawLimit: input.dailyDrawLimit ?? current.dailyDrawLimit,
    dailyWinLimit: input.dailyWinLimit ?? current.dailyWinLimit,
    prizes,
  };
  // Checked before the offset table is built: it samples the timezone every few hours up
  // to endsAt, which for an end millennia away would hold the event loop for minutes.
  issues.push(...settingsIssues(changed));
  // Paths from the mutation's arguments, as the input schemas' issues have them.
  if (issues.length > 0) return { kind: 'invalid', issues: issues.map((issue) => ({ ...issue, path: ['input', ...(issue.path ?? [])] })) };
  // A change to what is already so makes no new version (and tells no subscriber anything).
  if (topUps.size === 0 && JSON.stringify({ ...changed, version: current.version, retainUntilMs: current.retainUntilMs }) === JSON.stringify(current)) return { kind: 'unchanged' };
  const utcOffsets = endsAtMs === current.endsAtMs ? current.utcOffsets : utcOffsetTable(current.timezone, current.startsAtMs, endsAtMs);
  return { kind: 'changed', settings: { ...changed, utcOffsets }, topUps };
}
