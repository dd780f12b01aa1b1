/*
 * Wallets: a user's money in cents. Every movement is a row of wallet_ledger with a unique
 * entry key naming what moved it, and the balance in wallet_account moves by exactly the
 * rows that were inserted, in the same statement. So a movement replayed (a journal entry
 * committed twice, a retried request) posts nothing, and the balance always equals the
 * ledger's sum. The CHECK on the balance means no movement overdraws a wallet: a debit
 * that would is refused (debitWallet) or fails its whole statement.
 *
 * The balance is a 32-bit integer (as is GraphQL's Int): no credit may take it past
 * MAX_BALANCE_CENTS, or its whole statement fails (22003). Every credit checks first, each
 * as its flow decides: an operator's credit and a top-up are refused, a top-up paid anyway
 * is owed back, a grab's share and a refund wait in the refund outbox for room
 * (walletFitCtes, docs/payments.md "A full wallet").
 */
import { Prisma, type PrismaClient } from '../../generated/prisma/client.ts';
import { ruleInputIssue } from '../../i18n/issues.ts';
import { unnest } from '../../infra/db/unnest.ts';
import { BadInputError } from '../errors.ts';
import { MAX_BALANCE_CENTS } from './input.ts';
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
      -- bigint: a sum past 32 bits fails only where the balance it makes would not fit.
      SELECT user_id, SUM(delta_cents)::bigint AS delta FROM wallet_posted GROUP BY user_id
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
 * Two CTEs that tell which credits of the relation `source` (columns user_id, delta_cents,
 * and the column `order`) the wallets can hold: `wallet_fits` is `source` with a column
 * fits, true for a row whose wallet, with the rows of that user before it by `order`,
 * stays within MAX_BALANCE_CENTS (a row that does not fit still counts for those after it,
 * so they wait with it: never more than the wallet holds). The wallets are locked first
 * (user order, as the posting locks them), so the balances read are those the posting
 * moves and no statement can raise them in between: a credit that fits is posted, never a
 * 22003. A wallet that does not exist yet has no row to lock: two statements creating one
 * at once with credits that only together pass the ceiling (over 21 million yuan arriving
 * in the same instant in a wallet that never held a cent) fail the later one.
 */
export function walletFitCtes(source: string, order: string): Prisma.Sql {
  const from = Prisma.raw(source);
  return Prisma.sql`
    wallet_locked AS (
      SELECT user_id, balance_cents FROM wallet_account WHERE user_id IN (SELECT user_id FROM ${from}) ORDER BY user_id FOR UPDATE
    ),
    wallet_fits AS (
      SELECT s.*, COALESCE(w.balance_cents, 0)::bigint + SUM(s.delta_cents::bigint) OVER (PARTITION BY s.user_id ORDER BY s.${Prisma.raw(order)} ROWS UNBOUNDED PRECEDING)
               <= ${MAX_BALANCE_CENTS} AS fits
      FROM ${from} s LEFT JOIN wallet_locked w ON w.user_id = s.user_id
    )`;
}

/**
 * Posts movements on their own; the keys posted now (a key posted before is skipped).
 * A movement that would overdraw a wallet fails the statement (CHECK violation, 23514).
 * `onlyWhatFits`: a credit the wallet cannot hold (walletFitCtes) is not posted, and the
 * caller, seeing its key missing, decides what becomes of it; without it, such a credit
 * fails the statement (22003).
 */
export async function postToWallets(db: Db, postings: readonly WalletPosting[], options: { onlyWhatFits?: boolean } = {}): Promise<string[]> {
  if (postings.length === 0) return [];
  const fitting = options.onlyWhatFits
    ? Prisma.sql`${walletFitCtes('wanted', 'entry_key')}, postings AS (SELECT entry_key, user_id, delta_cents, reason FROM wallet_fits WHERE fits),`
    : Prisma.sql`postings AS (SELECT * FROM wanted),`;
  const rows = await db.$queryRaw<{ entry_key: string }[]>(Prisma.sql`
    WITH wanted AS (
      SELECT * FROM ${unnest('p', postings, {
        entry_key: ['text', (posting) => posting.entryKey],
        user_id: ['text', (posting) => posting.userId],
        delta_cents: ['int', (posting) => posting.deltaCents],
        reason: ['text', (posting) => posting.reason],
      })}
    ),
    ${fitting}
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

/**
 * The refusal of a credit the wallet could not hold: BAD_USER_INPUT with one issue at
 * `path`, coded WALLET_BALANCE_LIMIT (worded in the caller's language by error masking's
 * badInputInLocale), with the balance, the ceiling and the room left.
 */
export function walletLimitError(path: string, balanceCents: number): BadInputError {
  const roomCents = Math.max(0, MAX_BALANCE_CENTS - balanceCents);
  return BadInputError.of([ruleInputIssue([path], 'WALLET_BALANCE_LIMIT', { balanceCents, maxCents: MAX_BALANCE_CENTS, roomCents })]);
}

/** Whether the wallet holding `balanceCents` can take `amountCents` more. */
export const walletHolds = (balanceCents: number, amountCents: number) => balanceCents + amountCents <= MAX_BALANCE_CENTS;
