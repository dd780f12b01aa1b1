import { randomUUID } from 'node:crypto';
import { Agent as HttpAgent, request as httpRequest } from 'node:http';
import { beforeAll, describe, expect, it } from 'vitest';
import { TeamStore, teamKeys } from '../src/domain/teams/store.ts';
import { Scripts } from '../src/infra/redis/scripts.ts';
import { ConfirmTeamSeatDocument, SandboxPayDocument, TopUpWalletDocument } from './gql/generated.ts';
import { errorCodes, gql } from './support/client.ts';
import { testEnv } from './support/env.ts';
import { startedServer } from './support/lifecycle.ts';
import { paymentViolations } from './support/paymentInvariants.ts';
import { notifyUrl, sendNotify } from './support/payments.ts';
import { waitFor } from './support/poll.ts';
import { GROUP_PRICE_CENTS, type TeamsClient, teamsAt } from './support/teams.ts';
import { tokenOf } from './support/tokens.ts';

const env = testEnv('pay_notify');
const started = startedServer(env);
const ACTIVITY = 'notify-activity';
let teams: TeamsClient;
let teamId: string;
/** A live lock's payment, which refused notifies must leave unpaid. */
let pending: { paymentRef: string; amountCents: number };

beforeAll(async () => {
  teams = teamsAt(started.server.url);
  teamId = (await teams.open('notify-leader', { activityId: ACTIVITY, capacity: 6 })).id;
  const locked = await teams.lock('notify-payer', teamId);
  if (locked.__typename !== 'SeatLocked') throw new Error(`got ${locked.__typename}`);
  pending = { paymentRef: locked.payment.paymentRef, amountCents: locked.payment.amountCents };
});

/** Everything a notify could change: payments, members, refunds, wallets, the team's keys. */
async function state() {
  const { sql, redis } = started.stores;
  const rows = async (query: string) => (await sql.query(query)).rows;
  const keys = teamKeys(ACTIVITY, teamId);
  return {
    payments: await rows('SELECT payment_ref, status, provider_txn_id, settled_at FROM payment ORDER BY payment_ref'),
    members: await rows('SELECT team_id, user_id, payment_ref FROM team_member ORDER BY team_id, user_id'),
    refunds: await rows('SELECT source_key, amount_cents FROM refund ORDER BY source_key'),
    ledger: await rows('SELECT entry_key, delta_cents FROM wallet_ledger ORDER BY entry_key'),
    wallets: await rows('SELECT user_id, balance_cents FROM wallet_account ORDER BY user_id'),
    redis: { members: await redis.hgetall(keys.members), locks: await redis.zrange(keys.locks, 0, -1), meta: await redis.hgetall(keys.meta) },
  };
}

/**
 * Compares the state around one request. Refunds owed by earlier notifies are paid into
 * wallets by the outbox worker in the background, so it waits for those first.
 */
async function unchanged<T>(request: () => Promise<T>): Promise<T> {
  await waitFor('the refunds owed so far paid', async () => (await started.stores.sql.query("SELECT 1 FROM refund WHERE status = 'PENDING'")).rowCount === 0, { timeoutMs: 30_000 });
  const before = await state();
  const result = await request();
  expect(await state()).toEqual(before);
  return result;
}

const succeeded = (payment: { paymentRef: string; amountCents: number }, providerTxnId = `txn-${payment.paymentRef}`) => ({
  ...payment,
  status: 'SUCCEEDED' as const,
  providerTxnId,
});

describe('a notify that is not the provider’s, or not well-formed, gets a 4xx and changes nothing', () => {
  const bad: [string, () => Promise<{ status: number }>, number][] = [
    ['no signature', () => sendNotify(started.server.url, succeeded(pending), { signature: null }), 401],
    ['a signature of another secret', () => sendNotify(started.server.url, succeeded(pending), { secret: 'another-secret-of-at-least-32-characters!!' }), 401],
    ['a garbage signature', () => sendNotify(started.server.url, succeeded(pending), { signature: 'garbage' }), 401],
    ['a signature without v1', () => sendNotify(started.server.url, succeeded(pending), { signature: `t=${Math.floor(Date.now() / 1000)}` }), 401],
    ['a signature with a short v1', () => sendNotify(started.server.url, succeeded(pending), { signature: `t=${Math.floor(Date.now() / 1000)},v1=abcd` }), 401],
    ['a replay signed 6 minutes ago', () => sendNotify(started.server.url, succeeded(pending), { signedAtMs: Date.now() - 6 * 60_000 }), 401],
    ['a signature from 6 minutes ahead', () => sendNotify(started.server.url, succeeded(pending), { signedAtMs: Date.now() + 6 * 60_000 }), 401],
    ['a body that is not JSON', () => sendNotify(started.server.url, 'paymentRef=x&amountCents=990'), 400],
    ['a JSON array', () => sendNotify(started.server.url, '[1,2]'), 400],
    ['an empty body', () => sendNotify(started.server.url, ''), 400],
    ['no paymentRef', () => sendNotify(started.server.url, { amountCents: 990, status: 'SUCCEEDED', providerTxnId: 't' }), 400],
    ['an amount as a string', () => sendNotify(started.server.url, { ...succeeded(pending), amountCents: '990' }), 400],
    ['a fractional amount', () => sendNotify(started.server.url, { ...succeeded(pending), amountCents: 9.9 }), 400],
    ['a negative amount', () => sendNotify(started.server.url, { ...succeeded(pending), amountCents: -990 }), 400],
    ['an unknown status', () => sendNotify(started.server.url, { ...succeeded(pending), status: 'PAID' }), 400],
    ['no providerTxnId', () => sendNotify(started.server.url, { ...succeeded(pending), providerTxnId: '' }), 400],
    ['an unknown paymentRef', () => sendNotify(started.server.url, succeeded({ paymentRef: 'pay_forged', amountCents: GROUP_PRICE_CENTS })), 404],
    ['a wrong amount', () => sendNotify(started.server.url, succeeded({ ...pending, amountCents: 1 })), 409],
    ['a GET', async () => fetch(notifyUrl(started.server.url)), 405],
  ];
  it.each(bad)('%s', async (_name, send, status) => {
    expect((await unchanged(send)).status).toBe(status);
  });

  it('a body over 64 KiB', async () => {
    const response = await unchanged(() => sendNotify(started.server.url, { ...succeeded(pending), padding: 'x'.repeat(70_000) }));
    expect(response.status).toBe(413);
  });

  it('a body over 64 KiB on a kept-alive connection: the connection serves the notifies after it', async () => {
    // One connection, kept alive: every notify after the refused one goes on it, for 3 s.
    const agent = new HttpAgent({ keepAlive: true, maxSockets: 1 });
    try {
      const post = (body: string) =>
        new Promise<{ status?: number; error?: string }>((resolve) => {
          const request = httpRequest(
            notifyUrl(started.server.url),
            { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } },
            (response) => {
              response.resume();
              response.on('end', () => resolve({ status: response.statusCode }));
            },
          );
          request.on('error', (error) => resolve({ error: error.message }));
          request.end(body);
        });
      expect(await post(JSON.stringify({ padding: 'x'.repeat(70_000) }))).toEqual({ status: 413 });
      const answers: { status?: number; error?: string }[] = [];
      for (const until = performance.now() + 3_000; performance.now() < until; ) answers.push(await post('{}'));
      expect(answers.filter((answer) => answer.status !== 401)).toEqual([]);
    } finally {
      agent.destroy();
    }
  });

  it('a body streamed without end, refused at once: the rest is never read', async () => {
    const { status, sentBytes } = await unchanged(() => streamEndlessBody(notifyUrl(started.server.url)));
    expect(status).toBe(413);
    expect(sentBytes, 'bytes sent before the answer').toBeLessThan(16 * 1024 * 1024);
  });
});

describe('a notify of a seat payment', () => {
  it('seats the payer once, however often it is repeated; a second transaction for it is owed back', async () => {
    const first = await sendNotify(started.server.url, succeeded(pending));
    expect(first).toEqual({ status: 200, body: { outcome: 'SEATED' } });
    const seated = await state();
    expect(seated.members).toContainEqual({ team_id: teamId, user_id: 'notify-payer', payment_ref: pending.paymentRef });
    // The provider retries: the same answer, nothing new.
    expect(await unchanged(() => sendNotify(started.server.url, succeeded(pending)))).toEqual({ status: 200, body: { outcome: 'SEATED' } });
    // A FAILED after the success changes nothing either, and says the success stands.
    expect(await unchanged(() => sendNotify(started.server.url, { ...succeeded(pending), status: 'FAILED' }))).toEqual({ status: 200, body: { outcome: 'ALREADY_SUCCEEDED' } });
    // The provider charged twice for one reference: the second charge is owed back, once.
    const twice = succeeded(pending, 'txn-second');
    expect(await sendNotify(started.server.url, twice)).toEqual({ status: 200, body: { outcome: 'DUPLICATE_REFUND_OWED' } });
    expect(await unchanged(() => sendNotify(started.server.url, twice))).toEqual({ status: 200, body: { outcome: 'DUPLICATE_REFUND_OWED' } });
    const { rows } = await started.stores.sql.query('SELECT source_key, reason, amount_cents FROM refund WHERE payment_ref = $1', [pending.paymentRef]);
    expect(rows).toEqual([{ source_key: `payment:${pending.paymentRef}:txn:txn-second`, reason: 'DUPLICATE_PAYMENT', amount_cents: GROUP_PRICE_CENTS }]);
  });

  it('records a failure, and a success after it still seats the payer', async () => {
    const locked = await teams.lock('notify-retrier', teamId);
    if (locked.__typename !== 'SeatLocked') throw new Error(`got ${locked.__typename}`);
    expect(locked.payment.amountCents).toBe(GROUP_PRICE_CENTS);
    const failed = await sendNotify(started.server.url, { ...succeeded(locked.payment, 'txn-declined'), status: 'FAILED' });
    expect(failed).toEqual({ status: 200, body: { outcome: 'FAILED' } });
    expect((await started.stores.sql.query('SELECT status FROM payment WHERE payment_ref = $1', [locked.payment.paymentRef])).rows).toEqual([{ status: 'FAILED' }]);
    expect(await sendNotify(started.server.url, succeeded(locked.payment))).toEqual({ status: 200, body: { outcome: 'SEATED' } });
    expect(await paymentViolations(started.stores, [teamId])).toEqual([]);
  });

  it('for a lock given back seats no one, and is owed back once', async () => {
    const locked = await teams.lock('notify-quitter', teamId);
    if (locked.__typename !== 'SeatLocked') throw new Error(`got ${locked.__typename}`);
    await teams.release('notify-quitter', teamId);
    expect(await sendNotify(started.server.url, succeeded(locked.payment))).toEqual({ status: 200, body: { outcome: 'REFUND_OWED' } });
    expect(await unchanged(() => sendNotify(started.server.url, succeeded(locked.payment)))).toEqual({ status: 200, body: { outcome: 'REFUND_OWED' } });
    expect((await teams.team('notify-leader', teamId))?.members).toHaveLength(3);
    expect(await paymentViolations(started.stores, [teamId])).toEqual([]);
  });
});

describe("a seat payment's deadline", () => {
  const ms = (iso: string) => Date.parse(iso);
  const storedExpiry = async (paymentRef: string) =>
    (await started.stores.sql.query<{ expires_at: Date }>('SELECT expires_at FROM payment WHERE payment_ref = $1', [paymentRef])).rows[0]?.expires_at.toISOString();
  /** Until the scripts' clock (Redis TIME) is past `iso`. */
  const untilPast = (iso: string, what: string) =>
    waitFor(
      what,
      async () => {
        const [seconds, micros] = await started.stores.redis.time();
        return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000) > ms(iso);
      },
      { timeoutMs: 15_000, intervalMs: 20 },
    );

  it('comes a tenth of the lock before the seat frees, in the answer and in PostgreSQL', async () => {
    const team = (await teams.open('grace-leader', { activityId: 'notify-grace', lockSeconds: 5 })).id;
    const locked = await teams.lock('grace-payer', team);
    if (locked.__typename !== 'SeatLocked') throw new Error(`got ${locked.__typename}`);
    // The lock and its countdown keep their 5 s; the provider is told to stop taking money 0.5 s sooner.
    expect(ms(locked.lock.expiresAt) - ms(locked.lock.lockedAt)).toBe(5_000);
    expect(ms(locked.lock.expiresAt) - ms(locked.payment.expiresAt)).toBe(500);
    expect(await storedExpiry(locked.payment.paymentRef)).toBe(locked.payment.expiresAt);
    // A repeat answers the same payment.
    expect(await teams.lock('grace-payer', team)).toMatchObject({ payment: locked.payment, lock: locked.lock });
  });

  it("seats a payer whose notify arrives after the provider's deadline, while the seat still holds", async () => {
    // The team's deadline frees the seat before the minute's lock would: the payment is due
    // 6 s (a tenth of the lock) before it, so the notify below has seconds to spare.
    const opened = await teams.open('grace-late-leader', { activityId: 'notify-grace-deadline', capacity: 2, lockSeconds: 60, formationSeconds: 8 });
    const locked = await teams.lock('grace-late-payer', opened.id);
    if (locked.__typename !== 'SeatLocked') throw new Error(`got ${locked.__typename}`);
    expect(ms(opened.deadline) - ms(locked.payment.expiresAt)).toBe(6_000);
    expect(await storedExpiry(locked.payment.paymentRef)).toBe(locked.payment.expiresAt);
    // Paid at the last moment the provider allowed; its notify comes once that moment has passed.
    await untilPast(locked.payment.expiresAt, "the provider's deadline to pass");
    expect(await sendNotify(started.server.url, succeeded(locked.payment))).toEqual({ status: 200, body: { outcome: 'SEATED' } });
    expect(await teams.team('grace-late-leader', opened.id)).toMatchObject({ status: 'COMPLETE' });
    expect(await paymentViolations(started.stores, [opened.id])).toEqual([]);
  });
});

describe("an operator's seat and the provider's payment", () => {
  /** A team of its own that fails 3 s after it opens, so its refunds can be read. */
  const failingTeam = async (leader: string) => (await teams.open(leader, { activityId: 'notify-failing', capacity: 5, formationSeconds: 3 })).id;
  const refundsOf = async (paymentRef: string) => (await started.stores.sql.query('SELECT source_key, reason FROM refund WHERE payment_ref = $1 ORDER BY source_key', [paymentRef])).rows;

  it("cannot seat a buyer with a payment owed back as too late, nor with another user's payment", async () => {
    const quitter = await teams.lock('op-late', teamId);
    if (quitter.__typename !== 'SeatLocked') throw new Error(`got ${quitter.__typename}`);
    await teams.release('op-late', teamId);
    expect(await sendNotify(started.server.url, succeeded(quitter.payment))).toEqual({ status: 200, body: { outcome: 'REFUND_OWED' } });
    const owner = await teams.lock('op-owner', teamId);
    if (owner.__typename !== 'SeatLocked') throw new Error(`got ${owner.__typename}`);
    for (const [user, paymentRef] of [
      ['op-late', quitter.payment.paymentRef],
      ['op-someone-else', owner.payment.paymentRef],
    ] as const) {
      const response = await unchanged(() => teams.raw(ConfirmTeamSeatDocument, { teamId, userId: user, paymentRef }, 'ops', { admin: true }));
      expect(errorCodes(response), user).toEqual(['BAD_USER_INPUT']);
    }
  });

  it('an operator seat racing a late notify: Redis refuses the reference the notify found too late, before its refund commits', async () => {
    const quitter = await teams.lock('op-racer', teamId);
    if (quitter.__typename !== 'SeatLocked') throw new Error(`got ${quitter.__typename}`);
    await teams.release('op-racer', teamId);
    // The notify's script runs first; PostgreSQL has no refund yet when the operator's runs.
    const store = new TeamStore(started.stores.redis, new Scripts(started.stores.redis));
    const { paymentRef } = quitter.payment;
    expect((await store.confirm(ACTIVITY, teamId, 'op-racer', paymentRef, randomUUID(), { providerTxnId: 'txn-race' })).kind).toBe('late');
    expect((await store.confirm(ACTIVITY, teamId, 'op-racer', paymentRef, randomUUID(), {})).kind).toBe('paymentRefunded');
  });

  it("a seat an operator confirmed with the buyer's own payment is paid by its notify, and refunded once when the team fails", async () => {
    const team = await failingTeam('op-leader');
    const locked = await teams.lock('op-buyer', team);
    if (locked.__typename !== 'SeatLocked') throw new Error(`got ${locked.__typename}`);
    await teams.confirm('op-buyer', team, locked.payment.paymentRef);
    expect(await sendNotify(started.server.url, succeeded(locked.payment))).toEqual({ status: 200, body: { outcome: 'SEATED' } });
    const { rows } = await started.stores.sql.query('SELECT status FROM payment WHERE payment_ref = $1', [locked.payment.paymentRef]);
    expect(rows).toEqual([{ status: 'SUCCEEDED' }]);
    expect(await refundsOf(locked.payment.paymentRef)).toEqual([]);
    await waitFor('the team to fail and its refunds to be owed', async () => (await refundsOf(locked.payment.paymentRef)).length > 0, { timeoutMs: 15_000 });
    expect(await refundsOf(locked.payment.paymentRef)).toEqual([{ source_key: `team:${team}:op-buyer`, reason: 'TEAM_FAILED' }]);
    expect(await paymentViolations(started.stores, [team])).toEqual([]);
  });

  it('a seat an operator confirmed is refunded when its team fails in PostgreSQL while the notify finds it open in Redis', async () => {
    const team = await failingTeam('op-leader-3');
    const locked = await teams.lock('op-racing-payer', team);
    if (locked.__typename !== 'SeatLocked') throw new Error(`got ${locked.__typename}`);
    await teams.confirm('op-racing-payer', team, locked.payment.paymentRef);
    // The losing order of the race: the failure and the refunds it owes commit (nothing is
    // owed, the payment being pending) after the notify read Redis, before it succeeds.
    await started.stores.sql.query("UPDATE team SET status = 'FAILED', closed_at = now() WHERE id = $1", [team]);
    expect(await sendNotify(started.server.url, succeeded(locked.payment))).toEqual({ status: 200, body: { outcome: 'REFUND_OWED' } });
    expect(await refundsOf(locked.payment.paymentRef)).toEqual([{ source_key: `team:${team}:op-racing-payer`, reason: 'TEAM_FAILED' }]);
    expect(await sendNotify(started.server.url, succeeded(locked.payment))).toEqual({ status: 200, body: { outcome: 'REFUND_OWED' } });
    expect(await refundsOf(locked.payment.paymentRef)).toHaveLength(1);
    expect(await paymentViolations(started.stores, [team])).toEqual([]);
  });

  it('a seat an operator confirmed is refunded once when its payment comes after the team failed', async () => {
    const team = await failingTeam('op-leader-2');
    const locked = await teams.lock('op-slow-payer', team);
    if (locked.__typename !== 'SeatLocked') throw new Error(`got ${locked.__typename}`);
    await teams.confirm('op-slow-payer', team, locked.payment.paymentRef);
    // Failed by the sweeper, in PostgreSQL: a team past its deadline reads FAILED before then.
    const failedInPostgres = async () => (await started.stores.sql.query('SELECT status FROM team WHERE id = $1', [team])).rows[0]?.status === 'FAILED';
    await waitFor('the team to fail', failedInPostgres, { timeoutMs: 15_000 });
    // The team failed with the payment still pending: nothing was owed then.
    expect(await refundsOf(locked.payment.paymentRef)).toEqual([]);
    expect(await sendNotify(started.server.url, succeeded(locked.payment))).toEqual({ status: 200, body: { outcome: 'REFUND_OWED' } });
    expect(await sendNotify(started.server.url, succeeded(locked.payment))).toEqual({ status: 200, body: { outcome: 'REFUND_OWED' } });
    expect(await refundsOf(locked.payment.paymentRef)).toEqual([{ source_key: `team:${team}:op-slow-payer`, reason: 'TEAM_FAILED' }]);
    expect(await paymentViolations(started.stores, [team])).toEqual([]);
  });
});

describe('a wallet top-up', () => {
  it('is credited once its notify says SUCCEEDED, once however often it is notified', async () => {
    const { body } = await gql(started.server.url, TopUpWalletDocument, { amountCents: 5000 }, await tokenOf('topper'));
    const intent = body.data!.topUpWallet;
    expect(intent).toMatchObject({ amountCents: 5000, paymentRef: expect.stringMatching(/^pay_[\w-]{24}$/) });
    const balance = async () => (await started.stores.sql.query('SELECT balance_cents FROM wallet_account WHERE user_id = $1', ['topper'])).rows[0]?.balance_cents ?? 0;
    expect(await balance()).toBe(0);
    expect(await sendNotify(started.server.url, succeeded(intent))).toEqual({ status: 200, body: { outcome: 'CREDITED' } });
    expect(await unchanged(() => sendNotify(started.server.url, succeeded(intent)))).toEqual({ status: 200, body: { outcome: 'CREDITED' } });
    expect(await balance()).toBe(5000);
  });
});

describe('the sandbox (development and test only)', () => {
  it("pays the caller's own payment through the signed notify, and no one else's", async () => {
    const locked = await teams.lock('sandbox-buyer', teamId);
    if (locked.__typename !== 'SeatLocked') throw new Error(`got ${locked.__typename}`);
    const theirs = await unchanged(async () => gql(started.server.url, SandboxPayDocument, { paymentRef: locked.payment.paymentRef }, await tokenOf('sandbox-stranger')));
    expect(errorCodes(theirs)).toEqual(['NOT_FOUND']);
    const paid = await gql(started.server.url, SandboxPayDocument, { paymentRef: locked.payment.paymentRef }, await tokenOf('sandbox-buyer'));
    expect(paid.body.data?.sandboxPay).toEqual({ paymentRef: locked.payment.paymentRef, purpose: 'TEAM_SEAT', amountCents: GROUP_PRICE_CENTS, status: 'SUCCEEDED', outcome: 'SEATED' });
    expect((await teams.team('sandbox-buyer', teamId))?.members.map((member) => member.userId)).toContain('sandbox-buyer');
  });
});

describe('who may call what', () => {
  const user = () => tokenOf('matrix-user');
  const operator = () => tokenOf('matrix-ops', { admin: true });

  it('confirmTeamSeat: operators only; signed-in users get FORBIDDEN, anonymous callers UNAUTHENTICATED', async () => {
    const variables = { teamId, userId: 'matrix-user', paymentRef: 'i-did-not-pay' };
    expect(errorCodes(await unchanged(() => gql(started.server.url, ConfirmTeamSeatDocument, variables)))).toEqual(['UNAUTHENTICATED']);
    expect(errorCodes(await unchanged(async () => gql(started.server.url, ConfirmTeamSeatDocument, variables, await user())))).toEqual(['FORBIDDEN']);
    const confirmed = await gql(started.server.url, ConfirmTeamSeatDocument, variables, await operator());
    expect(confirmed.body.data?.confirmTeamSeat.__typename).toBe('Team');
  });

  it('topUpWallet and sandboxPay: signed-in users and operators; anonymous callers UNAUTHENTICATED', async () => {
    expect(errorCodes(await unchanged(() => gql(started.server.url, TopUpWalletDocument, { amountCents: 100 })))).toEqual(['UNAUTHENTICATED']);
    expect(errorCodes(await unchanged(() => gql(started.server.url, SandboxPayDocument, { paymentRef: 'pay_x' })))).toEqual(['UNAUTHENTICATED']);
    for (const token of [await user(), await operator()]) {
      expect((await gql(started.server.url, TopUpWalletDocument, { amountCents: 100 }, token)).body.data?.topUpWallet.amountCents).toBe(100);
    }
  });

  it('bad arguments are BAD_USER_INPUT and change nothing', async () => {
    const token = await user();
    for (const amountCents of [0, -1, 10_000_001, 2 ** 31]) {
      expect(errorCodes(await unchanged(() => gql(started.server.url, TopUpWalletDocument, { amountCents }, token))), String(amountCents)).toEqual(['BAD_USER_INPUT']);
    }
    for (const paymentRef of ['', '   ', 'p'.repeat(129)]) {
      expect(errorCodes(await unchanged(() => gql(started.server.url, SandboxPayDocument, { paymentRef }, token))), paymentRef).toEqual(['BAD_USER_INPUT']);
    }
    for (const userId of ['', 'u'.repeat(129)]) {
      const variables = { teamId, userId, paymentRef: 'manual' };
      expect(errorCodes(await unchanged(async () => gql(started.server.url, ConfirmTeamSeatDocument, variables, await operator()))), userId).toEqual(['BAD_USER_INPUT']);
    }
  });
});

/** POSTs a chunked body of up to 256 MiB, as fast as the server takes it, until an answer comes. */
function streamEndlessBody(url: string): Promise<{ status: number | undefined; sentBytes: number }> {
  return new Promise((resolve, reject) => {
    const chunk = Buffer.alloc(64 * 1024, 0x20);
    let sentBytes = 0;
    let answered = false;
    const request = httpRequest(url, { method: 'POST', headers: { 'content-type': 'application/json' } });
    request.on('response', (response) => {
      answered = true;
      response.resume();
      resolve({ status: response.statusCode, sentBytes });
      request.destroy();
    });
    request.on('error', (error) => answered || reject(error));
    const pump = () => {
      while (!answered && sentBytes < 256 * 1024 * 1024) {
        sentBytes += chunk.length;
        if (!request.write(chunk)) return void request.once('drain', pump);
      }
      if (!answered) request.end();
    };
    pump();
  });
}
