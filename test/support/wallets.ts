import { randomUUID } from 'node:crypto';
import { expect } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { postToWallets } from '../../src/domain/money/wallets.ts';
import type { RefundStatus } from '../../src/generated/prisma/enums.ts';
import { type Database, openDatabase } from '../../src/infra/db/database.ts';
import { CreditWalletDocument, type CreditWalletMutationVariables, MyRefundsDocument, MyWalletDocument, RefundsDocument } from '../gql/generated.ts';
import { requestsAt } from './client.ts';
import type { TestEnv } from './env.ts';
import type { Stores } from './stores.ts';

/** Wallets and refunds as one user at a time, against one server; operators' operations signed as operators. */
export function walletsAt(url: string) {
  const { raw, data } = requestsAt(url);
  return {
    raw,
    /** Credits a wallet (for a reason 'test' and a new requestId unless given); resolves with the new balance. */
    async credit(operator: string, credit: Omit<CreditWalletMutationVariables, 'reason' | 'requestId'> & Partial<CreditWalletMutationVariables>): Promise<number> {
      return (await data(CreditWalletDocument, { reason: 'test', requestId: randomUUID(), ...credit }, operator, { admin: true })).creditWallet;
    },
    async wallet(user: string, page: { first?: number; after?: string | null } = {}) {
      return (await data(MyWalletDocument, page, user)).me.wallet;
    },
    async myRefunds(user: string, page: { first?: number; after?: string | null } = {}) {
      return (await data(MyRefundsDocument, page, user)).me.refunds;
    },
    async refunds(operator: string, page: { status?: RefundStatus; first?: number; after?: string | null } = {}) {
      return (await data(RefundsDocument, page, operator, { admin: true })).refunds;
    },
  };
}

/**
 * Money a test puts into wallets, posted with the ledger's own primitive as operator
 * credits (what creditWallet will post), through a connection of the test's own. The
 * file's server must have applied the migrations first. `putIn` is the total credited,
 * the money in of moneyInvariants.ts.
 */
export function testWallets(env: TestEnv) {
  let db: Promise<Database> | undefined;
  let putIn = 0;
  return {
    get putIn() {
      return putIn;
    },
    /** Credits each user the amount, in one statement. */
    async fund(credits: readonly (readonly [userId: string, amountCents: number])[]): Promise<void> {
      db ??= openDatabase(loadConfig(env.vars));
      const postings = credits.map(([userId, deltaCents]) => ({ entryKey: `test-credit:${randomUUID()}`, userId, deltaCents, reason: 'OPERATOR_CREDIT' as const }));
      await postToWallets((await db).prisma, postings);
      putIn += credits.reduce((sum, [, amount]) => sum + amount, 0);
    },
    async close(): Promise<void> {
      await (await db)?.close();
    },
  };
}

/**
 * The money invariants in PostgreSQL: every balance equals its ledger's sum and is never
 * negative; every refund PAID to a wallet has exactly one ledger entry of its amount, and
 * no other refund has one; the wallets hold exactly the operator credits and top-ups, plus
 * red packet grabs less what red packets took, plus the refunds paid to them.
 */
export async function expectWalletInvariants(stores: Stores): Promise<void> {
  const { rows: balances } = await stores.sql.query<{ user_id: string; balance: number; ledger: number }>(`
    SELECT a.user_id, a.balance_cents AS balance, COALESCE(SUM(l.delta_cents), 0)::bigint::float8 AS ledger
    FROM wallet_account a LEFT JOIN wallet_ledger l ON l.user_id = a.user_id GROUP BY a.user_id, a.balance_cents`);
  for (const row of balances) {
    expect(row.balance, row.user_id).toBe(row.ledger);
    expect(row.balance, row.user_id).toBeGreaterThanOrEqual(0);
  }
  const { rows: refunds } = await stores.sql.query<{ id: string; status: string; paid_to: string | null; amount_cents: number; entries: number; posted: number | null }>(`
    SELECT r.id, r.status, r.paid_to, r.amount_cents, COUNT(l.id)::int AS entries, SUM(l.delta_cents)::int AS posted
    FROM refund r LEFT JOIN wallet_ledger l ON l.entry_key = 'refund:' || r.id AND l.user_id = r.user_id GROUP BY r.id`);
  for (const refund of refunds) {
    const toWallet = refund.status === 'PAID' && refund.paid_to === 'WALLET';
    expect(refund.entries, refund.id).toBe(toWallet ? 1 : 0);
    if (toWallet) expect(refund.posted, refund.id).toBe(refund.amount_cents);
  }
  const {
    rows: [money],
  } = await stores.sql.query<{ wallets: number; credits: number; refunded: number; stray: number }>(`
    SELECT (SELECT COALESCE(SUM(balance_cents), 0) FROM wallet_account)::bigint::float8 AS wallets,
           (SELECT COALESCE(SUM(delta_cents), 0) FROM wallet_ledger WHERE reason IN ('OPERATOR_CREDIT', 'TOP_UP', 'RED_PACKET_GRAB', 'RED_PACKET_SENT'))::bigint::float8 AS credits,
           (SELECT COALESCE(SUM(amount_cents), 0) FROM refund WHERE status = 'PAID' AND paid_to = 'WALLET')::bigint::float8 AS refunded,
           (SELECT COUNT(*) FROM wallet_ledger WHERE entry_key LIKE 'refund:%' AND substr(entry_key, 8) NOT IN (SELECT id FROM refund))::int AS stray`);
  expect(money!.stray).toBe(0);
  expect(money!.wallets).toBe(money!.credits + money!.refunded);
}
export type TestWallets = ReturnType<typeof testWallets>;
