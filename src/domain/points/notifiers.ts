/*
 * Where a voucher goes once its redemption is durable. The delivery worker
 * (deliveryWorker.ts) may call a notifier again for a delivery it already made: a
 * worker that dies after the call succeeded and before DELIVERED was committed cannot
 * be told apart from one that died before. Every call carries the same idempotency key
 * (the redemption id) and notifiers must dedupe by it: the default one marks the
 * redemption DELIVERED itself and announces only the redemptions its mark moved; the
 * webhook sends the key as `Idempotency-Key`.
 */
import type { PrismaClient } from '../../generated/prisma/client.ts';
import type { Logger } from '../../infra/logger.ts';
import { type DeliveryOutcome, RECORDED } from '../../infra/outbox/outbox.ts';
import type { LiveEvents } from '../../infra/redis/pubsub.ts';
import { postToWebhook } from '../../infra/webhooks/post.ts';
import { signatureHeader } from '../../infra/webhooks/signature.ts';
import { markDelivered } from './deliveryWorker.ts';

export interface VoucherDelivery {
  /** The redemption id: the same on every attempt. */
  idempotencyKey: string;
  userId: string;
  goodsId: string;
  voucherCode: string | null;
  pointsSpent: number;
  /** 1 for the first attempt. */
  attempt: number;
}

/**
 * Hands vouchers to their users. Resolves with one outcome per delivery, in order; a
 * rejected one (or all of them, if the call throws) is retried later, a fulfilled one is
 * marked DELIVERED (unless its value is RECORDED: the notifier marked it). Must dedupe by
 * idempotencyKey.
 */
export interface VoucherNotifier {
  deliver(deliveries: VoucherDelivery[]): Promise<DeliveryOutcome[]>;
}

/** The channel (under the key prefix) on which the default notifier announces deliveries. */
export const VOUCHER_DELIVERED_TOPIC = 'points.voucherDelivered';

/**
 * The default notifier: marks the redemptions DELIVERED, then logs and publishes on the
 * event bus, for whatever mails or messages the user, the ones its mark moved from
 * PENDING. The mark is the record that dedupes: a call repeated after a crash finds them
 * DELIVERED and announces nothing. A crash between the mark and the announcement, or a
 * failed publish, loses those announcements (the vouchers are in the users' redemptions
 * either way), never repeats them.
 */
export class LogVoucherNotifier implements VoucherNotifier {
  constructor(
    private readonly prisma: PrismaClient,
    private readonly events: LiveEvents,
    private readonly log: Logger,
  ) {}

  // One statement for the whole batch, and the one the outbox would have run anyway: in a
  // flash sale a statement per voucher costs the database more than the redemptions themselves.
  async deliver(deliveries: VoucherDelivery[]): Promise<DeliveryOutcome[]> {
    const marked = await markDelivered(
      this.prisma,
      deliveries.map((delivery) => delivery.idempotencyKey),
    );
    const toAnnounce = new Set(marked);
    const announced = deliveries.filter((delivery) => toAnnounce.delete(delivery.idempotencyKey));
    for (const delivery of announced) {
      this.log.info({ redemptionId: delivery.idempotencyKey, userId: delivery.userId, goodsId: delivery.goodsId }, 'voucher delivered');
    }
    const published = await Promise.allSettled(announced.map((delivery) => this.events.publish(VOUCHER_DELIVERED_TOPIC, delivery)));
    published.forEach((outcome, i) => {
      if (outcome.status === 'rejected') {
        this.log.warn({ err: outcome.reason, redemptionId: announced[i]!.idempotencyKey }, 'voucher delivered, but its announcement was lost');
      }
    });
    return deliveries.map(() => ({ status: 'fulfilled', value: RECORDED }));
  }
}

/**
 * POSTs each delivery as JSON to a fulfilment service, which must dedupe by the
 * `Idempotency-Key` header, and signed in `Delivery-Signature` (as a refund is, see
 * src/infra/webhooks/signature.ts): the body carries the voucher code in clear. A non-2xx
 * answer, a redirect included, is retried.
 */
export class WebhookVoucherNotifier implements VoucherNotifier {
  constructor(
    private readonly url: string,
    private readonly secret: string,
    private readonly timeoutMs: number,
  ) {}

  deliver(deliveries: VoucherDelivery[]): Promise<DeliveryOutcome[]> {
    return Promise.allSettled(deliveries.map((delivery) => this.post(delivery)));
  }

  private async post(delivery: VoucherDelivery): Promise<void> {
    const body = JSON.stringify(delivery);
    await postToWebhook('delivery', this.url, body, { 'idempotency-key': delivery.idempotencyKey, 'delivery-signature': signatureHeader(this.secret, body) }, this.timeoutMs);
  }
}
