import { z } from 'zod';
import { ruleIssue } from '../../i18n/issues.ts';
import { SPLIT_LIMITS, splitProblem, widestMaxAmount } from './split.ts';
import { LATEST_SHARES_MAX } from './store.ts';

const MAX_EXPIRY_SECONDS = 7 * 24 * 3600;

/** createRedPacket's input, checked as a whole: every bound, and that the split is possible. */
export const createRedPacketInput = z
  .object({
    totalAmount: z.number().int().min(1).max(SPLIT_LIMITS.maxTotalAmount),
    count: z.number().int().min(1).max(SPLIT_LIMITS.maxCount),
    mode: z.enum(['RANDOM', 'NORMAL', 'EQUAL']),
    minAmount: z.number().int().min(1),
    maxAmount: z.number().int().min(1).nullish(),
    expiresInSeconds: z.number().int().min(1).max(MAX_EXPIRY_SECONDS),
    greeting: z.string().trim().max(64).nullish(),
    fundedBy: z.enum(['WALLET', 'SHOP']).default('WALLET'),
    requestId: z.string().min(1, 'requestId must not be empty').max(128).nullish(),
  })
  .superRefine((input, ctx) => {
    if (input.maxAmount != null && input.maxAmount < input.minAmount) {
      ctx.addIssue({ ...ruleIssue('MAX_BELOW_MIN'), path: ['maxAmount'] });
      return;
    }
    const problem = splitProblem({ ...input, maxAmount: input.maxAmount ?? widestMaxAmount(input.totalAmount, input.count, input.minAmount) });
    if (problem) ctx.addIssue({ ...ruleIssue('IMPOSSIBLE_SPLIT', problem), path: ['count'] });
  });

export type CreateRedPacketInput = z.infer<typeof createRedPacketInput>;

/** RedPacket.latestShares' count: a subscription's state carries at most this many. */
export const latestSharesCount = z.number().int().min(1).max(LATEST_SHARES_MAX);
