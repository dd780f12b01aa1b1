import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.ts';
import { InsufficientFunds } from '../src/domain/money/problems.ts';
import { oweRefunds } from '../src/domain/money/refunds.ts';
import { debitWallet, postToWallets, walletBalance } from '../src/domain/money/wallets.ts';
import { type Database, openDatabase } from '../src/infra/db/database.ts';
import { applyMigrations } from '../src/infra/db/migrations.ts';
import { createLogger } from '../src/infra/logger.ts';
import { testEnv } from './support/env.ts';
import { openStores } from './support/stores.ts';

const env = testEnv('money_ledger');
const stores = openStores(env);
let db: Database;

beforeAll(async () => {
  db = await openDatabase(loadConfig(env.vars));
  await applyMigrations(db, createLogger('warn'));
});
afterAll(async () => {
  await db?.close();
  await stores.cleanup();
});

/** Every wallet's balance equals its ledger's sum, and none is negative. */
async function expectLedgerMatchesBalances(): Promise<void> {
  const { rows } = await stores.sql.query<{ user_id: string; balance: number; ledger: number }>(`
    SELECT a.user_id, a.balance_cents AS balance, COALESCE(SUM(l.delta_cents), 0)::int AS ledger
    FROM wallet_account a LEFT JOIN wallet_ledger l ON l.user_id = a.user_id GROUP BY a.user_id, a.balance_cents`);
  for (const row of rows) {
    expect(row.balance, row.user_id).toBe(row.ledger);
    expect(row.balance).toBeGreaterThanOrEqual(0);
  }
}

describe('wallet postings', () => {
  it('post each entry key once, however often and however concurrently they are posted', async () => {
    const user = `u-${randomUUID()}`;
    const postings = Array.from({ length: 20 }, (_, i) => ({ entryKey: `credit:${user}:${i}`, userId: user, deltaCents: 100, reason: 'OPERATOR_CREDIT' as const }));
    const posted = await Promise.all(Array.from({ length: 10 }, () => postToWallets(db.prisma, postings)));
    expect(posted.flat().sort()).toEqual(postings.map((posting) => posting.entryKey).sort());
    expect(await walletBalance(db.prisma, user)).toBe(2000);
    await expectLedgerMatchesBalances();
  });

  it('take money out of a funded wallet, down to zero', async () => {
    const user = `u-${randomUUID()}`;
    await postToWallets(db.prisma, [{ entryKey: `in:${user}`, userId: user, deltaCents: 80, reason: 'TOP_UP' }]);
    await postToWallets(db.prisma, [
      { entryKey: `out1:${user}`, userId: user, deltaCents: -30, reason: 'RED_PACKET_SENT' },
      { entryKey: `out2:${user}`, userId: user, deltaCents: -50, reason: 'RED_PACKET_SENT' },
    ]);
    expect(await walletBalance(db.prisma, user)).toBe(0);
    await expectLedgerMatchesBalances();
  });

  it('refuse a posting that would overdraw a wallet, and post nothing of its statement', async () => {
    const user = `u-${randomUUID()}`;
    await postToWallets(db.prisma, [{ entryKey: `in:${user}`, userId: user, deltaCents: 50, reason: 'TOP_UP' }]);
    await expect(
      postToWallets(db.prisma, [
        { entryKey: `other:${user}`, userId: `u-${randomUUID()}`, deltaCents: 10, reason: 'TOP_UP' },
        { entryKey: `out:${user}`, userId: user, deltaCents: -51, reason: 'RED_PACKET_SENT' },
      ]),
    ).rejects.toThrow();
    expect(await walletBalance(db.prisma, user)).toBe(50);
    expect(await db.prisma.walletLedger.count({ where: { entryKey: { in: [`out:${user}`, `other:${user}`] } } })).toBe(0);
  });
});

describe('wallet debits', () => {
  it('let exactly as many concurrent debits through as the balance covers', async () => {
    const user = `u-${randomUUID()}`;
    await postToWallets(db.prisma, [{ entryKey: `in:${user}`, userId: user, deltaCents: 1000, reason: 'TOP_UP' }]);
    const results = await Promise.allSettled(
      Array.from({ length: 25 }, (_, i) => db.prisma.$transaction((tx) => debitWallet(tx, { entryKey: `debit:${user}:${i}`, userId: user, amountCents: 100, reason: 'RED_PACKET_SENT' }))),
    );
    expect(results.filter((result) => result.status === 'fulfilled')).toHaveLength(10);
    for (const result of results) if (result.status === 'rejected') expect(result.reason).toBeInstanceOf(InsufficientFunds);
    expect(await walletBalance(db.prisma, user)).toBe(0);
    await expectLedgerMatchesBalances();
  });

  it('treat a repeated entry key as a replay that moves nothing', async () => {
    const user = `u-${randomUUID()}`;
    await postToWallets(db.prisma, [{ entryKey: `in:${user}`, userId: user, deltaCents: 300, reason: 'TOP_UP' }]);
    const debit = { entryKey: `debit:${user}`, userId: user, amountCents: 200, reason: 'RED_PACKET_SENT' as const };
    expect(await db.prisma.$transaction((tx) => debitWallet(tx, debit))).toBe(100);
    expect(await db.prisma.$transaction((tx) => debitWallet(tx, debit))).toBe(100);
  });

  it('say how much the wallet holds when it refuses', async () => {
    const user = `u-${randomUUID()}`;
    const refusal = await db.prisma
      .$transaction((tx) => debitWallet(tx, { entryKey: `debit:${user}`, userId: user, amountCents: 1, reason: 'RED_PACKET_SENT' }))
      .catch((error: unknown) => error);
    expect(refusal).toBeInstanceOf(InsufficientFunds);
    expect(refusal).toMatchObject({ balanceCents: 0, amountCents: 1 });
  });
});

describe('the refund outbox', () => {
  it('owes a refund once per source key, however concurrently it is decided', async () => {
    const user = `u-${randomUUID()}`;
    const refund = { sourceKey: `packet:${randomUUID()}`, userId: user, amountCents: 42, reason: 'PACKET_EXPIRED' as const, paymentRef: null };
    const owed = await Promise.all(Array.from({ length: 10 }, () => oweRefunds(db.prisma, [refund])));
    expect(owed.flat()).toEqual([refund.sourceKey]);
    const rows = await db.prisma.refund.findMany({ where: { userId: user } });
    expect(rows).toMatchObject([{ amountCents: 42, status: 'PENDING', paidTo: null, reason: 'PACKET_EXPIRED' }]);
  });
});
