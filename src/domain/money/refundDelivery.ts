/*
 * Refund delivery: pays every PENDING refund of the outbox (refunds.ts) once, on the
 * shared outbox machinery (src/infra/outbox/outbox.ts: claims, leases, backoff).
 *
 * To the wallet: the ledger posting ('refund:<refund id>') and the PAID update are one
 * statement, so one transaction: a crash leaves both or neither, and a refund already
 * PAID posts nothing. To the provider (a refund of a provider payment, when
 * REFUND_WEBHOOK_URL is set): a POST carrying the refund id as its Idempotency-Key on
 * every attempt, marked PAID on a 2xx. A worker that dies between the provider's 2xx and
 * the PAID commit sends it again once its lease runs out; the provider dedupes by the key.
 * Every instance must run with the same REFUND_WEBHOOK_URL, so a refund has one destination.
 *
 * A wallet that cannot hold a refund (it would pass MAX_BALANCE_CENTS) is not paid: the
 * refund stays PENDING, its last_error says why, and it is retried on the outbox's backoff
 * (at most ten minutes apart) until the wallet has room. With a provider, a refund of a
 * provider payment never goes to the wallet, so this concerns wallet money and setups
 * without REFUND_WEBHOOK_URL.
 */
import { Prisma, type PrismaClient } from '../../generated/prisma/client.ts';
import type { Logger } from '../../infra/logger.ts';
import { type DeliveryOutcome, Outbox, type OutboxOptions, RECORDED } from '../../infra/outbox/outbox.ts';
import { postToWebhook } from '../../infra/webhooks/post.ts';
import { signatureHeader } from '../../infra/webhooks/signature.ts';
import { MAX_BALANCE_CENTS } from './input.ts';
import { walletFitCtes, walletPostingCtes } from './wallets.ts';

/** A refund in the hands of one worker. */
export interface LeasedRefund {
  id: string;
  user_id: string;
  amount_cents: number;
  reason: string;
  payment_ref: string | null;
  attempts: number;
  locked_until: Date;
}

/** What the provider is sent: the JSON body of the refund webhook. */
export interface ProviderRefund {
  refundId: string;
  paymentRef: string;
  userId: string;
  amountCents: number;
  reason: string;
}

/** Returns a provider payment. Resolves once the provider accepted it; must dedupe by refundId. */
export interface RefundProvider {
  refund(refund: ProviderRefund): Promise<void>;
}

/**
 * POSTs the refund as JSON to REFUND_WEBHOOK_URL with `Idempotency-Key: <refund id>` and
 * `Refund-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">` keyed by
 * REFUND_WEBHOOK_SECRET. Anything but a 2xx within the timeout, a redirect included, is retried.
 */
export class WebhookRefundProvider implements RefundProvider {
  constructor(
    private readonly url: string,
    private readonly secret: string,
    private readonly timeoutMs: number,
  ) {}

  async refund(refund: ProviderRefund): Promise<void> {
    const body = JSON.stringify(refund);
    await postToWebhook('refund', this.url, body, { 'idempotency-key': refund.refundId, 'refund-signature': signatureHeader(this.secret, body) }, this.timeoutMs);
  }
}

/** A refund to a wallet that cannot hold it now (MAX_BALANCE_CENTS): retried, its lastError says why. */
export class WalletCannotHold extends Error {
  constructor(refund: LeasedRefund, balanceCents: number) {
    super(`the wallet of ${refund.user_id} holds ${balanceCents} cents and cannot hold ${refund.amount_cents} more (at most ${MAX_BALANCE_CENTS}); retried until it can`);
  }
}

/**
 * Pays leased refunds into their users' wallets and marks them PAID, in one statement,
 * those the wallets can hold (walletFitCtes, in id order per user); the others stay
 * PENDING with the balance that stopped them. Only under this worker's lease: a refund
 * another worker took over is left to it.
 */
async function payToWallets(prisma: PrismaClient, refunds: LeasedRefund[]): Promise<{ paid: string[]; unheld: Map<string, number> }> {
  const rows = await prisma.$queryRaw<{ id: string; balance: number | null }[]>(Prisma.sql`
    WITH mine AS (
      SELECT r.id, r.user_id, r.amount_cents AS delta_cents, mine.lease
      FROM refund r JOIN unnest(${refunds.map((refund) => refund.id)}::text[], ${refunds.map((refund) => refund.locked_until)}::timestamptz[]) AS mine(id, lease) ON r.id = mine.id
      WHERE r.status = 'PENDING' AND r.locked_until = mine.lease
    ),
    ${walletFitCtes('mine', 'id')},
    paid AS (
      UPDATE refund r SET status = 'PAID', paid_to = 'WALLET', paid_at = now(), locked_until = NULL, last_error = NULL
      FROM wallet_fits f
      WHERE f.fits AND r.id = f.id AND r.status = 'PENDING' AND r.locked_until = f.lease
      RETURNING 'refund:' || r.id AS entry_key, r.user_id, r.amount_cents AS delta_cents, 'REFUND'::text AS reason
    ),
    ${walletPostingCtes('paid')}
    SELECT substr(entry_key, length('refund:') + 1) AS id, NULL::int AS balance FROM wallet_posted
    UNION ALL
    SELECT f.id, COALESCE(w.balance_cents, 0) FROM wallet_fits f LEFT JOIN wallet_locked w ON w.user_id = f.user_id WHERE NOT f.fits`);
  return {
    paid: rows.filter((row) => row.balance === null).map((row) => row.id),
    unheld: new Map(rows.filter((row) => row.balance !== null).map((row) => [row.id, row.balance!])),
  };
}

/** The outbox of refunds: to the provider when `provider` is given and the refund returns a provider payment, else to the wallet. */
export function refundDelivery(prisma: PrismaClient, provider: RefundProvider | null, options: OutboxOptions, log: Logger): Outbox<LeasedRefund> {
  const toProvider = (refund: LeasedRefund) => provider !== null && refund.payment_ref !== null;
  return new Outbox<LeasedRefund>(
    prisma,
    {
      name: 'refund delivery',
      table: 'refund',
      attemptsColumn: 'attempts',
      columns: ['id', 'user_id', 'amount_cents', 'reason', 'payment_ref', 'attempts', 'locked_until'],
      doneSet: "status = 'PAID', paid_to = 'PROVIDER', paid_at = now()",
      attemptOf: (refund) => refund.attempts,
      async deliver(refunds) {
        const paid = (refund: LeasedRefund, to: string) => log.info({ refundId: refund.id, userId: refund.user_id, amountCents: refund.amount_cents, to }, 'refund paid');
        const wallet = refunds.filter((refund) => !toProvider(refund));
        const paidToWallets: Promise<PromiseSettledResult<{ unheld: Map<string, number> }>> =
          wallet.length === 0
            ? Promise.resolve({ status: 'fulfilled', value: { unheld: new Map() } })
            : payToWallets(prisma, wallet).then(
                ({ paid: ids, unheld }) => {
                  for (const refund of wallet) if (ids.includes(refund.id)) paid(refund, 'WALLET');
                  return { status: 'fulfilled', value: { unheld } };
                },
                (error: unknown) => ({ status: 'rejected', reason: error }),
              );
        return Promise.all(
          refunds.map(async (refund): Promise<DeliveryOutcome> => {
            if (!toProvider(refund)) {
              const outcome = await paidToWallets;
              if (outcome.status === 'rejected') return outcome;
              const balanceCents = outcome.value.unheld.get(refund.id);
              // The outbox logs it (warn) and writes its message to last_error.
              if (balanceCents !== undefined) return { status: 'rejected', reason: new WalletCannotHold(refund, balanceCents) };
              return { status: 'fulfilled', value: RECORDED };
            }
            const { id: refundId, payment_ref: paymentRef, user_id: userId, amount_cents: amountCents, reason } = refund;
            return provider!.refund({ refundId, paymentRef: paymentRef!, userId, amountCents, reason }).then(
              () => {
                paid(refund, 'PROVIDER');
                return { status: 'fulfilled', value: undefined };
              },
              (error: unknown) => ({ status: 'rejected', reason: error }),
            );
          }),
        );
      },
    },
    options,
    log,
  );
}
