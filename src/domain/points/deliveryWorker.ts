/*
 * Voucher delivery, after the redemption is durable: the instance that persisted a
 * redemption holds a lease on it from the insert on and delivers it at once; a worker
 * in every instance claims PENDING redemptions that are due (retries, and those whose
 * lease ran out), a batch at a time. Either way the notifier gets a batch and its
 * successes are marked DELIVERED in one statement.
 *
 * What "never lost, never duplicated" means here. Never lost: a redemption stays
 * PENDING until a notifier call has succeeded and DELIVERED is committed; a failure is
 * retried with exponential backoff, forever; a crash leaves a lease that runs out, and
 * another worker takes over. Never duplicated: the lease (taken at the insert, or by a
 * claim with FOR UPDATE SKIP LOCKED) gives a redemption to one worker at a time; a
 * notifier called again after a crash dedupes by the idempotency key (notifiers.ts).
 */
import { Prisma, type PrismaClient } from '../../generated/prisma/client.ts';
import type { Logger } from '../../infra/logger.ts';
import type { VoucherNotifier } from './notifiers.ts';

export interface DeliveryOptions {
  /** A lease (taken by the insert or by a claim) lasts this long; it must outlast a notifier call. */
  leaseMs: number;
  /** The first retry waits this long, each later one twice as long as the one before. */
  retryBaseMs: number;
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

const CLAIM_BATCH = 50;
/** Fresh redemptions per notifier call: a group commit's worth. */
const FRESH_BATCH = 256;
const FRESH_BACKLOG_MAX = 10_000;
const MAX_RETRY_DELAY_MS = 10 * 60 * 1000;

/**
 * Claims a batch of due redemptions under a lease of `leaseMs`. Times are the database's,
 * so every instance agrees on leases and due dates. Every round of every instance runs it
 * over a table that only grows, so it must stay on redemption_due_idx, which holds only
 * the PENDING rows (test/points.delivery.test.ts checks the plan).
 */
export function dueClaim(leaseMs: number): Prisma.Sql {
  return Prisma.sql`
    UPDATE redemption r
    SET locked_until = now() + ${leaseMs}::int * interval '1 millisecond', delivery_attempts = r.delivery_attempts + 1
    WHERE r.id IN (
      SELECT id FROM redemption
      WHERE status = 'PENDING' AND next_attempt_at <= now() AND (locked_until IS NULL OR locked_until <= now())
      ORDER BY next_attempt_at
      LIMIT ${CLAIM_BATCH}
      FOR UPDATE SKIP LOCKED)
    RETURNING r.id, r.user_id, r.goods_id, r.voucher_code, r.points_spent, r.delivery_attempts, r.locked_until`;
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
  private readonly fresh: Fresh[] = [];
  private freshRound: Promise<void> | undefined;
  private readonly handingBack = new Set<Promise<void>>();
  private stopped = false;

  constructor(
    private readonly prisma: PrismaClient,
    private readonly notifier: VoucherNotifier,
    readonly options: DeliveryOptions,
    private readonly log: Logger,
  ) {}

  /** Redemptions just persisted under this worker's lease: delivered in the background, in order. */
  deliverFresh(redemptions: LeasedRedemption[]): void {
    const room = this.stopped ? 0 : (this.options.freshBacklogMax ?? FRESH_BACKLOG_MAX) - this.fresh.length;
    const handBackAtMs = Date.now() + this.options.leaseMs / 2;
    for (const redemption of redemptions.slice(0, room)) this.fresh.push({ redemption, handBackAtMs });
    if (redemptions.length > room) {
      if (!this.stopped) this.log.warn({ redemptions: redemptions.length - room }, 'fresh voucher deliveries are backing up; handing the overflow to the due rounds');
      const handingBack = this.handBack(redemptions.slice(room)).finally(() => this.handingBack.delete(handingBack));
      this.handingBack.add(handingBack);
    }
    this.freshRound ??= this.deliverFreshQueue().finally(() => {
      this.freshRound = undefined;
    });
  }

  /**
   * Delivers everything due, a batch at a time, until `stopping` is aborted (then after the
   * batch in hand: the rest waits for the next worker); returns how many deliveries it attempted.
   */
  async deliverDue(stopping?: AbortSignal): Promise<number> {
    let attempted = 0;
    while (!stopping?.aborted) {
      const claimed = await this.claimDue();
      if (claimed.length > 0) await this.deliver(claimed);
      attempted += claimed.length;
      if (claimed.length < CLAIM_BATCH) break;
    }
    return attempted;
  }

  /** Finishes the fresh batch in hand and hands the rest back, so another instance delivers them without waiting for the leases to run out. */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.freshRound;
    await this.handBack(this.fresh.splice(0).map((fresh) => fresh.redemption));
    await Promise.all(this.handingBack);
  }

  private async deliverFreshQueue(): Promise<void> {
    while (this.fresh.length > 0 && !this.stopped) {
      const nowMs = Date.now();
      const current: LeasedRedemption[] = [];
      const late: LeasedRedemption[] = [];
      for (const { redemption, handBackAtMs } of this.fresh.splice(0, FRESH_BATCH)) (handBackAtMs > nowMs ? current : late).push(redemption);
      await this.handBack(late);
      // A failure here leaves the leases to run out; the due rounds take the redemptions then.
      if (current.length > 0) await this.deliver(current).catch((error: unknown) => this.log.error({ err: error }, 'fresh voucher delivery failed'));
    }
  }

  private claimDue(): Promise<LeasedRedemption[]> {
    return this.prisma.$queryRaw<LeasedRedemption[]>(dueClaim(this.options.leaseMs));
  }

  /**
   * Hands leased redemptions to the notifier, then marks the successes DELIVERED and
   * schedules retries of the failures. A retry is scheduled only under this worker's
   * lease: one that ran out may belong to another worker by now.
   */
  private async deliver(leased: LeasedRedemption[]): Promise<void> {
    const deliveries = leased.map((row) => ({
      idempotencyKey: row.id,
      userId: row.user_id,
      goodsId: row.goods_id,
      voucherCode: row.voucher_code,
      pointsSpent: row.points_spent,
      attempt: row.delivery_attempts,
    }));
    const outcomes = await this.notifier.deliver(deliveries).catch((error: unknown) => deliveries.map((): PromiseSettledResult<void> => ({ status: 'rejected', reason: error })));
    const failed: { row: LeasedRedemption; error: Error | undefined }[] = [];
    const delivered: string[] = [];
    leased.forEach((row, i) => {
      const outcome = outcomes[i] ?? { status: 'rejected', reason: new Error('the notifier gave no outcome for this delivery') };
      if (outcome.status === 'fulfilled') delivered.push(row.id);
      else failed.push({ row, error: outcome.reason as Error | undefined });
    });
    if (delivered.length > 0) {
      await this.prisma.$executeRaw`
        UPDATE redemption SET status = 'DELIVERED', delivered_at = now(), locked_until = NULL, last_error = NULL
        WHERE id = ANY(${delivered}::text[]) AND status = 'PENDING'`;
    }
    if (failed.length === 0) return;
    const retries = failed.map(({ row, error }) => {
      const delayMs = Math.min(MAX_RETRY_DELAY_MS, this.options.retryBaseMs * 2 ** (row.delivery_attempts - 1));
      this.log.warn({ err: error, redemptionId: row.id, attempt: row.delivery_attempts, retryInMs: delayMs }, 'voucher delivery failed; will retry');
      return { ...row, delayMs, error: String(error?.message ?? error) };
    });
    // One statement for the batch: a fulfilment outage fails every delivery at once.
    await this.prisma.$executeRaw`
      UPDATE redemption r
      SET next_attempt_at = now() + f.delay_ms * interval '1 millisecond', locked_until = NULL, last_error = f.error
      FROM unnest(${retries.map((retry) => retry.id)}::text[], ${retries.map((retry) => retry.locked_until)}::timestamptz[],
                  ${retries.map((retry) => retry.delayMs)}::int[], ${retries.map((retry) => retry.error)}::text[]) AS f(id, lease, delay_ms, error)
      WHERE r.id = f.id AND r.status = 'PENDING' AND r.locked_until = f.lease`.catch((error: unknown) =>
      // Their leases run out and the due rounds take them then.
      this.log.warn({ err: error, redemptions: retries.length }, 'could not schedule voucher delivery retries'),
    );
  }

  /**
   * Gives up leases before they run out, as if never claimed: the notifier was not
   * called. A lease that ran out and was claimed by another worker is left alone.
   */
  private async handBack(redemptions: LeasedRedemption[]): Promise<void> {
    if (redemptions.length === 0) return;
    await this.prisma.$executeRaw`
      UPDATE redemption r SET locked_until = NULL, next_attempt_at = now(), delivery_attempts = r.delivery_attempts - 1
      FROM unnest(${redemptions.map((row) => row.id)}::text[], ${redemptions.map((row) => row.locked_until)}::timestamptz[]) AS mine(id, lease)
      WHERE r.id = mine.id AND r.locked_until = mine.lease AND r.status = 'PENDING'`.catch((error: unknown) =>
      this.log.warn({ err: error, redemptions: redemptions.length }, 'could not hand back voucher deliveries; their leases will run out'),
    );
  }
}
