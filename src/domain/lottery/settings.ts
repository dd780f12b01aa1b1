import { type RuleInputIssue, ruleInputIssue } from '../../i18n/issues.ts';
import type { InputRule, RuleValues } from '../../i18n/messages.ts';
import { retainUntil } from '../../infra/redis/keys.ts';
import type { CampaignStatus } from '../campaignStatus.ts';
import type { UtcOffsets } from './timezone.ts';

export type LotteryStrategy = 'WEIGHTED' | 'TIMED';
export type PrizeKind = 'GOODS' | 'POINTS' | 'CONSOLATION';

export const LOTTERY_LIMITS = {
  maxPrizes: 20,
  /** Per prize and for noPrizeWeight; keeps every weight total far below the random range. */
  maxWeight: 1_000_000,
  maxStock: 10_000_000,
  maxHourlyQuota: 10_000,
  maxDailyLimit: 10_000,
  maxPoints: 1_000_000,
  maxDrawCostPoints: 1_000_000,
  maxTitleLength: 64,
  maxDurationMs: 400 * 24 * 3600 * 1000,
  maxRecentWins: 50,
} as const;

/**
 * The range of the random input of a WEIGHTED draw: a uniform integer in [0, 2^48 - 1),
 * the widest range crypto.randomInt allows. The script reduces it to the weight total
 * with rejection (lua/drawLottery.lua explains why that is exact).
 */
export const DRAW_RANDOM_RANGE = 2 ** 48 - 1;

/** Release instants inside an hour are chosen with this resolution (random integers in [0, 2^30)). */
export const RELEASE_RANDOM_RANGE = 2 ** 30;

/** Keys stay this long after the end; a later read rebuilds them from PostgreSQL. */
const RETENTION_AFTER_END_MS = 7 * 24 * 3600 * 1000;

/**
 * One prize as the scripts read it. No nulls (Lua's cjson turns them into userdata):
 * 0 means "none" for points and dailyStock, [] for hourlyQuota.
 */
export interface PrizeSettings {
  id: string;
  title: string;
  kind: PrizeKind;
  points: number;
  weight: number;
  totalStock: number;
  dailyStock: number;
  hourlyQuota: number[];
}

/**
 * Everything a draw or a schedule depends on, as one JSON value in the activity's meta
 * hash. An operator's change replaces it whole in one script, so a draw sees either
 * every old setting or every new one; `version` goes up by one with each change and is
 * stored with every draw. The same JSON is kept per version in lottery_settings.
 */
export interface LotterySettings {
  version: number;
  title: string;
  strategy: LotteryStrategy;
  startsAtMs: number;
  endsAtMs: number;
  retainUntilMs: number;
  paused: boolean;
  noPrizeWeight: number;
  /** WEIGHTED; absent (before the option existed): SHARED. */
  soldOutOdds?: SoldOutOdds;
  dailyDrawLimit: number;
  dailyWinLimit: number;
  /** Points each draw costs, reserved before the draw; 0 (or absent, before paid draws existed) = free. */
  drawCostPoints?: number;
  timezone: string;
  /** The timezone's UTC offsets over the activity's window, so scripts find local days from Redis time. */
  utcOffsets: UtcOffsets;
  prizes: PrizeSettings[];
}

/** Lottery keys stay a week after the end: winners and audits are looked up for longer than a packet. */
export function lotteryRetainUntil(endsAtMs: number): number {
  return retainUntil(endsAtMs, RETENTION_AFTER_END_MS);
}

export type LotteryStatus = CampaignStatus;

/**
 * What the weight of a WEIGHTED prize out of stock (or over its daily stock) does. SHARED:
 * it leaves the pool, so the prizes left share its chance. NO_PRIZE: it stays, and a roll
 * landing on it loses, so every prize keeps the chance it was given: a rare grand prize
 * does not become likely once the common prizes run out.
 */
export const SOLD_OUT_ODDS = ['SHARED', 'NO_PRIZE'] as const;
export type SoldOutOdds = (typeof SOLD_OUT_ODDS)[number];

type CheckedSettings = Pick<LotterySettings, 'strategy' | 'startsAtMs' | 'endsAtMs' | 'noPrizeWeight' | 'soldOutOdds' | 'drawCostPoints'> & {
  prizes: Pick<PrizeSettings, 'kind' | 'points' | 'weight' | 'dailyStock' | 'hourlyQuota'>[];
};

/**
 * The rules that span fields, for a new activity and for one changed by an operator.
 * (Each field's own bounds are checked by the input schemas.)
 */
export function settingsIssues(settings: CheckedSettings): RuleInputIssue[] {
  const issues: RuleInputIssue[] = [];
  const issue = (path: (string | number)[], rule: InputRule, values?: RuleValues) => issues.push(ruleInputIssue(path, rule, values));
  if (settings.endsAtMs <= settings.startsAtMs) issue(['endsAt'], 'ENDS_BEFORE_STARTS');
  else if (settings.endsAtMs - settings.startsAtMs > LOTTERY_LIMITS.maxDurationMs) issue(['endsAt'], 'ACTIVITY_TOO_LONG', { days: LOTTERY_LIMITS.maxDurationMs / 86_400_000 });
  settings.prizes.forEach((prize, i) => {
    if (prize.kind === 'POINTS' && prize.points === 0) issue(['prizes', i, 'points'], 'POINTS_PRIZE_NEEDS_POINTS');
    if (prize.kind !== 'POINTS' && prize.points !== 0) issue(['prizes', i, 'points'], 'POINTS_ONLY_ON_POINTS_PRIZE');
  });
  if (settings.strategy === 'WEIGHTED') {
    settings.prizes.forEach((prize, i) => {
      if (prize.hourlyQuota.length > 0) issue(['prizes', i, 'hourlyQuota'], 'HOURLY_QUOTA_ONLY_TIMED');
    });
    const prizeWeight = settings.prizes.reduce((sum, prize) => sum + prize.weight, 0);
    if (settings.noPrizeWeight + prizeWeight === 0) issue(['prizes'], 'NO_POSITIVE_WEIGHT');
    // Every paid draw would take points and lose: an operator's slip, not a lottery.
    else if (prizeWeight === 0 && (settings.drawCostPoints ?? 0) > 0) issue(['prizes'], 'PAID_DRAW_CANNOT_WIN');
  } else {
    if (settings.noPrizeWeight !== 0) issue(['noPrizeWeight'], 'TIMED_NO_PRIZE_WEIGHT');
    if (settings.soldOutOdds === 'NO_PRIZE') issue(['soldOutOdds'], 'ONLY_WEIGHTED', { field: 'soldOutOdds' });
    const consolations = settings.prizes.filter((prize) => prize.kind === 'CONSOLATION' && prize.hourlyQuota.length === 0);
    if (consolations.length !== 1) issue(['prizes'], 'TIMED_ONE_CONSOLATION');
    settings.prizes.forEach((prize, i) => {
      if (prize.weight !== 0) issue(['prizes', i, 'weight'], 'TIMED_RELEASED_BY_QUOTA', { field: 'weight' });
      if (prize.dailyStock !== 0) issue(['prizes', i, 'dailyStock'], 'TIMED_RELEASED_BY_QUOTA', { field: 'dailyStock' });
      if (prize.kind !== 'CONSOLATION' && prize.hourlyQuota.length === 0) issue(['prizes', i, 'hourlyQuota'], 'TIMED_PRIZE_NEEDS_QUOTA');
    });
  }
  return issues;
}
