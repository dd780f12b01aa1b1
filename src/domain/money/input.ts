import { z } from 'zod';
import { userId } from '../ids.ts';
import { ledgerReason } from '../text.ts';

/** One credit at most: a million yuan. */
export const MAX_CREDIT_CENTS = 100_000_000;
/** What a wallet holds at most: wallet_account.balance_cents is a 32-bit integer, as is GraphQL's Int. */
export const MAX_BALANCE_CENTS = 2_147_483_647;

export const creditWalletArgs = z.object({
  userId,
  amountCents: z.number().int().min(1, 'amountCents must be at least 1').max(MAX_CREDIT_CENTS, `amountCents must be at most ${MAX_CREDIT_CENTS}`),
  reason: ledgerReason,
  requestId: z.string().min(1, 'requestId must not be empty').max(128),
});

export type CreditWallet = z.infer<typeof creditWalletArgs>;
