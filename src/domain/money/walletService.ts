/*
 * Wallets as users and operators see them: balances and ledgers read from PostgreSQL
 * (a wallet is not a hot path: no Redis), and operators' credits.
 */
import { Prisma, type PrismaClient, type WalletLedger } from '../../generated/prisma/client.ts';
import { ruleInputIssue } from '../../i18n/issues.ts';
import { type KeysetPage, keysetPageArgs, numericId } from '../../infra/db/pages.ts';
import type { Logger } from '../../infra/logger.ts';
import { BadInputError } from '../errors.ts';
import type { CreditWallet } from './input.ts';
import { walletBalance, walletFitCtes, walletLimitError, walletPostingCtes } from './wallets.ts';

export class WalletService {
  constructor(
    private readonly prisma: PrismaClient,
    private readonly log: Logger,
  ) {}

  balance(userId: string): Promise<number> {
    return walletBalance(this.prisma, userId);
  }

  /** The user's ledger, newest first; the cursor is an entry's id. */
  async entries(userId: string, page: KeysetPage): Promise<WalletLedger[]> {
    return this.prisma.walletLedger.findMany(await keysetPageArgs(this.prisma.walletLedger, page, { where: { userId }, orderBy: [{ id: 'desc' }], idOf: numericId }));
  }

  /**
   * Credits a wallet, once per requestId (entry key 'credit:<requestId>'), in one
   * statement: concurrent calls with one requestId wait on the key's unique index, and
   * all but the first post nothing; the wallet is locked before its room is checked, so
   * concurrent credits of other requestIds cannot together pass the ceiling. Returns the balance after the credit (for a replay,
   * the balance now). The same requestId for another user or amount is bad input, as is
   * a credit that would take the wallet past MAX_BALANCE_CENTS (issue WALLET_BALANCE_LIMIT).
   */
  async credit({ userId, amountCents, reason, requestId }: CreditWallet): Promise<number> {
    const entryKey = `credit:${requestId}`;
    const [posted] = await this.prisma.$queryRaw<{ balance: number | null }[]>(Prisma.sql`
      WITH wanted AS (
        SELECT ${entryKey}::text AS entry_key, ${userId}::text AS user_id, ${amountCents}::int AS delta_cents, 'OPERATOR_CREDIT'::text AS reason, ${reason}::text AS note
      ),
      ${walletFitCtes('wanted', 'entry_key')},
      credit AS (SELECT entry_key, user_id, delta_cents, reason, note FROM wallet_fits WHERE fits),
      ${walletPostingCtes('credit', { withNote: true })}
      SELECT (SELECT balance_cents FROM wallet_moved) AS balance`);
    if (posted?.balance !== null && posted?.balance !== undefined) {
      this.log.info({ userId, amountCents, reason, requestId }, 'wallet credited');
      return posted.balance;
    }
    const first = await this.prisma.walletLedger.findUnique({ where: { entryKey } });
    if (!first) throw walletLimitError('amountCents', await walletBalance(this.prisma, userId));
    if (first.userId !== userId || first.deltaCents !== amountCents) throw BadInputError.of([ruleInputIssue(['requestId'], 'REQUEST_ID_OF_ANOTHER_CREDIT', { requestId })]);
    return walletBalance(this.prisma, userId);
  }
}
