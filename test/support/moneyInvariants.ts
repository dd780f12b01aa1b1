import type pg from 'pg';
import { expect } from 'vitest';

/** Where the money of the wallet world is, in cents, as PostgreSQL holds it. */
export interface MoneyBooks {
  /** Wallet credits from outside: top-ups and operator credits. */
  creditedIn: number;
  /** What shops paid out through shop-funded packets: the grabs of SHOP packets. */
  shopPaidOut: number;
  /** The sum of every wallet's balance. */
  wallets: number;
  /** What wallet-funded packets still hold: total - grabbed, less the remainder once settled. */
  heldByPackets: number;
  /** Refunds of wallet money (no payment ref) owed and not yet paid. */
  refundsPending: number;
  /** Refunds of wallet money paid back out through the provider. */
  refundsPaidOut: number;
  /** Refunds of provider payments (a failed team, a late payment) paid into wallets: money in, as F1 counts it. */
  providerRefundsToWallets: number;
}

const one = async <T>(sql: pg.Pool, query: string): Promise<T> => (await sql.query(query)).rows[0] as T;

/** Rows of `query` that break an invariant, for a readable failure. */
async function expectNone(sql: pg.Pool, what: string, query: string): Promise<void> {
  const { rows } = await sql.query(`${query} LIMIT 5`);
  expect(rows, what).toEqual([]);
}

/**
 * Every money invariant of docs/architecture.md, checked in PostgreSQL once the flows
 * have settled (journals drained), after storms, crashes or a Redis loss:
 * - each wallet's balance is its ledger's sum, and none is negative;
 * - every durable grab is credited once, to its grabber, with its amount (to the wallet,
 *   or owed as a WALLET_FULL refund when the wallet could not hold it), and every grab
 *   credit has its grab; every WALLET packet was debited its total from its sender
 *   exactly once, SHOP packets from no one; a settled WALLET packet with a remainder owes
 *   it to its sender in the refund outbox, a SHOP packet owes nothing;
 * - conservation: the money put in (`moneyInCents`, what the test credited) plus what
 *   shops paid out equals the wallets, plus what wallet-funded packets still hold, plus
 *   refunds pending, plus refunds paid back out through the provider.
 * Refunds of provider payments (with a payment ref) still owed, or paid back through the
 * provider, never held wallet money and are left to the payments' own books. Returns the
 * books, for the test's report.
 */
export async function expectMoneyInvariants(sql: pg.Pool, moneyInCents: number): Promise<MoneyBooks> {
  await expectNone(
    sql,
    'wallets whose balance is not their ledger sum',
    `SELECT COALESCE(a.user_id, l.user_id) AS user_id, a.balance_cents, l.sum
     FROM wallet_account a FULL JOIN (SELECT user_id, SUM(delta_cents)::bigint AS sum FROM wallet_ledger GROUP BY user_id) l ON l.user_id = a.user_id
     WHERE a.balance_cents IS DISTINCT FROM l.sum AND NOT (a.balance_cents = 0 AND l.sum IS NULL)`,
  );
  await expectNone(sql, 'negative wallets', 'SELECT user_id, balance_cents FROM wallet_account WHERE balance_cents < 0');
  await expectNone(
    sql,
    'grabs without their credit, or credits without their grab',
    `SELECT g.id, g.user_id, g.amount, l.entry_key, l.user_id AS credited_user, l.delta_cents
     FROM red_packet_grab g FULL JOIN (SELECT * FROM wallet_ledger WHERE reason = 'RED_PACKET_GRAB') l ON l.entry_key = 'grab:' || g.id
     WHERE g.id IS NULL OR (l.entry_key IS NULL AND NOT EXISTS (SELECT 1 FROM refund r WHERE r.source_key = 'grab:' || g.id))
        OR l.user_id <> g.user_id OR l.delta_cents <> g.amount`,
  );
  await expectNone(
    sql,
    'grabs credited twice (to the wallet and owed), or owed wrong (WALLET_FULL: the grab, to its grabber, of its amount, from no payment)',
    `SELECT r.source_key, r.user_id, r.amount_cents, r.reason, g.id AS grab, l.entry_key
     FROM refund r LEFT JOIN red_packet_grab g ON r.source_key = 'grab:' || g.id LEFT JOIN wallet_ledger l ON l.entry_key = r.source_key
     WHERE r.source_key LIKE 'grab:%'
       AND (g.id IS NULL OR l.entry_key IS NOT NULL OR r.user_id <> g.user_id OR r.amount_cents <> g.amount OR r.reason <> 'WALLET_FULL' OR r.payment_ref IS NOT NULL)`,
  );
  await expectNone(
    sql,
    'WALLET packets without their debit, debits without their packet, or SHOP packets debited',
    `SELECT p.id, p.funded_by, p.total_amount, l.entry_key, l.delta_cents
     FROM (SELECT * FROM red_packet WHERE funded_by = 'WALLET') p FULL JOIN (SELECT * FROM wallet_ledger WHERE reason = 'RED_PACKET_SENT') l ON l.entry_key = 'packet:' || p.id
     WHERE p.id IS NULL OR l.entry_key IS NULL OR l.user_id <> p.sender_id OR l.delta_cents <> -p.total_amount`,
  );
  await expectNone(
    sql,
    'settled packets whose refund owed is wrong (WALLET: the remainder to the sender; SHOP: none)',
    `SELECT p.id, p.funded_by, p.refunded_amount, r.user_id, r.amount_cents, r.reason
     FROM red_packet p LEFT JOIN refund r ON r.source_key = 'packet:' || p.id
     WHERE CASE WHEN p.funded_by = 'WALLET' AND p.refunded_at IS NOT NULL AND p.refunded_amount > 0
                THEN r.id IS NULL OR r.user_id <> p.sender_id OR r.amount_cents <> p.refunded_amount OR r.reason <> 'PACKET_EXPIRED' OR r.payment_ref IS NOT NULL
                ELSE r.id IS NOT NULL END`,
  );

  const books = await one<MoneyBooks>(
    sql,
    `SELECT
       (SELECT COALESCE(SUM(delta_cents), 0) FROM wallet_ledger WHERE reason IN ('TOP_UP', 'OPERATOR_CREDIT'))::float8 AS "creditedIn",
       (SELECT COALESCE(SUM(g.amount), 0) FROM red_packet_grab g JOIN red_packet p ON p.id = g.packet_id WHERE p.funded_by = 'SHOP')::float8 AS "shopPaidOut",
       (SELECT COALESCE(SUM(balance_cents), 0) FROM wallet_account)::float8 AS wallets,
       (SELECT COALESCE(SUM(p.total_amount - CASE WHEN p.refunded_at IS NULL THEN 0 ELSE p.refunded_amount END
                            - (SELECT COALESCE(SUM(g.amount), 0) FROM red_packet_grab g WHERE g.packet_id = p.id)), 0)
          FROM red_packet p WHERE p.funded_by = 'WALLET')::float8 AS "heldByPackets",
       (SELECT COALESCE(SUM(amount_cents), 0) FROM refund WHERE payment_ref IS NULL AND status = 'PENDING')::float8 AS "refundsPending",
       (SELECT COALESCE(SUM(amount_cents), 0) FROM refund WHERE payment_ref IS NULL AND status = 'PAID' AND paid_to = 'PROVIDER')::float8 AS "refundsPaidOut",
       (SELECT COALESCE(SUM(amount_cents), 0) FROM refund WHERE payment_ref IS NOT NULL AND status = 'PAID' AND paid_to = 'WALLET')::float8 AS "providerRefundsToWallets"`,
  );
  expect(books.creditedIn, 'the ledger holds exactly the credits put in').toBe(moneyInCents);
  expect(books.heldByPackets, 'no wallet-funded packet holds less than nothing').toBeGreaterThanOrEqual(0);
  expect(books.wallets + books.heldByPackets + books.refundsPending + books.refundsPaidOut, `money is conserved: ${JSON.stringify(books)}`).toBe(
    moneyInCents + books.providerRefundsToWallets + books.shopPaidOut,
  );
  return books;
}
