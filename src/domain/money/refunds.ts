/*
 * The one outbox of refunds owed. Whatever owes a refund (a failed team, a late or
 * duplicate payment, an expired red packet's remainder) inserts a row here in the same
 * transaction or statement that decides it is owed, under a source key naming why, so
 * deciding twice owes it once. A delivery worker then pays each row once, to the user's
 * wallet or back through the payment provider.
 */
import { Prisma, type PrismaClient } from '../../generated/prisma/client.ts';
import { unnest } from '../../infra/db/unnest.ts';

/**
 * WALLET_FULL: a credit the wallet could not hold (MAX_BALANCE_CENTS): a top-up's payment,
 * owed back ('payment:<ref>'), or a red packet share ('grab:<grant id>'), paid in once
 * the wallet has room.
 */
export type RefundReason = 'TEAM_FAILED' | 'LATE_PAYMENT' | 'DUPLICATE_PAYMENT' | 'PACKET_EXPIRED' | 'WALLET_FULL';

export interface RefundOwed {
  /** Why it is owed, unique across refunds: 'team:<team>:<user>', 'payment:<ref>', 'packet:<id>', 'grab:<grant id>'. */
  sourceKey: string;
  userId: string;
  /** > 0. */
  amountCents: number;
  reason: RefundReason;
  /** The provider payment it returns; null for money that came from a wallet. */
  paymentRef: string | null;
}

/** The source key of a seat payment that came too late to seat anyone, and is owed back. */
export const lateSeatPaymentKey = (paymentRef: string) => `payment:${paymentRef}`;

/** The source key of a top-up paid into a wallet that could not hold it, owed back (WALLET_FULL). */
export const unheldTopUpKey = (paymentRef: string) => `payment:${paymentRef}`;

/** The source key of a failed team's refund to one member (teamRefundsOwed builds it in SQL). */
export const failedTeamRefundKey = (teamId: string, userId: string) => `team:${teamId}:${userId}`;

/**
 * An INSERT of the rows of the relation `source` (columns source_key, user_id,
 * amount_cents, reason, payment_ref) into the outbox, each source key once, and a seat
 * payment once for its seat (refund_seat_payment_key); it returns the source keys owed
 * now. For a statement that decides the refund itself, as a CTE:
 * `WITH source AS (…), owed AS (${refundsOwedFrom('source')}) SELECT …`.
 */
export function refundsOwedFrom(source: string): Prisma.Sql {
  return Prisma.sql`
    INSERT INTO refund (id, source_key, user_id, amount_cents, reason, payment_ref)
    SELECT gen_random_uuid()::text, source_key, user_id, amount_cents, reason, payment_ref FROM ${Prisma.raw(source)}
    ON CONFLICT DO NOTHING
    RETURNING source_key`;
}

/** Records refunds owed on their own; the source keys owed now (one owed before is skipped). */
export async function oweRefunds(db: PrismaClient | Prisma.TransactionClient, refunds: readonly RefundOwed[]): Promise<string[]> {
  if (refunds.length === 0) return [];
  const rows = await db.$queryRaw<{ source_key: string }[]>(Prisma.sql`
    WITH owed AS (
      SELECT * FROM ${unnest('r', refunds, {
        source_key: ['text', (refund) => refund.sourceKey],
        user_id: ['text', (refund) => refund.userId],
        amount_cents: ['int', (refund) => refund.amountCents],
        reason: ['text', (refund) => refund.reason],
        payment_ref: ['text', (refund) => refund.paymentRef],
      })}
    )
    ${refundsOwedFrom('owed')}`);
  return rows.map((row) => row.source_key);
}
