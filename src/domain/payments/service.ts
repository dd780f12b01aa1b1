import { Prisma, type PrismaClient } from '../../generated/prisma/client.ts';
import type { Database } from '../../infra/db/database.ts';
import { type Logger, logRepeating } from '../../infra/logger.ts';
import { failedTeamRefundKey, lateSeatPaymentKey, oweRefunds, refundsOwedFrom, unheldTopUpKey } from '../money/refunds.ts';
import { postToWallets, walletBalance, walletHolds, walletLimitError } from '../money/wallets.ts';
import type { TeamService } from '../teams/service.ts';
import { mintPaymentRef } from '../teams/service.ts';
import { NotifyRefused, type PaymentIntent, type PaymentNotice, type PaymentProvider, signNotify } from './provider.ts';

/** How long a top-up intent may be paid; a later payment is credited all the same (money in is never refused). */
const TOP_UP_TTL_MS = 30 * 60 * 1000;

/**
 * What a notify did, in the 2xx answer: SEATED, REFUND_OWED (late, or a top-up the wallet
 * cannot hold), CREDITED (top-up), FAILED, DUPLICATE_REFUND_OWED, ALREADY_SUCCEEDED (a
 * failure notified after the payment succeeded, which stands).
 */
export type NotifyOutcome = 'SEATED' | 'REFUND_OWED' | 'CREDITED' | 'FAILED' | 'DUPLICATE_REFUND_OWED' | 'ALREADY_SUCCEEDED';

export interface NotifyAnswer {
  status: number;
  body: { outcome: NotifyOutcome } | { error: string };
}

export interface PaymentView {
  paymentRef: string;
  purpose: 'TEAM_SEAT' | 'WALLET_TOP_UP';
  amountCents: number;
  status: 'PENDING' | 'SUCCEEDED' | 'FAILED';
  expiresAt: Date;
}

interface PaymentDeps {
  prisma: PrismaClient;
  /** Through the driver: the notify's lookup runs once per paid seat (Database.query). */
  query: Database['query'];
  log: Logger;
  teams: TeamService;
  provider: PaymentProvider;
  /** Signs the sandbox's notifies; null where there is no sandbox (production). */
  sandboxSecret: string | null;
}

/**
 * Payments the client cannot forge: the server mints every reference (seat locks mint
 * theirs in the lock's journal entry, top-ups here), and only the provider's notify settles
 * one. A notify is answered 2xx only once its outcome is durable, and is idempotent per
 * reference, so the provider may retry it whenever it did not see the answer.
 */
export class PaymentService {
  constructor(private readonly deps: PaymentDeps) {}

  /**
   * A top-up intent, refused (BAD_USER_INPUT, issue WALLET_BALANCE_LIMIT) when the wallet
   * could not hold it now. Nothing is reserved: intents paid later, or credits meanwhile,
   * may still fill the wallet first, and the notify owes back what it cannot hold.
   */
  async topUp(userId: string, amountCents: number): Promise<PaymentIntent> {
    const balance = await walletBalance(this.deps.prisma, userId);
    if (!walletHolds(balance, amountCents)) {
      this.deps.log.info({ userId, amountCents, balance }, 'a top-up the wallet could not hold refused');
      throw walletLimitError('amountCents', balance);
    }
    const payment = await this.deps.prisma.payment.create({
      data: { paymentRef: mintPaymentRef(), userId, purpose: 'WALLET_TOP_UP', amountCents, expiresAt: new Date(Date.now() + TOP_UP_TTL_MS) },
    });
    return this.deps.provider.describeIntent(payment);
  }

  /** A seat lock's payment as the provider has the client pay it (the same seam a top-up's goes through). */
  describe(payment: PaymentIntent): PaymentIntent {
    return this.deps.provider.describeIntent({ ...payment, expiresAt: new Date(payment.expiresAt) });
  }

  /** POST /payments/notify: never throws for a refusal, which changes nothing. */
  async notify(rawBody: Buffer, header: (name: string) => string | undefined): Promise<NotifyAnswer> {
    let notice: PaymentNotice;
    try {
      notice = this.deps.provider.verifyNotify(rawBody, header, Date.now());
    } catch (error) {
      if (!(error instanceof NotifyRefused)) throw error;
      // Anyone can send one, so held back; per status answered, so a stream of forged
      // notifies (401) does not hide a provider's malformed ones (400).
      logRepeating(this.deps.log, 'warn', { status: error.status, reason: error.message }, 'payment notify refused', `payment notify refused: ${error.status}`);
      return { status: error.status, body: { error: error.message } };
    }
    const [payment] = await this.deps.query<{ userId: string; teamId: string | null; purpose: PaymentView['purpose']; amountCents: number }>(
      Prisma.sql`SELECT user_id AS "userId", team_id AS "teamId", purpose::text AS purpose, amount_cents AS "amountCents" FROM payment WHERE payment_ref = ${notice.paymentRef}`,
    );
    if (!payment) {
      this.deps.log.warn({ paymentRef: notice.paymentRef }, 'payment notify for an unknown paymentRef refused');
      return { status: 404, body: { error: 'unknown paymentRef' } };
    }
    if (payment.amountCents !== notice.amountCents) {
      this.deps.log.warn({ paymentRef: notice.paymentRef, expected: payment.amountCents, notified: notice.amountCents }, 'payment notify with a wrong amount refused');
      return { status: 409, body: { error: `amountCents does not match the payment (${payment.amountCents})` } };
    }
    if (notice.status === 'FAILED') return { status: 200, body: { outcome: await this.failed(notice) } };

    let outcome: NotifyOutcome;
    if (payment.purpose === 'WALLET_TOP_UP') {
      outcome = await this.credit(payment.userId, notice);
    } else {
      const { userId } = payment;
      const teamId = payment.teamId!;
      switch (await this.deps.teams.payForSeat({ userId, teamId, paymentRef: notice.paymentRef, providerTxnId: notice.providerTxnId })) {
        // This notify seated the buyer, and the statement that did recorded its transaction
        // on the payment: it cannot be a duplicate, so the check below is not needed.
        case 'joined':
          return { status: 200, body: { outcome: 'SEATED' } };
        // Seated before: by an earlier notify (the payment succeeded then, and this is a
        // retry or a second charge), or by an operator with this reference, whose seat this
        // first success pays for and a failed team refunds.
        case 'seated':
          outcome = await this.succeedSeat(userId, teamId, notice);
          break;
        // An operator's seat in a team that failed before its payment came: the team's
        // statement owed its refunds without this one, owed now under the key it would have used.
        case 'teamFailed':
          outcome = await this.refundSeatPayment(userId, notice, failedTeamRefundKey(teamId, userId), 'TEAM_FAILED');
          break;
        case 'late':
          outcome = await this.refundSeatPayment(userId, notice, lateSeatPaymentKey(notice.paymentRef), 'LATE_PAYMENT');
          break;
      }
    }
    return { status: 200, body: { outcome: (await this.refundDuplicate(payment.userId, notice)) ?? outcome } };
  }

  /**
   * A failure the provider reports: recorded unless the payment succeeded already (a success
   * is final), and answered as what the payment is, so whoever reconciles from the provider's
   * log does not read FAILED for money that was taken.
   */
  private async failed(notice: PaymentNotice): Promise<NotifyOutcome> {
    const { count } = await this.deps.prisma.payment.updateMany({
      where: { paymentRef: notice.paymentRef, status: 'PENDING' },
      data: { status: 'FAILED', providerTxnId: notice.providerTxnId, settledAt: new Date() },
    });
    if (count > 0) return 'FAILED';
    const settled = await this.deps.prisma.payment.findUnique({ where: { paymentRef: notice.paymentRef }, select: { status: true } });
    return settled?.status === 'SUCCEEDED' ? 'ALREADY_SUCCEEDED' : 'FAILED';
  }

  /** The payment succeeded, if it had not, in the transaction that does what it pays for. */
  private succeed(tx: PrismaClient | Prisma.TransactionClient, notice: PaymentNotice) {
    return tx.payment.updateMany({
      where: { paymentRef: notice.paymentRef, status: { not: 'SUCCEEDED' } },
      data: { status: 'SUCCEEDED', providerTxnId: notice.providerTxnId, settledAt: new Date() },
    });
  }

  /**
   * A seat the buyer already holds is paid for. Redis had the team open, but its failure
   * may commit in PostgreSQL at any moment: the payment succeeds with the team's row
   * locked, so the failure commits wholly before or after. After, the refunds it owes see
   * this success; before, they could not, and this owes the refund under their key.
   */
  private async succeedSeat(userId: string, teamId: string, notice: PaymentNotice): Promise<NotifyOutcome> {
    return this.deps.prisma.$transaction(async (tx): Promise<NotifyOutcome> => {
      const [team] = await tx.$queryRaw<{ status: string }[]>`SELECT status::text AS status FROM team WHERE id = ${teamId} FOR SHARE`;
      await this.succeed(tx, notice);
      if (team?.status !== 'FAILED') return 'SEATED';
      await oweRefunds(tx, [{ sourceKey: failedTeamRefundKey(teamId, userId), userId, amountCents: notice.amountCents, reason: 'TEAM_FAILED', paymentRef: notice.paymentRef }]);
      return 'REFUND_OWED';
    });
  }

  /**
   * A top-up paid: credited (entry 'topup:<ref>'), or, when the wallet cannot hold it (it
   * filled up after the intent), owed back through the refund outbox (WALLET_FULL, source
   * 'payment:<ref>'); either way the payment succeeds in the same transaction, and the
   * answer is a 200, never a retry loop over money the provider has taken. The payment row
   * is locked first, so notifies of one reference decide one after the other, and what the
   * first decided stands: a retry never credits a top-up already owed back, even if the
   * wallet has room by then.
   */
  private async credit(userId: string, notice: PaymentNotice): Promise<NotifyOutcome> {
    const entryKey = `topup:${notice.paymentRef}`;
    const sourceKey = unheldTopUpKey(notice.paymentRef);
    const outcome = await this.deps.prisma.$transaction(async (tx): Promise<NotifyOutcome> => {
      await tx.$queryRaw`SELECT 1 FROM payment WHERE payment_ref = ${notice.paymentRef} FOR UPDATE`;
      await this.succeed(tx, notice);
      if (await tx.walletLedger.findUnique({ where: { entryKey }, select: { id: true } })) return 'CREDITED';
      if (await tx.refund.findUnique({ where: { sourceKey }, select: { id: true } })) return 'REFUND_OWED';
      const posted = await postToWallets(tx, [{ entryKey, userId, deltaCents: notice.amountCents, reason: 'TOP_UP' }], { onlyWhatFits: true });
      if (posted.length > 0) return 'CREDITED';
      await oweRefunds(tx, [{ sourceKey, userId, amountCents: notice.amountCents, reason: 'WALLET_FULL', paymentRef: notice.paymentRef }]);
      return 'REFUND_OWED';
    });
    if (outcome === 'REFUND_OWED') this.deps.log.warn({ paymentRef: notice.paymentRef, userId, amountCents: notice.amountCents }, 'a top-up the wallet cannot hold is owed back');
    return outcome;
  }

  /**
   * Paid, but the seat is not had (late) or is refunded (its team failed): the payment's
   * success and the refund commit together, owed once however often this is notified.
   */
  private async refundSeatPayment(userId: string, notice: PaymentNotice, sourceKey: string, reason: 'LATE_PAYMENT' | 'TEAM_FAILED'): Promise<NotifyOutcome> {
    // One statement rather than a transaction of two: a wave of late payments (locks running
    // out under a crowd) holds each pooled connection for one round trip, not four.
    await this.deps.prisma.$queryRaw`
      WITH paid AS (
        UPDATE payment SET status = 'SUCCEEDED', provider_txn_id = ${notice.providerTxnId}, settled_at = ${new Date()}
        WHERE payment_ref = ${notice.paymentRef} AND status <> 'SUCCEEDED'
      ), owed AS (
        SELECT ${sourceKey}::text AS source_key, ${userId}::text AS user_id, ${notice.amountCents}::int AS amount_cents,
               ${reason}::text AS reason, ${notice.paymentRef}::text AS payment_ref
      )
      ${refundsOwedFrom('owed')}`;
    this.deps.log.info({ paymentRef: notice.paymentRef, userId, reason }, 'a seat payment is owed back');
    return 'REFUND_OWED';
  }

  /**
   * A second successful transaction for one reference (the provider charged twice): the
   * first one recorded did what the payment is for, this one is owed back. Checked after
   * the outcome, so of two racing notifies the one that lost is the duplicate.
   */
  private async refundDuplicate(userId: string, notice: PaymentNotice): Promise<NotifyOutcome | null> {
    const recorded = await this.deps.prisma.payment.findUnique({ where: { paymentRef: notice.paymentRef }, select: { providerTxnId: true } });
    if (recorded?.providerTxnId === notice.providerTxnId) return null;
    await oweRefunds(this.deps.prisma, [
      { sourceKey: `payment:${notice.paymentRef}:txn:${notice.providerTxnId}`, userId, amountCents: notice.amountCents, reason: 'DUPLICATE_PAYMENT', paymentRef: notice.paymentRef },
    ]);
    this.deps.log.warn({ paymentRef: notice.paymentRef, providerTxnId: notice.providerTxnId }, 'a payment was notified twice with different transactions; the second is owed back');
    return 'DUPLICATE_REFUND_OWED';
  }

  /**
   * Development only: pays the caller's own payment as a provider would, with a signed
   * notify through the same handler, so GraphiQL and the web app can run the whole flow.
   * Null when the caller has no such payment.
   */
  async sandboxPay(userId: string, paymentRef: string): Promise<(PaymentView & { outcome: string }) | null> {
    if (this.deps.sandboxSecret === null) throw new Error('the payment sandbox does not exist in production');
    const payment = await this.deps.prisma.payment.findUnique({ where: { paymentRef } });
    if (!payment || payment.userId !== userId) return null;
    const body = Buffer.from(JSON.stringify({ paymentRef, amountCents: payment.amountCents, status: 'SUCCEEDED', providerTxnId: `sandbox-${paymentRef}` }));
    const signature = signNotify(this.deps.sandboxSecret, body, Date.now());
    const answer = await this.notify(body, (name) => (name === 'payment-signature' ? signature : undefined));
    if (!('outcome' in answer.body)) throw new Error(`the sandbox notify was refused: ${answer.body.error}`);
    const settled = await this.deps.prisma.payment.findUniqueOrThrow({ where: { paymentRef } });
    return { ...settled, outcome: answer.body.outcome };
  }
}
