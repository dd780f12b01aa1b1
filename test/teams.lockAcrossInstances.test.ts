import { afterAll, beforeAll, expect, it } from 'vitest';
import { type App, createApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { signNotify } from '../src/domain/payments/provider.ts';
import type { SeatLocked } from '../src/domain/teams/service.ts';
import { teamKeys } from '../src/domain/teams/store.ts';
import { createLogger } from '../src/infra/logger.ts';
import { TEST_JWT_SECRET, testEnv } from './support/env.ts';
import { startedServer } from './support/lifecycle.ts';
import { TEST_PAYMENT_SECRET } from './support/payments.ts';
import { sleep, waitFor } from './support/poll.ts';
import { openInApp } from './support/teams.ts';

const env = testEnv('tm_lock_instances');
const started = startedServer(env);
const ACTIVITY = 'lock-instances';
let one: App;
let two: App;

beforeAll(async () => {
  // Two instances of the deployment in this process, without background rounds.
  const config = loadConfig({ ...env.vars, LOG_LEVEL: 'silent', JWT_SECRET: TEST_JWT_SECRET, SWEEP_INTERVAL_MS: '600000', TEAM_SWEEP_INTERVAL_MS: '600000' });
  one = await createApp(config, createLogger(config.LOG_LEVEL));
  two = await createApp(config, createLogger(config.LOG_LEVEL));
});

afterAll(async () => {
  await one?.close();
  await two?.close();
});

it('answers a lock the buyer holds already, from another instance, only once its payment is durable', async () => {
  const team = await openInApp(one, 'lock-leader', ACTIVITY);
  // Every journal statement that inserts a payment (the first lock's entry) waits behind this.
  const holder = await started.stores.sql.connect();
  let first: Promise<SeatLocked>;
  let second: Promise<SeatLocked>;
  try {
    await holder.query('BEGIN');
    await holder.query('LOCK TABLE payment IN SHARE MODE');
    first = one.teams.lock('lock-buyer', team.id);
    await waitFor('the first lock taken in Redis', async () => (await started.stores.redis.zscore(teamKeys(ACTIVITY, team.id).locks, 'lock-buyer')) !== null);

    // The same buyer on another instance (a retry after a timeout, a second tab).
    let answered = false;
    second = two.teams.lock('lock-buyer', team.id).finally(() => {
      answered = true;
    });
    await sleep(1_000);
    expect(answered, 'answered with a payment reference PostgreSQL does not hold').toBe(false);
  } finally {
    // Held past a failure, the lock would keep the file's cleanup from dropping its schema.
    await holder.query('COMMIT');
    holder.release();
  }
  const [firstLock, secondLock] = await Promise.all([first, second]);
  expect(secondLock.payment.paymentRef).toBe(firstLock.payment.paymentRef);
  const { rows } = await started.stores.sql.query('SELECT status FROM payment WHERE payment_ref = $1', [secondLock.payment.paymentRef]);
  expect(rows).toEqual([{ status: 'PENDING' }]);
  const body = Buffer.from(JSON.stringify({ paymentRef: secondLock.payment.paymentRef, amountCents: secondLock.payment.amountCents, status: 'SUCCEEDED', providerTxnId: 'lock-txn' }));
  const signature = signNotify(TEST_PAYMENT_SECRET, body, Date.now());
  expect(await two.payments.notify(body, (name) => (name === 'payment-signature' ? signature : undefined))).toEqual({ status: 200, body: { outcome: 'SEATED' } });
});
