/*
 * Refunds as users and operators see them, and their delivery (refundDelivery.ts).
 */
import type { PrismaClient, Refund, RefundStatus } from '../../generated/prisma/client.ts';
import { type KeysetPage, keysetArgs } from '../../infra/db/pages.ts';
import type { Logger } from '../../infra/logger.ts';
import type { Outbox, OutboxOptions } from '../../infra/outbox/outbox.ts';
import { type LeasedRefund, type RefundProvider, refundDelivery } from './refundDelivery.ts';

export class RefundService {
  private readonly delivery: Outbox<LeasedRefund>;

  constructor(
    private readonly prisma: PrismaClient,
    provider: RefundProvider | null,
    delivery: OutboxOptions,
    log: Logger,
  ) {
    this.delivery = refundDelivery(prisma, provider, delivery, log);
  }

  /** A user's refunds, newest first. */
  refundsOf(userId: string, page: KeysetPage): Promise<Refund[]> {
    return this.page({ userId }, page);
  }

  /** Operators: every refund, or those of one status, newest first. */
  list(status: RefundStatus | null | undefined, page: KeysetPage): Promise<Refund[]> {
    return this.page(status ? { status } : {}, page);
  }

  /**
   * What a refund is owed for, so a user can tell one from another: the team of a seat
   * payment or of a failed team, the red packet of an expired remainder or of a share
   * the wallet could not hold. Read from its source key ('team:<team>:<user>',
   * 'packet:<id>', 'grab:<grant id>', 'payment:<ref>[:txn:<txn>]').
   */
  async subjectOf(refund: Pick<Refund, 'sourceKey' | 'paymentRef'>): Promise<{ teamId: string | null; packetId: string | null }> {
    const [kind, id] = refund.sourceKey.split(':');
    if (kind === 'team') return { teamId: id ?? null, packetId: null };
    if (kind === 'packet') return { teamId: null, packetId: id ?? null };
    if (kind === 'grab' && id) {
      const grab = await this.prisma.redPacketGrab.findUnique({ where: { id }, select: { packetId: true } });
      return { teamId: null, packetId: grab?.packetId ?? null };
    }
    if (kind === 'payment' && refund.paymentRef) {
      const payment = await this.prisma.payment.findUnique({ where: { paymentRef: refund.paymentRef }, select: { teamId: true } });
      return { teamId: payment?.teamId ?? null, packetId: null };
    }
    return { teamId: null, packetId: null };
  }

  /** One round of the delivery worker over the refunds due. */
  deliverDue(stopping?: AbortSignal): Promise<number> {
    return this.delivery.deliverDue(stopping);
  }

  private page(where: { userId?: string; status?: RefundStatus }, page: KeysetPage): Promise<Refund[]> {
    return this.prisma.refund.findMany({ where, ...keysetArgs(page, [{ createdAt: 'desc' }, { id: 'desc' }], (id) => ({ id })) });
  }
}
