/*
 * Wallets: a user's money in cents. Every movement is a row of wallet_ledger with a unique
 * entry key naming what moved it, and the balance in wallet_account moves by exactly the
 * rows that were inserted, in the same statement. So a movement replayed (a journal entry
 * committed twice, a retried request) posts nothing, and the balance always equals the
 * ledger's sum. The CHECK on the balance means no movement overdraws a wallet: a debit
 * that would is refused (debitWallet) or fails its whole statement.
 */
import { Prisma, type PrismaClient } from '../../generated/prisma/client.ts';
import { unnest } from '../../infra/db/unnest.ts';
import { InsufficientFunds } from './problems.ts';

/** Why money moved; stored in wallet_ledger.reason. */
export type WalletReason = 'TOP_UP' | 'OPERATOR_CREDIT' | 'RED_PACKET_SENT' | 'RED_PACKET_GRAB' | 'REFUND';

export interface WalletPosting {
  /** What moved the money, unique across the ledger: 'grab:<grant id>', 'credit:<request id>'. */
  entryKey: string;
  userId: string;
  /** Positive in, negative out; never 0. */
  deltaCents: number;
  reason: WalletReason;
}

type Db = PrismaClient | Prisma.TransactionClient;

/**
 * Two CTEs that post the rows of the relation `source` (columns entry_key, user_id,
 * delta_cents, reason) to the ledger, each key once, and move the balances by what was
 * posted: `wallet_posted` (entry_key, user_id, delta_cents) holds the rows inserted.
 * For a statement that makes the movement itself (a grab's insert), so both commit as
 * one: `WITH source AS (…), ${walletPostingCtes('source')} SELECT …`. `withNote`: the
 * source also has a column note (an operator's words, shown with the entry). Balances are
 * upserted in user order, so overlapping statements lock them in one order.
 */
export function walletPostingCtes(source: string, options: { withNote?: boolean } = {}): Prisma.Sql {
  const from = Prisma.raw(source);
  const note = options.withNote ? Prisma.raw(', note') : Prisma.empty;
  return Prisma.sql`
    wallet_posted AS (
      INSERT INTO wallet_ledger (entry_key, user_id, delta_cents, reason${note})
      SELECT entry_key, user_id, delta_cents, reason${note} FROM ${from}
      ON CONFLICT (entry_key) DO NOTHING
      RETURNING entry_key, user_id, delta_cents
    ),
    wallet_sums AS (
      SELECT user_id, SUM(delta_cents)::int AS delta FROM wallet_posted GROUP BY user_id
    ),
    wallet_moved AS (
      -- PostgreSQL checks the balance CHECK on the proposed row before it finds the conflict
      -- that makes it an update, so a wallet that exists proposes 0 and the update moves it.
      INSERT INTO wallet_account AS w (user_id, balance_cents)
      SELECT s.user_id, CASE WHEN EXISTS (SELECT 1 FROM wallet_account a WHERE a.user_id = s.user_id) THEN 0 ELSE s.delta END
      FROM wallet_sums s ORDER BY s.user_id
      ON CONFLICT (user_id) DO UPDATE SET balance_cents = w.balance_cents + (SELECT s.delta FROM wallet_sums s WHERE s.user_id = w.user_id)
      RETURNING w.user_id, w.balance_cents
    )`;
}

/**
 * Posts movements on their own; the keys posted now (a key posted before is skipped).
 * A movement that would overdraw a wallet fails the statement (CHECK violation, 23514).
 */
export async function postToWallets(db: Db, postings: readonly WalletPosting[]): Promise<string[]> {
  if (postings.length === 0) return [];
  const rows = await db.$queryRaw<{ entry_key: string }[]>(Prisma.sql`
    WITH postings AS (
      SELECT * FROM ${unnest('p', postings, {
        entry_key: ['text', (posting) => posting.entryKey],
        user_id: ['text', (posting) => posting.userId],
        delta_cents: ['int', (posting) => posting.deltaCents],
        reason: ['text', (posting) => posting.reason],
      })}
    ),
    ${walletPostingCtes('postings')}
    SELECT entry_key FROM wallet_posted`);
  return rows.map((row) => row.entry_key);
}

/**
 * Takes `amountCents` from the user's wallet, inside the caller's transaction, or throws
 * InsufficientFunds (the caller's transaction then rolls back with it). A key posted
 * before is a replay: nothing moves again. Returns the balance after.
 */
export async function debitWallet(tx: Prisma.TransactionClient, posting: Omit<WalletPosting, 'deltaCents'> & { amountCents: number }): Promise<number> {
  const { entryKey, userId, amountCents, reason } = posting;
  const replay = await tx.walletLedger.findUnique({ where: { entryKey }, select: { id: true } });
  if (!replay) {
    // Conditional, so two debits racing for the last cents cannot both pass a check made before either.
    const debited = await tx.$executeRaw`UPDATE wallet_account SET balance_cents = balance_cents - ${amountCents} WHERE user_id = ${userId} AND balance_cents >= ${amountCents}`;
    if (debited === 0) throw new InsufficientFunds(await walletBalance(tx, userId), amountCents);
    await tx.walletLedger.create({ data: { entryKey, userId, deltaCents: -amountCents, reason } });
  }
  return walletBalance(tx, userId);
}

export async function walletBalance(db: Db, userId: string): Promise<number> {
  return (await db.walletAccount.findUnique({ where: { userId }, select: { balanceCents: true } }))?.balanceCents ?? 0;
}
