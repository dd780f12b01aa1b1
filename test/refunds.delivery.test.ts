import { createHmac, randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.ts';
import type { ProviderRefund } from '../src/domain/money/refundDelivery.ts';
import { type RefundOwed, oweRefunds } from '../src/domain/money/refunds.ts';
import { type Database, openDatabase } from '../src/infra/db/database.ts';
import { applyMigrations } from '../src/infra/db/migrations.ts';
import { createLogger } from '../src/infra/logger.ts';
import { TEST_DATABASE_URL, type TestEnv, testEnv } from './support/env.ts';
import { stopAll, stopWithin, twoInstances } from './support/lifecycle.ts';
import { sleep, waitFor } from './support/poll.ts';
import { type ServerProcess, startServerProcess } from './support/server.ts';
import { type Stores, openStores } from './support/stores.ts';
import { expectWalletInvariants, walletsAt } from './support/wallets.ts';
import { WebhookReceiver } from './support/webhookReceiver.ts';

const SECRET = 'refund-webhook-secret-of-at-least-32-chars';
const RETRY_MS = 200;
// A short webhook timeout gives a short lease (3 × timeout): a dead worker's claim runs out in 3 s.
const fast = { SWEEP_INTERVAL_MS: '100', REFUND_WEBHOOK_TIMEOUT_MS: '1000', REFUND_RETRY_MS: String(RETRY_MS) };
const racingEnv = testEnv('refunds_racing', fast);
const webhookEnv = testEnv('refunds_webhook', fast);
const cutEnv = testEnv('refunds_cut', fast);
const killEnv = testEnv('refunds_kill', fast);
const racing = twoInstances(racingEnv);
// The tests run side by side (describe.concurrent), each on its own schema and key prefix,
// the two of REFUND_WEBHOOK_URL each with a provider of its own.
const receiver = new WebhookReceiver<ProviderRefund>();
const cutReceiver = new WebhookReceiver<ProviderRefund>();
const servers: ServerProcess[] = [];
const opened = new Map<TestEnv, { stores: Stores; db: Database }>();

beforeAll(async () => {
  for (const [env, provider] of [
    [webhookEnv, receiver],
    [cutEnv, cutReceiver],
  ] as const) {
    env.vars.REFUND_WEBHOOK_URL = await provider.start('/refunds');
    env.vars.REFUND_WEBHOOK_SECRET = SECRET;
  }
});
afterAll(async () => {
  await stopAll(...servers);
  await Promise.all([receiver.close(), cutReceiver.close()]);
  for (const { stores, db } of opened.values()) {
    await db.close();
    await stores.cleanup();
  }
});

/** The env's stores and a database handle to owe refunds with, migrated (a server may not have started yet). */
async function storesOf(env: TestEnv) {
  let handles = opened.get(env);
  if (!handles) {
    const db = await openDatabase(loadConfig(env.vars));
    await applyMigrations(db, createLogger('warn'));
    handles = { stores: openStores(env), db };
    opened.set(env, handles);
  }
  return handles;
}

async function start(env: TestEnv): Promise<ServerProcess> {
  const server = await startServerProcess(env.vars);
  servers.push(server);
  return server;
}

const owed = (userId: string, amountCents: number, paymentRef: string | null = null): RefundOwed => ({
  sourceKey: `test:${randomUUID()}`,
  userId,
  amountCents,
  reason: 'TEAM_FAILED',
  paymentRef,
});

async function refundRows(stores: Stores, ids: string[]) {
  const { rows } = await stores.sql.query<{ id: string; user_id: string; status: string; paid_to: string | null; attempts: number; last_error: string | null }>(
    'SELECT id, user_id, status, paid_to, attempts, last_error FROM refund WHERE source_key = ANY($1)',
    [ids],
  );
  return rows;
}

const allPaid = (stores: Stores, keys: string[]) => async () => (await refundRows(stores, keys)).filter((row) => row.status === 'PAID').length === keys.length;

describe.concurrent('refunds to wallets, with two instances delivering', () => {
  it("pays each refund exactly once, into its user's wallet", async () => {
    const { db } = await storesOf(racingEnv);
    const users = Array.from({ length: 60 }, (_, i) => `racer-${i}`);
    const refunds = users.flatMap((user, u) => Array.from({ length: 10 }, (_, i) => owed(user, 1 + u + i)));
    // Owed a slice at a time while both instances' rounds run.
    for (let i = 0; i < refunds.length; i += 50) {
      await oweRefunds(db.prisma, refunds.slice(i, i + 50));
      await sleep(30);
    }
    const keys = refunds.map((refund) => refund.sourceKey);
    await waitFor('every refund to be paid', allPaid(racing.stores, keys), { timeoutMs: 20_000 });

    const rows = await refundRows(racing.stores, keys);
    for (const row of rows) expect(row).toMatchObject({ status: 'PAID', paid_to: 'WALLET', attempts: 1, last_error: null });
    const wallets = walletsAt(racing.server.url);
    for (const [u, user] of users.entries()) {
      const expected = refunds.filter((refund) => refund.userId === user).reduce((sum, refund) => sum + refund.amountCents, 0);
      const wallet = await wallets.wallet(user, { first: 20 });
      expect(wallet.balanceCents, user).toBe(expected);
      expect(wallet.entries.nodes.map((entry) => entry.reason)).toEqual(Array(10).fill('REFUND'));
      if (u === 0) expect((await wallets.myRefunds(user)).nodes.every((refund) => refund.status === 'PAID' && refund.paidTo === 'WALLET')).toBe(true);
    }
    await expectWalletInvariants(racing.stores);
    const paidBy = [racing.server, racing.other].map((server) => server.output().split('"refund paid"').length - 1);
    expect(paidBy[0]! + paidBy[1]!).toBe(refunds.length);
  });
});

describe.concurrent('refunds to the provider through REFUND_WEBHOOK_URL', () => {
  it('retry with growing delays under one Idempotency-Key, signed, until a 2xx; then PAID, and never sent again', async () => {
    const { stores, db } = await storesOf(webhookEnv);
    const server = await start(webhookEnv);
    receiver.answer = (_key, nth) => (nth <= 3 ? 'fail' : 'ok');
    const toProvider = [owed('payer-0', 1990, 'pay-0'), owed('payer-1', 2990, 'pay-1')];
    const toWallet = owed('payer-0', 500);
    await oweRefunds(db.prisma, [...toProvider, toWallet]);
    const keys = [...toProvider, toWallet].map((refund) => refund.sourceKey);
    await waitFor('the refunds to be paid', allPaid(stores, keys), { timeoutMs: 20_000 });

    const rows = await refundRows(stores, keys);
    for (const refund of toProvider) {
      const row = rows.find((candidate) => candidate.user_id === refund.userId && candidate.paid_to !== 'WALLET')!;
      expect(row).toMatchObject({ status: 'PAID', paid_to: 'PROVIDER', attempts: 4, last_error: null });
      const attempts = receiver.of(row.id);
      expect(attempts).toHaveLength(4);
      for (const attempt of attempts) {
        expect(attempt.body).toEqual({ refundId: row.id, paymentRef: refund.paymentRef, userId: refund.userId, amountCents: refund.amountCents, reason: 'TEAM_FAILED' });
        const [, t, v1] = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(String(attempt.headers['refund-signature']))!;
        expect(v1).toBe(createHmac('sha256', SECRET).update(`${t}.${attempt.raw}`).digest('hex'));
        expect(Math.abs(Number(t) - attempt.atMs / 1000)).toBeLessThan(60);
      }
      // Backoff: RETRY_MS, then twice, then four times as long (with slack for a busy machine's timers).
      const gaps = attempts.slice(1).map((attempt, i) => attempt.atMs - attempts[i]!.atMs);
      for (const [i, gap] of gaps.entries()) expect(gap, `gap before attempt ${i + 2}`).toBeGreaterThanOrEqual(RETRY_MS * 2 ** i * 0.9);
    }
    // A refund of wallet money goes to the wallet, never to the provider.
    expect(rows.find((row) => row.paid_to === 'WALLET')).toMatchObject({ user_id: 'payer-0', attempts: 1 });
    expect(receiver.requests.filter((request) => request.body.userId === 'payer-0')).toHaveLength(4);

    const sent = receiver.requests.length;
    await sleep(1500);
    expect(receiver.requests).toHaveLength(sent);
    await expectWalletInvariants(stores);
    await stopWithin(server);
  });

  it('retry a call that timed out or was cut off by a SIGKILL, with the same key, and pay once', async () => {
    const { stores, db } = await storesOf(cutEnv);
    const first = await start(cutEnv);
    // The first call gets no answer (beyond the 1 s timeout: retried); the second is slow but in time.
    cutReceiver.answer = (_key, nth) => (nth === 1 ? 'hang' : nth === 2 ? 'slow' : 'ok');
    const slow = owed('slow-payer', 700, `pay-${randomUUID()}`);
    await oweRefunds(db.prisma, [slow]);
    await waitFor('the slow refund to be paid', allPaid(stores, [slow.sourceKey]), { timeoutMs: 15_000 });
    const [slowRow] = await refundRows(stores, [slow.sourceKey]);
    expect(slowRow).toMatchObject({ paid_to: 'PROVIDER', attempts: 2 });
    expect(cutReceiver.of(slowRow!.id).map((request) => request.key)).toEqual([slowRow!.id, slowRow!.id]);

    // Cut off: the server dies while the provider holds the call.
    cutReceiver.answer = (_key, nth) => (nth === 1 ? 'hang' : 'ok');
    const cut = owed('cut-payer', 800, `pay-${randomUUID()}`);
    await oweRefunds(db.prisma, [cut]);
    const [cutRow] = await refundRows(stores, [cut.sourceKey]);
    await waitFor('the cut-off refund to be sent', () => cutReceiver.of(cutRow!.id).length === 1);
    await first.kill();
    expect((await refundRows(stores, [cut.sourceKey]))[0]!.status).toBe('PENDING');
    await start(cutEnv);
    await waitFor('the cut-off refund to be paid after the restart', allPaid(stores, [cut.sourceKey]), { timeoutMs: 15_000 });
    const requests = cutReceiver.of(cutRow!.id);
    expect(requests).toHaveLength(2);
    expect(requests[1]!.raw).toBe(requests[0]!.raw);
    await expectWalletInvariants(stores);
  });
});

describe.concurrent('a server SIGKILLed while it pays refunds into wallets', () => {
  it('rolls back what it was paying, and another instance pays each refund once', async () => {
    const { stores, db } = await storesOf(killEnv);
    const first = await start(killEnv);
    await walletsAt(first.url).credit('operator', { userId: 'blocked', amountCents: 1 });
    // Hold the wallet's row, so the payment statement waits inside its transaction.
    const holder = new pg.Client({ connectionString: TEST_DATABASE_URL, options: `-c search_path="${killEnv.schema}"` });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query("SELECT 1 FROM wallet_account WHERE user_id = 'blocked' FOR UPDATE");
      const refunds = [owed('blocked', 300), ...Array.from({ length: 20 }, (_, i) => owed(`bystander-${i}`, 10 + i))];
      await oweRefunds(db.prisma, refunds);
      // Whatever waits for the holder's lock is the payment (pg_stat_activity's text of a waiting extended-protocol statement lags).
      // Asked outside the holder's transaction: inside it, pg_stat_activity keeps the backends of its first read, and the
      // payment may run on a pool connection opened after that.
      const holderPid = (await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      const waiting = async () => {
        const { rows } = await stores.sql.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))', [holderPid]);
        return rows.length > 0 ? rows.map((row) => row.pid) : false;
      };
      const pids = await waitFor('the payment to wait for the wallet', waiting, { timeoutMs: 45_000 });
      await first.kill();
      // Another instance meanwhile: the dead one's leases run out, but its statement still holds the refunds.
      const second = await start(killEnv);
      // Until the leases have run out (by the database's clock), then ten of the other instance's rounds.
      const { rows: leased } = await stores.sql.query<{ ms: number }>('SELECT GREATEST(0, EXTRACT(EPOCH FROM max(locked_until) - now()) * 1000)::int AS ms FROM refund');
      await sleep(leased[0]!.ms + 1000);
      const keys = refunds.map((refund) => refund.sourceKey);
      expect((await refundRows(stores, keys)).map((row) => row.status)).toEqual(Array(keys.length).fill('PENDING'));
      // PostgreSQL ends the dead client's statement (as it does once it notices): its transaction rolls back.
      await holder.query('SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid', [pids]);
      await holder.query('ROLLBACK');
      await waitFor('the refunds to be paid by the other instance', allPaid(stores, keys), { timeoutMs: 15_000 });
      for (const row of await refundRows(stores, keys)) expect(row).toMatchObject({ status: 'PAID', paid_to: 'WALLET', attempts: 2 });
      expect((await walletsAt(second.url).wallet('blocked')).balanceCents).toBe(301);
      await expectWalletInvariants(stores);
    } finally {
      await holder.end();
    }
  });
});
