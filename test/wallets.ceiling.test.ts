/*
 * A wallet at its ceiling (2^31 − 1 cents, a 32-bit balance): every way money comes in
 * either is refused up front, or settles without ever failing on the overflow
 * (docs/payments.md, "A full wallet"). Over HTTP against a started server, with a refund
 * provider, as a deployment with REFUND_WEBHOOK_URL runs.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ProviderRefund } from '../src/domain/money/refundDelivery.ts';
import { CreditWalletDocument, SandboxPayDocument, TopUpWalletDocument } from './gql/generated.ts';
import { errorCodes, gql } from './support/client.ts';
import { testEnv } from './support/env.ts';
import { startedServer } from './support/lifecycle.ts';
import { expectMoneyInvariants } from './support/moneyInvariants.ts';
import { sendNotify } from './support/payments.ts';
import { waitFor } from './support/poll.ts';
import { expectRedPacketInvariants } from './support/redPacketInvariants.ts';
import { redPacketsAt } from './support/redPackets.ts';
import { snapshotStores } from './support/stores.ts';
import { tokenOf } from './support/tokens.ts';
import { expectWalletInvariants, walletsAt } from './support/wallets.ts';
import { WebhookReceiver } from './support/webhookReceiver.ts';

const CEILING = 2_147_483_647;
/** The attacker review's balance: 47 cents of room. */
const NEAR = 2_147_483_600;
const MAX_CREDIT = 100_000_000;

// Refund rounds ten times a second, retried quickly, so a refund waiting for room is seen retried.
const env = testEnv('wallet_ceiling', { SWEEP_INTERVAL_MS: '100', REFUND_RETRY_MS: '20', REFUND_WEBHOOK_TIMEOUT_MS: '1000' });
const receiver = new WebhookReceiver<ProviderRefund>();
beforeAll(async () => {
  env.vars.REFUND_WEBHOOK_URL = await receiver.start('/refunds');
  env.vars.REFUND_WEBHOOK_SECRET = 'refund-webhook-secret-of-at-least-32-chars';
});
afterAll(() => receiver.close());
const started = startedServer(env);

let wallets: ReturnType<typeof walletsAt>;
let redPackets: ReturnType<typeof redPacketsAt>;
/** Everything credited from outside (operator credits, top-ups credited): the money in of moneyInvariants.ts. */
let moneyIn = 0;

beforeAll(() => {
  wallets = walletsAt(started.server.url);
  redPackets = redPacketsAt(started.server.url);
});

/** Brings the user's wallet from 0 to `balance` with operator credits, as an operator would. */
async function fill(user: string, balance: number): Promise<void> {
  let left = balance;
  while (left > 0) {
    const amountCents = Math.min(MAX_CREDIT, left);
    await wallets.credit('ceiling-operator', { userId: user, amountCents });
    left -= amountCents;
  }
  moneyIn += balance;
}

const balanceOf = async (user: string): Promise<number> =>
  (await started.stores.sql.query<{ balance_cents: number }>('SELECT balance_cents FROM wallet_account WHERE user_id = $1', [user])).rows[0]?.balance_cents ?? 0;

const refundsOf = async (sourceKey: string) =>
  (
    await started.stores.sql.query<{ id: string; user_id: string; amount_cents: number; reason: string; payment_ref: string | null; status: string; paid_to: string | null }>(
      'SELECT id, user_id, amount_cents, reason, payment_ref, status, paid_to FROM refund WHERE source_key = $1',
      [sourceKey],
    )
  ).rows;

const topUp = async (user: string, amountCents: number) => {
  const { body } = await gql(started.server.url, TopUpWalletDocument, { amountCents }, await tokenOf(user));
  if (!body.data) throw new Error(JSON.stringify(body.errors));
  return body.data.topUpWallet;
};

const succeeded = (intent: { paymentRef: string; amountCents: number }, providerTxnId = `txn-${intent.paymentRef}`) => ({
  paymentRef: intent.paymentRef,
  amountCents: intent.amountCents,
  status: 'SUCCEEDED' as const,
  providerTxnId,
});

/** Runs `request` and checks that no table and no key changed. */
async function unchanged<T>(request: () => Promise<T>): Promise<T> {
  const before = await snapshotStores(started.stores, env);
  const result = await request();
  expect(await snapshotStores(started.stores, env)).toEqual(before);
  return result;
}

describe('a top-up the wallet could not hold', () => {
  it('is refused up front, worded in the caller’s language, and changes nothing; one that just fits is credited', async () => {
    const user = 'ceiling-topper';
    await fill(user, NEAR);
    const token = await tokenOf(user);
    for (const [language, words] of [
      ['en', 'a wallet holds at most 21474836.47 yuan; this one holds 21474836.00, so it can take 0.47 more'],
      ['zh-CN', '钱包余额最多为 21474836.47 元；当前余额 21474836.00 元，最多还能存入 0.47 元'],
    ] as const) {
      for (const amountCents of [48, 1000, 10_000_000]) {
        const refused = await unchanged(() => gql(started.server.url, TopUpWalletDocument, { amountCents }, token, { 'accept-language': language }));
        expect(errorCodes(refused), `${language} ${amountCents}`).toEqual(['BAD_USER_INPUT']);
        expect(refused.body.errors?.[0]?.extensions?.issues).toEqual([
          { path: ['amountCents'], code: 'WALLET_BALANCE_LIMIT', message: words, values: { balanceCents: NEAR, maxCents: CEILING, roomCents: 47 } },
        ]);
      }
    }
    // Exactly the room left: accepted, and credited to the cent of the ceiling.
    const intent = await topUp(user, 47);
    expect(await sendNotify(started.server.url, succeeded(intent))).toEqual({ status: 200, body: { outcome: 'CREDITED' } });
    moneyIn += 47;
    expect(await balanceOf(user)).toBe(CEILING);
    // Full: not a cent more, by top-up or by an operator.
    expect(errorCodes(await unchanged(() => gql(started.server.url, TopUpWalletDocument, { amountCents: 1 }, token)))).toEqual(['BAD_USER_INPUT']);
    // An operator's credit past the ceiling says the same.
    const variables = { userId: user, amountCents: 1, reason: 'test', requestId: 'past-the-ceiling' };
    const credit = await unchanged(() => wallets.raw(CreditWalletDocument, variables, 'ceiling-operator', { admin: true }));
    expect(errorCodes(credit)).toEqual(['BAD_USER_INPUT']);
    expect(credit.body.errors?.[0]?.extensions?.issues).toMatchObject([{ code: 'WALLET_BALANCE_LIMIT', values: { roomCents: 0 } }]);
  });
});

describe('a top-up paid after its wallet filled up', () => {
  it('settles: the payment SUCCEEDED, its money owed back to the provider once, however often and however concurrently notified', async () => {
    const user = 'ceiling-filler';
    await fill(user, NEAR - 1000);
    const intent = await topUp(user, 1000);
    // Meanwhile an operator's credit leaves less room than the top-up.
    await wallets.credit('ceiling-operator', { userId: user, amountCents: 100 });
    moneyIn += 100;
    const before = await balanceOf(user);
    expect(before).toBe(NEAR - 900);

    expect(await sendNotify(started.server.url, succeeded(intent))).toEqual({ status: 200, body: { outcome: 'REFUND_OWED' } });
    // The provider did not see the answer, and retries, several times at once.
    const retries = await Promise.all(Array.from({ length: 8 }, () => sendNotify(started.server.url, succeeded(intent))));
    expect(retries).toEqual(Array(8).fill({ status: 200, body: { outcome: 'REFUND_OWED' } }));

    const { rows: payments } = await started.stores.sql.query('SELECT status, provider_txn_id FROM payment WHERE payment_ref = $1', [intent.paymentRef]);
    expect(payments).toEqual([{ status: 'SUCCEEDED', provider_txn_id: `txn-${intent.paymentRef}` }]);
    const owed = await refundsOf(`payment:${intent.paymentRef}`);
    expect(owed).toMatchObject([{ user_id: user, amount_cents: 1000, reason: 'WALLET_FULL', payment_ref: intent.paymentRef }]);
    const { rows: credits } = await started.stores.sql.query('SELECT 1 FROM wallet_ledger WHERE entry_key = $1', [`topup:${intent.paymentRef}`]);
    expect(credits).toEqual([]);
    expect(await balanceOf(user)).toBe(before);

    // Paid back through the provider, once, under the refund's id.
    const refundId = owed[0]!.id;
    await waitFor('the provider to be paid back', async () => (await refundsOf(`payment:${intent.paymentRef}`))[0]?.status === 'PAID', { timeoutMs: 15_000 });
    expect(await refundsOf(`payment:${intent.paymentRef}`)).toMatchObject([{ status: 'PAID', paid_to: 'PROVIDER' }]);
    expect(receiver.of(refundId).map((request) => request.body)).toEqual([{ refundId, paymentRef: intent.paymentRef, userId: user, amountCents: 1000, reason: 'WALLET_FULL' }]);

    // The wallet has room again (a packet sent): a late retry still credits nothing.
    const sent = await redPackets.send(user, { totalAmount: MAX_CREDIT, count: 10 });
    expect(sent.__typename).toBe('RedPacket');
    const roomy = await balanceOf(user);
    expect(await unchanged(() => sendNotify(started.server.url, succeeded(intent)))).toEqual({ status: 200, body: { outcome: 'REFUND_OWED' } });
    expect(await balanceOf(user)).toBe(roomy);
    // A second charge for it is owed back on its own, as for any payment.
    expect(await sendNotify(started.server.url, succeeded(intent, 'txn-again'))).toEqual({ status: 200, body: { outcome: 'DUPLICATE_REFUND_OWED' } });
    expect(await balanceOf(user)).toBe(roomy);
  });

  it('through the sandbox too: an outcome, not an INTERNAL_SERVER_ERROR', async () => {
    const user = 'ceiling-sandboxer';
    await fill(user, NEAR - 500);
    const intent = await topUp(user, 500);
    // 547 cents of room at the intent, 447 when it is paid.
    await wallets.credit('ceiling-operator', { userId: user, amountCents: 100 });
    moneyIn += 100;
    const paid = await gql(started.server.url, SandboxPayDocument, { paymentRef: intent.paymentRef }, await tokenOf(user));
    expect(paid.body.errors).toBeUndefined();
    expect(paid.body.data?.sandboxPay).toEqual({ paymentRef: intent.paymentRef, purpose: 'WALLET_TOP_UP', amountCents: 500, status: 'SUCCEEDED', outcome: 'REFUND_OWED' });
    expect(await balanceOf(user)).toBe(NEAR - 400);
  });
});

describe('a red packet share the wallet could not hold', () => {
  it('is grabbed all the same (no dead letter), owed in the refund outbox with a clear lastError, and paid in once the wallet has room', async () => {
    const user = 'ceiling-grabber';
    await fill(user, NEAR);
    const packet = await redPackets.create('ceiling-operator', { totalAmount: 1000, count: 1 });
    const grabbed = await redPackets.grab(user, packet.id);
    expect(grabbed).toMatchObject({ __typename: 'GrabbedShare', amount: 1000, remainingCount: 0 });
    expect((await started.stores.sql.query('SELECT entry_id FROM journal_dead_letter')).rows).toEqual([]);
    const { rows: grabs } = await started.stores.sql.query<{ id: string }>('SELECT id FROM red_packet_grab WHERE packet_id = $1', [packet.id]);
    expect(grabs).toHaveLength(1);
    const sourceKey = `grab:${grabs[0]!.id}`;
    expect(await refundsOf(sourceKey)).toMatchObject([{ user_id: user, amount_cents: 1000, reason: 'WALLET_FULL', payment_ref: null }]);
    expect(await balanceOf(user)).toBe(NEAR);

    // Retried, and the operators see why it waits.
    const waiting = async () => (await wallets.refunds('ceiling-operator', { status: 'PENDING', first: 100 })).nodes.find((refund) => refund.userId === user);
    await waitFor('the refund to be retried', async () => ((await waiting())?.attempts ?? 0) >= 2, { timeoutMs: 15_000 });
    expect(await waiting()).toMatchObject({
      reason: 'WALLET_FULL',
      status: 'PENDING',
      paymentRef: null,
      lastError: `the wallet of ${user} holds ${NEAR} cents and cannot hold 1000 more (at most ${CEILING}); retried until it can`,
    });

    // The grabber spends: the share is paid in on a later round.
    expect((await redPackets.send(user, { totalAmount: MAX_CREDIT, count: 10 })).__typename).toBe('RedPacket');
    await waitFor('the share to be paid in', async () => (await refundsOf(sourceKey))[0]?.status === 'PAID', { timeoutMs: 30_000 });
    expect(await refundsOf(sourceKey)).toMatchObject([{ status: 'PAID', paid_to: 'WALLET' }]);
    expect(await balanceOf(user)).toBe(NEAR - MAX_CREDIT + 1000);
    await expectRedPacketInvariants(started.stores, packet.id);
  });
});

describe('the books', () => {
  it('balance: every wallet equals its ledger, within the ceiling, and money is conserved', async () => {
    const { rows } = await started.stores.sql.query<{ max: number }>('SELECT max(balance_cents)::float8 AS max FROM wallet_account');
    expect(rows[0]!.max).toBeLessThanOrEqual(CEILING);
    await expectWalletInvariants(started.stores);
    await expectMoneyInvariants(started.stores.sql, moneyIn);
  });
});
