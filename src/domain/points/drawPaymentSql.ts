import { z } from 'zod';
import { Prisma, type PrismaClient } from '../../generated/prisma/client.ts';
import { unnest } from '../../infra/db/unnest.ts';
import { conflictingEntries, entryKind } from '../../infra/journal/entryKind.ts';

const int = z.coerce.number().int();

/** What lua/reserveDrawPoints.lua journals for one reservation. */
const reserveFields = z.object({
  draw: z.string(),
  user: z.string(),
  activity: z.string(),
  request: z.string().transform((request) => request || null),
  cost: int.min(1),
  at: int,
  releaseAfter: int,
});

/**
 * Reservations, inserted RESERVED with their cost moved from the account's balance to
 * what it holds, in one statement per batch. As for redemptions, the accounts are locked in user order and
 * each user's running total must stay covered; a reservation the balance does not cover
 * (Redis lost data and was rebuilt meanwhile), or a second live one for a requestId, is
 * a conflict: the balance is rebuilt and the call tried again.
 */
export const reserveDrawJournalKind = entryKind({
  kind: 'points.reserveDraw',
  fields: reserveFields,
  async persist(db, entries) {
    const numbered = entries.map(({ fields }, i) => ({ ...fields, position: i + 1 }));
    const inserted = await db.query<{ draw_id: string }>(Prisma.sql`
      WITH entry AS (
        SELECT * FROM ${unnest('e', numbered, {
          draw_id: ['text', (row) => row.draw],
          user_id: ['text', (row) => row.user],
          activity_id: ['text', (row) => row.activity],
          request_id: ['text', (row) => row.request],
          cost: ['int', (row) => row.cost],
          at_ms: ['bigint', (row) => row.at],
          release_ms: ['bigint', (row) => row.releaseAfter],
          seq: ['int', (row) => row.position],
        })}
      ),
      account AS MATERIALIZED (
        SELECT COALESCE(jsonb_object_agg(user_id, balance), '{}'::jsonb) AS balances
        FROM (SELECT user_id, balance FROM points_account WHERE user_id IN (SELECT user_id FROM entry) ORDER BY user_id FOR UPDATE) locked
      ),
      running AS (
        SELECT e.*, sum(e.cost) OVER (PARTITION BY e.user_id ORDER BY e.seq) AS spent
        FROM entry e WHERE NOT EXISTS (SELECT 1 FROM draw_payment p WHERE p.draw_id = e.draw_id)
      ),
      inserted AS (
        INSERT INTO draw_payment (draw_id, user_id, activity_id, request_id, cost, status, reserved_at, release_after)
        SELECT r.draw_id, r.user_id, r.activity_id, r.request_id, r.cost, 'RESERVED', to_timestamp(r.at_ms / 1000.0), to_timestamp(r.release_ms / 1000.0)
        FROM running r CROSS JOIN account a
        WHERE r.spent <= COALESCE((a.balances ->> r.user_id)::bigint, 0)
        ON CONFLICT DO NOTHING
        RETURNING draw_id, user_id, cost
      ),
      debited AS (
        UPDATE points_account a SET balance = a.balance - s.spent, held = a.held + s.spent
        FROM (SELECT user_id, sum(cost) AS spent FROM inserted GROUP BY user_id) s
        WHERE a.user_id = s.user_id
      )
      SELECT draw_id FROM inserted`);
    return conflictingEntries(
      entries,
      (reservation) => reservation.draw,
      inserted.map((row) => row.draw_id),
      async (ids) => (await db.prisma.drawPayment.findMany({ where: { drawId: { in: ids } }, select: { drawId: true } })).map((row) => row.drawId),
    );
  },
});

export interface DrawPaymentRow {
  drawId: string;
  userId: string;
  activityId: string;
  requestId: string | null;
  cost: number;
  status: 'RESERVED' | 'PAID' | 'RELEASED';
  prizePoints: number;
  settledAt: Date | null;
}

const paymentSelect = { drawId: true, userId: true, activityId: true, requestId: true, cost: true, status: true, prizePoints: true, settledAt: true } as const;

export function findPayment(prisma: PrismaClient, drawId: string): Promise<DrawPaymentRow | null> {
  return prisma.drawPayment.findUnique({ where: { drawId }, select: paymentSelect });
}

/**
 * Releases a reservation whose draw did not happen: RESERVED → RELEASED and its cost
 * back from what the account holds to its balance, in one statement. It always fits: no
 * credit takes balance + held past 2^31−1. `due` only: only once past its deadline (the
 * sweeper). The draw's commit locks the same row, so exactly one of the two wins: a
 * released reservation lets no draw in, a paid one is never released.
 */
export async function releaseReservation(prisma: PrismaClient, drawId: string, due: boolean): Promise<void> {
  await prisma.$executeRaw`
    WITH released AS (
      UPDATE draw_payment SET status = 'RELEASED'
      WHERE draw_id = ${drawId} AND status = 'RESERVED' AND (NOT ${due} OR release_after < now())
        AND NOT EXISTS (SELECT 1 FROM lottery_draw d WHERE d.id = ${drawId})
      RETURNING user_id, cost
    )
    UPDATE points_account a SET balance = a.balance + r.cost, held = a.held - r.cost FROM released r WHERE a.user_id = r.user_id`;
}

export async function markSettled(prisma: PrismaClient, drawId: string): Promise<void> {
  await prisma.drawPayment.updateMany({ where: { drawId, settledAt: null, status: { not: 'RESERVED' } }, data: { settledAt: new Date() } });
}

/** What the sweeper has to do: reservations past their deadline, and settlements Redis has not had for a while. */
export function paymentsToSweep(prisma: PrismaClient, settleAfterMs: number, limit: number): Promise<DrawPaymentRow[]> {
  return prisma.$queryRaw<DrawPaymentRow[]>`
    (SELECT draw_id AS "drawId", user_id AS "userId", activity_id AS "activityId", request_id AS "requestId", cost, status::text AS status,
       prize_points AS "prizePoints", settled_at AS "settledAt"
     FROM draw_payment WHERE status = 'RESERVED' AND release_after < now() ORDER BY release_after LIMIT ${limit})
    UNION ALL
    (SELECT draw_id, user_id, activity_id, request_id, cost, status::text, prize_points, settled_at
     FROM draw_payment WHERE settled_at IS NULL AND status <> 'RESERVED' AND release_after < now() - ${settleAfterMs}::int * interval '1 millisecond'
     LIMIT ${limit})`;
}
