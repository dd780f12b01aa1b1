import { expect } from 'vitest';
import { MAX_POINTS } from '../../src/domain/points/input.ts';
import { balanceKeys } from '../../src/domain/points/store.ts';
import type { Stores } from './stores.ts';

interface PaymentRow {
  draw_id: string;
  user_id: string;
  cost: number;
  status: 'RESERVED' | 'PAID' | 'RELEASED';
  prize_points: number;
  settled_at: Date | null;
  drawn: boolean;
  draw_cost: number | null;
  won_points: number;
  debits: number;
  debited: number;
  prizes: number;
  credited: number;
}

/**
 * The invariants of paid draws (docs/architecture.md, D1–D7), in PostgreSQL and Redis:
 * no draw without payment, no payment without a draw, one debit per paid draw, one credit
 * per POINTS prize, and every balance = its ledger − what is still reserved (the account's
 * `held`), never below zero, the ledger never past 2^31−1. `swept`: no reservation is left
 * and Redis has every settlement, so each cached balance equals PostgreSQL's. `atCeiling`:
 * users whose prizes may have been credited only up to the ceiling; everyone else's are
 * credited in full. Returns the payments.
 */
export async function expectDrawPaymentInvariants(stores: Stores, { swept = false, atCeiling = [] as readonly string[] } = {}): Promise<PaymentRow[]> {
  const { sql, redis } = stores;
  const { rows: payments } = await sql.query<PaymentRow>(`
    SELECT p.draw_id, p.user_id, p.cost, p.status::text AS status, p.prize_points, p.settled_at,
      d.id IS NOT NULL AS drawn, d.cost_points AS draw_cost,
      COALESCE(CASE WHEN d.prize_snapshot->>'kind' = 'POINTS' THEN (d.prize_snapshot->>'points')::int END, 0) AS won_points,
      (SELECT count(*)::int FROM points_ledger l WHERE l.draw_id = p.draw_id AND l.reason = 'lottery draw') AS debits,
      COALESCE((SELECT sum(-l.delta)::int FROM points_ledger l WHERE l.draw_id = p.draw_id AND l.reason = 'lottery draw'), 0) AS debited,
      (SELECT count(*)::int FROM points_ledger l WHERE l.draw_id = p.draw_id AND l.reason = 'lottery prize') AS prizes,
      COALESCE((SELECT sum(l.delta)::int FROM points_ledger l WHERE l.draw_id = p.draw_id AND l.reason = 'lottery prize'), 0) AS credited
    FROM draw_payment p LEFT JOIN lottery_draw d ON d.id = p.draw_id`);
  for (const payment of payments) {
    const what = `payment ${payment.draw_id} (${payment.status})`;
    if (payment.status === 'PAID') {
      expect(payment.drawn, `${what}: no payment without a draw`).toBe(true);
      expect(payment.draw_cost, what).toBe(payment.cost);
      expect([payment.debits, payment.debited], `${what}: one debit of its cost`).toEqual(payment.cost > 0 ? [1, payment.cost] : [0, 0]);
    } else {
      expect(payment.drawn, `${what}: no draw on a reservation not paid`).toBe(false);
      expect(payment.debits, what).toBe(0);
    }
    if (atCeiling.includes(payment.user_id)) expect(payment.prize_points, what).toBeLessThanOrEqual(payment.won_points);
    else expect(payment.prize_points, what).toBe(payment.won_points);
    expect([payment.prizes, payment.credited], `${what}: the prize credited once`).toEqual(payment.prize_points > 0 ? [1, payment.prize_points] : [0, 0]);
  }

  // No draw without payment, and no POINTS prize without its payment row.
  const { rows: unpaid } = await sql.query(`
    SELECT d.id FROM lottery_draw d
    WHERE (d.cost_points > 0 OR d.prize_snapshot->>'kind' = 'POINTS')
      AND NOT EXISTS (SELECT 1 FROM draw_payment p WHERE p.draw_id = d.id AND p.status = 'PAID')`);
  expect(unpaid, 'draws with a cost or a POINTS prize and no PAID payment').toEqual([]);
  const { rows: strayLedger } = await sql.query(`
    SELECT l.id FROM points_ledger l WHERE l.draw_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM lottery_draw d WHERE d.id = l.draw_id)`);
  expect(strayLedger, 'ledger rows of a draw that does not exist').toEqual([]);

  // Balances: the ledger minus what is reserved, never negative; the ledger within the ceiling, so a release always fits.
  const { rows: accounts } = await sql.query<{ user_id: string; balance: number; held: number; ledger: string; reserved: number }>(`
    SELECT a.user_id, a.balance, a.held,
      COALESCE((SELECT sum(delta) FROM points_ledger l WHERE l.user_id = a.user_id), 0)::bigint AS ledger,
      COALESCE((SELECT sum(cost) FROM draw_payment p WHERE p.user_id = a.user_id AND p.status = 'RESERVED'), 0)::int AS reserved
    FROM points_account a`);
  for (const account of accounts) {
    expect(account.balance, `balance of ${account.user_id}`).toBeGreaterThanOrEqual(0);
    expect(account.held, `held by ${account.user_id} = its reservations`).toBe(account.reserved);
    expect(account.balance + account.reserved, `balance + reserved of ${account.user_id} = its ledger`).toBe(Number(account.ledger));
    expect(Number(account.ledger), `ledger of ${account.user_id}`).toBeLessThanOrEqual(MAX_POINTS);
    const cached = await redis.get(balanceKeys(account.user_id).meta);
    if (cached !== null) expect(Number(cached), `cached balance of ${account.user_id}`).toBeGreaterThanOrEqual(0);
    if (swept && cached !== null) expect(Number(cached), `cached balance of ${account.user_id}`).toBe(account.balance);
  }
  if (swept) {
    expect(
      payments.filter((payment) => payment.status === 'RESERVED').map((payment) => payment.draw_id),
      'reservations left',
    ).toEqual([]);
    expect(
      payments.filter((payment) => payment.settled_at === null).map((payment) => payment.draw_id),
      'payments Redis was not told of',
    ).toEqual([]);
  }
  return payments;
}
