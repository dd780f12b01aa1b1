import { z } from 'zod';
import { requireAChange, ruleIssue } from '../../i18n/issues.ts';
import { recordId, requestId, userId } from '../ids.ts';
import { ledgerReason, onlyVisible, showsSomething } from '../text.ts';

/** GraphQL Int is 32-bit: a balance and a cost must stay within it. */
export const MAX_POINTS = 2_147_483_647;
export const MAX_VOUCHER_CODES = 10_000;
/** The most units one createGoods or restockGoods adds. */
const MAX_STOCK = 1_000_000;
/** The most units a goods item has in all, restocks included: its stock is a 32-bit column. */
export const MAX_GOODS_STOCK = 2_147_483_647;

export const awardPointsArgs = z.object({
  userId,
  amount: z
    .number()
    .int()
    .min(-MAX_POINTS)
    .max(MAX_POINTS)
    .refine((amount) => amount !== 0, ruleIssue('ZERO_AMOUNT')),
  reason: ledgerReason,
  requestId,
});

export const redeemPointsArgs = z.object({ goodsId: recordId, requestId });

export const redemptionUpdatedArgs = z.object({ redemptionId: recordId });

const title = z
  .string()
  .trim()
  .min(1, 'title must not be empty')
  .max(100)
  .refine(...showsSomething('title'));
const pointsCost = z.number().int().min(1, 'pointsCost must be at least 1').max(MAX_POINTS);
const voucherCode = z.string().trim().min(1, 'a voucher code must not be empty').max(128).refine(onlyVisible, ruleIssue('VOUCHER_CODE_NOT_VISIBLE'));
const voucherCodes = z.array(voucherCode).min(1).max(MAX_VOUCHER_CODES).nullish();

/** With a pool of voucher codes, the units (`countField`) are the codes, each once. */
function unitsAreTheCodes<Field extends 'stock' | 'units'>(countField: Field) {
  return (input: { voucherCodes?: string[] | null | undefined } & Record<Field, number>, ctx: z.RefinementCtx) => {
    if (!input.voucherCodes) return;
    if (input.voucherCodes.length !== input[countField]) {
      ctx.addIssue({ ...ruleIssue(countField === 'stock' ? 'STOCK_NOT_CODE_COUNT' : 'UNITS_NOT_CODE_COUNT', { codes: input.voucherCodes.length }), path: [countField] });
    }
    const seen = new Set<string>();
    for (const [index, code] of input.voucherCodes.entries()) {
      if (seen.has(code)) ctx.addIssue({ ...ruleIssue('DUPLICATE_VOUCHER_CODE', { code }), path: ['voucherCodes', index] });
      seen.add(code);
    }
  };
}

/** A sale window's ends are each optional; when both are set, the end must come after the start. */
export function saleEndsTooEarly({ saleStartsAt, saleEndsAt }: { saleStartsAt?: Date | null; saleEndsAt?: Date | null }): boolean {
  return !!saleStartsAt && !!saleEndsAt && saleEndsAt.getTime() <= saleStartsAt.getTime();
}

/** createGoods' input: with a pool of voucher codes the stock is the number of codes. */
export const createGoodsInput = z
  .object({
    title,
    pointsCost,
    stock: z.number().int().min(1, 'stock must be at least 1').max(MAX_STOCK),
    perUserLimit: z.number().int().min(0, 'perUserLimit must be 0 (unlimited) or more').max(MAX_STOCK),
    voucherCodes,
    onSale: z.boolean().optional(),
    saleStartsAt: z.date().nullish(),
    saleEndsAt: z.date().nullish(),
    requestId: requestId.nullish(),
  })
  .superRefine(unitsAreTheCodes('stock'))
  .superRefine((input, ctx) => {
    if (saleEndsTooEarly(input)) ctx.addIssue({ ...ruleIssue('SALE_ENDS_BEFORE_STARTS'), path: ['saleEndsAt'] });
  });

export type CreateGoodsInput = z.infer<typeof createGoodsInput>;

/** restockGoods' input: units more of the item; for pooled goods, that many new codes. */
export const restockGoodsInput = z
  .object({
    goodsId: recordId,
    requestId,
    units: z.number().int().min(1, 'units must be at least 1').max(MAX_STOCK),
    voucherCodes,
  })
  .superRefine(unitsAreTheCodes('units'));

export type RestockGoodsInput = z.infer<typeof restockGoodsInput>;

/**
 * updateGoods' input: what changes; a field left out (or null) stays as it is, so an end
 * of the sale window is removed by its clear flag.
 */
export const updateGoodsInput = z
  .object({
    title: title.nullish(),
    pointsCost: pointsCost.nullish(),
    onSale: z.boolean().nullish(),
    saleStartsAt: z.date().nullish(),
    saleEndsAt: z.date().nullish(),
    clearSaleStartsAt: z.boolean().nullish(),
    clearSaleEndsAt: z.boolean().nullish(),
  })
  .superRefine((input, ctx) => {
    // A clear flag false asks for nothing, as a null does.
    requireAChange({ ...input, clearSaleStartsAt: input.clearSaleStartsAt || null, clearSaleEndsAt: input.clearSaleEndsAt || null }, ctx);
    if (input.clearSaleStartsAt && input.saleStartsAt) ctx.addIssue({ ...ruleIssue('SET_AND_CLEARED', { field: 'saleStartsAt' }), path: ['clearSaleStartsAt'] });
    if (input.clearSaleEndsAt && input.saleEndsAt) ctx.addIssue({ ...ruleIssue('SET_AND_CLEARED', { field: 'saleEndsAt' }), path: ['clearSaleEndsAt'] });
  });

export type UpdateGoodsInput = z.infer<typeof updateGoodsInput>;

export const listLimit = z.number().int().min(1).max(500);
export const listOffset = z.number().int().min(0);
