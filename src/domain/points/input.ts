import { z } from 'zod';
import { ruleIssue } from '../../i18n/issues.ts';

/** GraphQL Int is 32-bit: a balance and a cost must stay within it. */
export const MAX_POINTS = 2_147_483_647;
export const MAX_VOUCHER_CODES = 10_000;
const MAX_STOCK = 1_000_000;

const id = z.string().min(1).max(128);
/** A client's name for one attempt; retries reuse it. */
const requestId = z.string().min(1, 'requestId must not be empty').max(128);

export const awardPointsArgs = z.object({
  userId: id,
  amount: z
    .number()
    .int()
    .min(-MAX_POINTS)
    .max(MAX_POINTS)
    .refine((amount) => amount !== 0, ruleIssue('ZERO_AMOUNT')),
  reason: z.string().trim().min(1, 'reason must not be empty').max(200),
  requestId,
});

export const redeemPointsArgs = z.object({ goodsId: id, requestId });

export const redemptionUpdatedArgs = z.object({ redemptionId: id });

/** createGoods' input: with a pool of voucher codes the stock is the number of codes. */
export const createGoodsInput = z
  .object({
    title: z.string().trim().min(1, 'title must not be empty').max(100),
    pointsCost: z.number().int().min(1, 'pointsCost must be at least 1').max(MAX_POINTS),
    stock: z.number().int().min(1, 'stock must be at least 1').max(MAX_STOCK),
    perUserLimit: z.number().int().min(0, 'perUserLimit must be 0 (unlimited) or more').max(MAX_STOCK),
    voucherCodes: z.array(z.string().trim().min(1, 'a voucher code must not be empty').max(128)).min(1).max(MAX_VOUCHER_CODES).nullish(),
  })
  .superRefine((input, ctx) => {
    if (!input.voucherCodes) return;
    if (input.voucherCodes.length !== input.stock) {
      ctx.addIssue({ ...ruleIssue('STOCK_NOT_CODE_COUNT', { codes: input.voucherCodes.length }), path: ['stock'] });
    }
    const seen = new Set<string>();
    for (const [index, code] of input.voucherCodes.entries()) {
      if (seen.has(code)) ctx.addIssue({ ...ruleIssue('DUPLICATE_VOUCHER_CODE', { code }), path: ['voucherCodes', index] });
      seen.add(code);
    }
  });

export type CreateGoodsInput = z.infer<typeof createGoodsInput>;

export const listLimit = z.number().int().min(1).max(500);
export const listOffset = z.number().int().min(0);
