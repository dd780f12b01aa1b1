/*
 * Refunds as users and operators see them, and their delivery (refundDelivery.ts).
 */
import type { PrismaClient, Refund, RefundStatus } from '../../generated/prisma/client.ts';
import { type KeysetPage, keysetPageArgs } from '../../infra/db/pages.ts';
import type { Logger } from '../../infra/logger.ts';
import type { Outbox, OutboxBacklog, OutboxOptions } from '../../infra/outbox/outbox.ts';
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
    return this.page({ userId }, { userId }, page);
  }

  /** The refund a wallet entry paid in ('refund:<id>'); null for an entry of anything else. */
  async paidBy(entry: { entryKey: string }): Promise<Refund | null> {
    const prefix = 'refund:';
    if (!entry.entryKey.startsWith(prefix)) return null;
    // Prisma batches the findUnique calls of one tick: a page of entries is one query.
    return this.prisma.refund.findUnique({ where: { id: entry.entryKey.slice(prefix.length) } });
  }

  /** Operators: every refund, or those of one status, newest first. */
  list(status: RefundStatus | null | undefined, page: KeysetPage): Promise<Refund[]> {
    // A cursor's refund may have left the status since (paid): it still keeps the operator's place.
    return this.page(status ? { status } : {}, {}, page);
  }

  /**
   * The group-buy team a refund is owed for, so a user can tell one from another: a failed
   * team's ('team:<team>:<user>'), or a seat payment's ('payment:<ref>[:txn:<txn>]', read
   * from the payment). Each of teamOf and packetOf reads only what its own field needs.
   */
  async teamOf(refund: Pick<Refund, 'sourceKey' | 'paymentRef'>): Promise<string | null> {
    const [kind, id] = refund.sourceKey.split(':');
    if (kind === 'team') return id ?? null;
    if (kind !== 'payment' || !refund.paymentRef) return null;
    return (await this.prisma.payment.findUnique({ where: { paymentRef: refund.paymentRef }, select: { teamId: true } }))?.teamId ?? null;
  }

  /** The red packet a refund is owed for: an expired remainder ('packet:<id>'), or a share the wallet could not hold ('grab:<grant id>'). */
  async packetOf(refund: Pick<Refund, 'sourceKey'>): Promise<string | null> {
    const [kind, id] = refund.sourceKey.split(':');
    if (kind === 'packet') return id ?? null;
    if (kind !== 'grab' || !id) return null;
    return (await this.prisma.redPacketGrab.findUnique({ where: { id }, select: { packetId: true } }))?.packetId ?? null;
  }

  /** One round of the delivery worker over the refunds due. */
  deliverDue(stopping?: AbortSignal): Promise<number> {
    return this.delivery.deliverDue(stopping);
  }

  /** The refunds waiting to be paid, for /metrics. */
  deliveryBacklog(): Promise<OutboxBacklog> {
    return this.delivery.backlog();
  }

  private async page(where: { userId?: string; status?: RefundStatus }, cursorScope: { userId?: string }, page: KeysetPage): Promise<Refund[]> {
    return this.prisma.refund.findMany(await keysetPageArgs(this.prisma.refund, page, { where, cursorScope, orderBy: [{ createdAt: 'desc' }, { id: 'desc' }] }));
  }
}
