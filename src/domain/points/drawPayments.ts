/*
 * Draws paid in points. Points live in the user's shop bucket's slot ({shop} with one
 * bucket, buckets.ts) and each lottery in its own, so no one script can take the points and draw. A paid draw is two steps and one commit:
 *
 * 1. Reserve (lua/reserveDrawPoints.lua, the user's bucket): the cost leaves the balance into a
 *    reservation keyed by the draw id, journaled and committed (draw_payment RESERVED,
 *    the account debited) before the draw is tried. A requestId reserves once.
 * 2. Draw (lua/drawLottery.lua, the lottery's slot), given the draw id and the cost.
 * 3. The draw's commit (lottery.draw in src/domain/lottery/journalKinds.ts) is one
 *    PostgreSQL statement: the draw is inserted only on its locked, still RESERVED
 *    reservation, which becomes PAID with a ledger debit; a POINTS prize is credited, as
 *    far as the balance with what is held stays within 2^31−1 (so a release always fits).
 *
 * A draw that did not happen (limit, inactive, sold out) releases its reservation at
 * once. One whose caller died or gave up is released by the sweeper past its deadline,
 * after the lottery's journal entry for the draw, if any, is committed: so a draw that
 * Redis made is paid, and a reservation without a draw is released, exactly once (the
 * commit and the release lock the same row).
 *
 * Releases and prizes are written to PostgreSQL first, then to the cached balance by
 * lua/settleDrawPoints.lua, once per draw (a marker); a rebuild marks every settlement
 * the ledger already counts. Until settled, the cached balance is lower than the
 * ledger's, never higher, so no one spends points twice; the sweeper settles what a dead
 * process (or a rebuild in between, see applySettled) left.
 */
import type { Campaign } from '../../infra/campaign/campaign.ts';
import type { CampaignDeps } from '../deps.ts';
import { ServiceUnavailableError } from '../errors.ts';
import { type DrawPaymentRow, findPayment, markSettled, paymentsToSweep, releaseReservation, reserveDrawJournalKind } from './drawPaymentSql.ts';
import { InsufficientPoints } from './problems.ts';
import { ANSWER_TTL_MS, type DrawReservation, type PointsStore } from './store.ts';

export interface DrawPaymentOptions {
  /** A reservation whose draw is not committed by then is released by the sweeper. */
  releaseAfterMs: number;
}

const SWEEP_BATCH = 200;

export class DrawPayments {
  constructor(
    private readonly deps: Omit<CampaignDeps, 'random'>,
    private readonly balances: Campaign<string, unknown>,
    private readonly store: PointsStore,
    private readonly options: DrawPaymentOptions,
  ) {
    // A reservation PostgreSQL turned down took points in Redis and remembered its draw id.
    balances.persistsWith(reserveDrawJournalKind, (entry) => [String(entry.fields.user)], {
      alsoDrops: (entry) => [store.drawHoldKey(String(entry.fields.user), String(entry.fields.activity), String(entry.fields.request ?? ''))],
    });
  }

  /**
   * Takes the cost into a reservation, durable once this resolves. Returns the draw id
   * to draw with: the given one, or a retry's live reservation's. Throws InsufficientPoints.
   */
  async reserve(reservation: DrawReservation): Promise<string> {
    const reply = await this.balances.journaled(reservation.userId, {
      call: () => this.store.reserveDraw(reservation, ANSWER_TTL_MS, this.options.releaseAfterMs),
      entryOf: (reply) => (reply.kind === 'reserved' ? reply.entry : null),
      unavailable: () => new ServiceUnavailableError('the points balance is being rebuilt; try again'),
    });
    switch (reply?.kind) {
      case 'insufficient':
        throw new InsufficientPoints(reply.balance, reply.cost);
      case 'held':
        // The first call of this request may still be committing its reservation. Drawn on
        // before it is RESERVED in PostgreSQL, the draw's commit finds nothing to pay from and
        // is dropped as a conflict, and every call of the request is told to try again.
        await this.deps.journal.commitStream(this.store.balanceKeys(reservation.userId).journal, (entry) => entry.fields.draw === reply.drawId);
        return reply.drawId;
      default:
        return reservation.drawId;
    }
  }

  /** The draw did not happen: gives the reservation back now. */
  async release(drawId: string): Promise<void> {
    await releaseReservation(this.deps.prisma, drawId, false);
    await this.applySettled(drawId, false);
  }

  /** After a draw's commit: a POINTS prize into the cached balance, before the answer. */
  settleCommitted(drawId: string): Promise<void> {
    return this.applySettled(drawId, false);
  }

  /** Whether the reservation was released (the sweeper got there before the draw's commit). */
  async isReleased(drawId: string): Promise<boolean> {
    return (await findPayment(this.deps.prisma, drawId))?.status === 'RELEASED';
  }

  /**
   * Releases the reservations past their deadline whose draw never came, once the
   * lottery's journal entry for each (`commitDraw`) is committed; settles in Redis what
   * a dead process left unsettled. A payment that fails is logged and tried again next
   * round; the others go on. Returns how many payments it looked at.
   */
  async sweep(commitDraw: (activityId: string, drawId: string) => Promise<void>): Promise<number> {
    const due = await paymentsToSweep(this.deps.prisma, this.options.releaseAfterMs, SWEEP_BATCH);
    for (const { drawId, userId, activityId, status } of due) {
      try {
        if (status === 'RESERVED') await commitDraw(activityId, drawId);
        await this.settle(userId, drawId);
      } catch (error) {
        // The oldest come first: one that always fails would otherwise hold back everyone's points.
        this.deps.log.error({ err: error, drawId, userId, activityId, status }, 'could not sweep a draw payment; tried again next round');
      }
    }
    return due.length;
  }

  /** What the sweeper does, under the balance's rebuild lock: releases the reservation if due, then settles it. */
  private settle(userId: string, drawId: string): Promise<void> {
    return this.balances.changeDurably(userId, async () => {
      await releaseReservation(this.deps.prisma, drawId, true);
      await this.applySettled(drawId, true);
    });
  }

  /**
   * Applies what PostgreSQL settled to the cached balance, once (the script's marker).
   * Requests do this without the rebuild lock, which a hot user's wins would queue on:
   * a balance being rebuilt is absent ('missing'), and a rebuild that read PostgreSQL
   * before the settlement wrote neither it nor its marker, so it stays unsettled and the
   * sweeper applies it on top of the rebuilt balance. Only `locked`, when no rebuild can
   * be half done, does 'missing' mean the next rebuild will count it.
   */
  private async applySettled(drawId: string, locked: boolean): Promise<void> {
    const payment = await findPayment(this.deps.prisma, drawId);
    if (!payment || payment.status === 'RESERVED' || payment.settledAt) return;
    const delta = settledDelta(payment);
    const released = payment.status === 'RELEASED';
    const outcome = delta > 0 || released ? await this.store.settleDraw(payment, delta, released, ANSWER_TTL_MS) : 'already';
    if (outcome !== 'missing' || locked) await markSettled(this.deps.prisma, drawId);
  }
}

/** What a settled payment adds to the balance Redis caches: the cost back, or the prize. */
function settledDelta(payment: DrawPaymentRow): number {
  return payment.status === 'RELEASED' ? payment.cost : payment.prizePoints;
}
