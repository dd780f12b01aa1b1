import { z } from 'zod';
import { requireAChange, ruleIssue } from '../../i18n/issues.ts';
import { requestId } from '../ids.ts';
import { showsSomething } from '../text.ts';
import { LOTTERY_LIMITS as L, SOLD_OUT_ODDS, settingsIssues } from './settings.ts';
import { canonicalTimezone } from './timezone.ts';

const title = z
  .string()
  .trim()
  .min(1)
  .max(L.maxTitleLength)
  .refine(...showsSomething('title'));
const weight = z.number().int().min(0, 'weights must not be negative').max(L.maxWeight);
const dailyLimit = z.number().int().min(0).max(L.maxDailyLimit);
const hourlyQuota = z.array(z.number().int().min(0).max(L.maxHourlyQuota)).length(24, 'hourlyQuota has one number per hour of the day (24)');
const dailyStock = z.number().int().min(1).max(L.maxStock);

const prizeInput = z.object({
  title,
  kind: z.enum(['GOODS', 'POINTS', 'CONSOLATION']),
  points: z.number().int().min(1).max(L.maxPoints).nullish(),
  weight,
  totalStock: z.number().int().min(0).max(L.maxStock),
  dailyStock: dailyStock.nullish(),
  hourlyQuota: hourlyQuota.nullish(),
});

/** createLotteryInput's input, checked as a whole: every bound, and the rules of its strategy. */
export const createLotteryInput = z
  .object({
    title,
    startsAt: z.date(),
    endsAt: z.date(),
    strategy: z.enum(['WEIGHTED', 'TIMED']),
    noPrizeWeight: weight,
    soldOutOdds: z.enum(SOLD_OUT_ODDS).default('SHARED'),
    dailyDrawLimit: dailyLimit,
    dailyWinLimit: dailyLimit,
    drawCostPoints: z.number().int().min(0, 'drawCostPoints must not be negative').max(L.maxDrawCostPoints).default(0),
    timezone: z
      .string()
      .max(64)
      .transform((name, ctx) => {
        const canonical = canonicalTimezone(name);
        if (canonical === undefined) ctx.addIssue(ruleIssue('UNKNOWN_TIMEZONE'));
        return canonical ?? z.NEVER;
      }),
    prizes: z.array(prizeInput).min(1, 'an activity needs at least one prize').max(L.maxPrizes),
    requestId: requestId.nullish(),
  })
  .superRefine((input, ctx) => {
    const issues = settingsIssues({
      strategy: input.strategy,
      startsAtMs: input.startsAt.getTime(),
      endsAtMs: input.endsAt.getTime(),
      noPrizeWeight: input.noPrizeWeight,
      soldOutOdds: input.soldOutOdds,
      drawCostPoints: input.drawCostPoints,
      prizes: input.prizes.map((prize) => ({
        kind: prize.kind,
        points: prize.points ?? 0,
        weight: prize.weight,
        dailyStock: prize.dailyStock ?? 0,
        hourlyQuota: prize.hourlyQuota ?? [],
      })),
    });
    for (const { path, code, values } of issues) ctx.addIssue({ ...ruleIssue(code, values), path });
  });

export type CreateLotteryInput = z.infer<typeof createLotteryInput>;

const prizeUpdate = z
  .object({
    prizeId: z.string().min(1).max(64),
    weight: weight.nullish(),
    addStock: z.number().int().min(1, 'addStock must be positive').max(L.maxStock).nullish(),
    // The create's bounds: 0 read as "none" let an operator who meant "no more today" lift the cap.
    dailyStock: dailyStock.nullish(),
    clearDailyStock: z.boolean().nullish(),
    hourlyQuota: hourlyQuota.nullish(),
  })
  .superRefine((prize, ctx) => {
    if (prize.clearDailyStock && prize.dailyStock != null) ctx.addIssue({ ...ruleIssue('SET_AND_CLEARED', { field: 'dailyStock' }), path: ['clearDailyStock'] });
  });

/**
 * An operator's change. Each field's bounds are checked here; the rules that depend on
 * the activity (endsAt after startsAt, which fields its strategy has) once it is read.
 * With a requestId the change is applied once (LotteryService.update).
 */
export const updateLotteryInput = z
  .object({
    endsAt: z.date().nullish(),
    paused: z.boolean().nullish(),
    noPrizeWeight: weight.nullish(),
    soldOutOdds: z.enum(SOLD_OUT_ODDS).nullish(),
    dailyDrawLimit: dailyLimit.nullish(),
    dailyWinLimit: dailyLimit.nullish(),
    prizes: z.array(prizeUpdate).max(L.maxPrizes).nullish(),
    requestId: requestId.nullish(),
  })
  .superRefine(({ requestId: _, ...change }, ctx) => {
    // A requestId names a change; on its own it is none.
    requireAChange(change, ctx);
    const ids = (change.prizes ?? []).map((prize) => prize.prizeId);
    if (new Set(ids).size !== ids.length) ctx.addIssue({ ...ruleIssue('DUPLICATE_PRIZE'), path: ['prizes'] });
  });

export type UpdateLotteryInput = z.infer<typeof updateLotteryInput>;

/** A draw's requestId: the bound every other mutation's has (the columns and keys it goes in have none of their own). */
export const drawRequestId = requestId.nullish();
