/*
 * Voucher delivery, after the redemption is durable: the instance that persisted a
 * redemption holds a lease on it from the insert on and delivers it at once; a worker
 * in every instance claims PENDING redemptions that are due (retries, and those whose
 * lease ran out), a batch at a time. Either way the notifier gets a batch and its
 * successes are marked DELIVERED in one statement (by the outbox, or by the notifier
 * itself, as the default one does).
 *
 * What "never lost, never duplicated" means here. Never lost: a redemption stays
 * PENDING until a notifier call has succeeded and DELIVERED is committed; a failure is
 * retried with exponential backoff, forever; a crash leaves a lease that runs out, and
 * another worker takes over. Never duplicated: the lease (taken at the insert, or by a
 * claim with FOR UPDATE SKIP LOCKED) gives a redemption to one worker at a time; a
 * notifier called again after a crash dedupes by the idempotency key (notifiers.ts).
 * The claim, leases and backoff are the shared outbox's (src/infra/outbox/outbox.ts);
 * what is voucher delivery's own is the fresh path.
 */
import type { PrismaClient } from '../../generated/prisma/client.ts';
import { type Logger, logRepeating } from '../../infra/logger.ts';
import { Outbox, type OutboxBacklog, type OutboxOptions, type OutboxTable, markDone, dueClaim as outboxDueClaim } from '../../infra/outbox/outbox.ts';
import type { VoucherNotifier } from './notifiers.ts';

export interface DeliveryOptions extends OutboxOptions {
  /** Fresh redemptions waiting in memory at most; beyond that they are handed back to the due rounds. */
  freshBacklogMax?: number;
}

/** A redemption in the hands of one worker: claimed by it, or persisted by it under its lease. */
export interface LeasedRedemption {
  id: string;
  user_id: string;
  goods_id: string;
  voucher_code: string | null;
  points_spent: number;
  delivery_attempts: number;
  /** The lease's end as PostgreSQL wrote it: what this worker writes later checks the lease is still its own. */
  locked_until: Date;
}

/** Fresh redemptions per notifier call: a group commit's worth. */
const FRESH_BATCH = 256;
const FRESH_BACKLOG_MAX = 10_000;

const REDEMPTIONS = {
  name: 'voucher delivery',
  table: 'redemption',
  attemptsColumn: 'delivery_attempts',
  columns: ['id', 'user_id', 'goods_id', 'voucher_code', 'points_spent', 'delivery_attempts', 'locked_until'],
  doneSet: "status = 'DELIVERED', delivered_at = now()",
  attemptOf: (row: LeasedRedemption) => row.delivery_attempts,
} as const;

/**
 * Claims a batch of due redemptions under a lease of `leaseMs`. Every round of every
 * instance runs it over a table that only grows, so it must stay on redemption_due_idx,
 * which holds only the PENDING rows (test/points.delivery.test.ts checks the plan).
 */
export function dueClaim(leaseMs: number) {
  return outboxDueClaim(REDEMPTIONS, leaseMs);
}

/** Marks redemptions DELIVERED, those still PENDING only; returns the ids it moved. */
export function markDelivered(prisma: PrismaClient, redemptionIds: string[]): Promise<string[]> {
  return markDone(prisma, REDEMPTIONS, redemptionIds);
}

interface Fresh {
  redemption: LeasedRedemption;
  /**
   * Past this, half the lease is gone: hand it back rather than start a call that could
   * outlast the lease. Counted from when the insert returned, so the time the statement
   * took (lock waits included) comes out of the other half.
   */
  handBackAtMs: number;
}

/**
 * Delivers vouchers two ways. Fresh: a redemption this process has just persisted
 * carries its lease from the insert on (see redemptionJournalHandler), so it is handed
 * to the notifier at once, with no claim to write or find; that halves the updates a
 * redemption costs PostgreSQL during a flash sale. Due: every round claims what is
 * PENDING and unleased or whose lease ran out (a retry after a failure, or a
 * redemption whose process died), a batch at a time.
 */
export class VoucherDeliveryWorker {
  private readonly outbox: Outbox<LeasedRedemption>;
  private readonly fresh: Fresh[] = [];
  private freshRound: Promise<void> | undefined;
  private readonly handingBack = new Set<Promise<void>>();
  private stopped = false;

  constructor(
    prisma: PrismaClient,
    notifier: VoucherNotifier,
    readonly options: DeliveryOptions,
    private readonly log: Logger,
    /** Redemptions whose delivery moved (delivered, or a retry scheduled). */
    moved?: (ids: string[]) => void,
  ) {
    const table: OutboxTable<LeasedRedemption> = {
      ...REDEMPTIONS,
      ...(moved ? { recorded: moved } : {}),
      deliver: (leased) =>
        notifier.deliver(
          leased.map((row) => ({
            idempotencyKey: row.id,
            userId: row.user_id,
            goodsId: row.goods_id,
            voucherCode: row.voucher_code,
            pointsSpent: row.points_spent,
            attempt: row.delivery_attempts,
          })),
        ),
    };
    this.outbox = new Outbox(prisma, table, options, log);
  }

  /** Redemptions just persisted under this worker's lease: delivered in the background, in order. */
  deliverFresh(redemptions: LeasedRedemption[]): void {
    const room = this.stopped ? 0 : (this.options.freshBacklogMax ?? FRESH_BACKLOG_MAX) - this.fresh.length;
    const handBackAtMs = Date.now() + this.options.leaseMs / 2;
    for (const redemption of redemptions.slice(0, room)) this.fresh.push({ redemption, handBackAtMs });
    if (redemptions.length > room) {
      if (!this.stopped) this.log.warn({ redemptions: redemptions.length - room }, 'fresh voucher deliveries are backing up; handing the overflow to the due rounds');
      const handingBack = this.outbox.handBack(redemptions.slice(room)).finally(() => this.handingBack.delete(handingBack));
      this.handingBack.add(handingBack);
    }
    this.freshRound ??= this.deliverFreshQueue().finally(() => {
      this.freshRound = undefined;
    });
  }

  /** One due round (Outbox.deliverDue): retries, and redemptions whose process died. */
  deliverDue(stopping?: AbortSignal): Promise<number> {
    return this.outbox.deliverDue(stopping);
  }

  /** The redemptions waiting for delivery (Outbox.backlog). */
  backlog(): Promise<OutboxBacklog> {
    return this.outbox.backlog();
  }

  /** Finishes the fresh batch in hand and hands the rest back, so another instance delivers them without waiting for the leases to run out. */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.freshRound;
    await this.outbox.handBack(this.fresh.splice(0).map((fresh) => fresh.redemption));
    await Promise.all(this.handingBack);
  }

  private async deliverFreshQueue(): Promise<void> {
    while (this.fresh.length > 0 && !this.stopped) {
      const nowMs = Date.now();
      const current: LeasedRedemption[] = [];
      const late: LeasedRedemption[] = [];
      for (const { redemption, handBackAtMs } of this.fresh.splice(0, FRESH_BATCH)) (handBackAtMs > nowMs ? current : late).push(redemption);
      await this.outbox.handBack(late);
      // A failure here leaves the leases to run out; the due rounds take the redemptions then.
      // Held back: PostgreSQL down fails every batch of a flash sale.
      if (current.length > 0) await this.outbox.deliver(current).catch((error: unknown) => logRepeating(this.log, 'error', { err: error }, 'fresh voucher delivery failed'));
    }
  }
}
