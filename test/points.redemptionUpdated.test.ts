import { randomUUID } from 'node:crypto';
import type { ExecutionResult } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { VoucherDelivery } from '../src/domain/points/notifiers.ts';
import { RedemptionUpdatedDocument, type RedemptionUpdatedSubscription } from './gql/generated.ts';
import { subscribeWs } from './support/client.ts';
import { testEnv } from './support/env.ts';
import { twoInstances } from './support/lifecycle.ts';
import { pointsAt, voucherCodes } from './support/points.ts';
import { sleep } from './support/poll.ts';
import { tokenOf } from './support/tokens.ts';
import { WebhookReceiver } from './support/webhookReceiver.ts';

const receiver = new WebhookReceiver<VoucherDelivery>();
// A 3 s webhook timeout: a hung attempt fails after it (the lease is 9 s), and retries come
// 200 ms, then 400 ms later. With 1 s, two watchers subscribing while the other test
// project ran once came in after the first attempt had failed.
const env = testEnv('points_live', { SWEEP_INTERVAL_MS: '100', POINTS_DELIVERY_TIMEOUT_MS: '3000', POINTS_DELIVERY_RETRY_MS: '200' });
beforeAll(async () => {
  env.vars.POINTS_DELIVERY_WEBHOOK_URL = await receiver.start('/vouchers');
  env.vars.POINTS_DELIVERY_WEBHOOK_SECRET = 'delivery-webhook-secret-of-at-least-32-chars';
});
// Registered after the receiver's start: the instances are given its address.
const instances = twoInstances(env);
afterAll(() => receiver.close());

type Event = ExecutionResult<RedemptionUpdatedSubscription>;
const states = (events: Event[]) => events.filter((event) => event.data).map((event) => event.data!.redemptionUpdated);
const firstErrorCode = (events: Event[]) => events[0]?.errors?.[0]?.extensions?.code;

/** One voucher redeemed by `user` through the first instance. */
async function redeem(user: string) {
  const points = pointsAt(instances.server.url);
  const goods = await points.createGoods('operator', { title: 'voucher', pointsCost: 10, stock: 1, voucherCodes: voucherCodes(`L${randomUUID().slice(0, 8)}`, 1) });
  await points.award('operator', { userId: user, amount: 10 });
  const { result } = await points.tryRedeem(user, goods.id, randomUUID());
  if (result?.__typename !== 'Redemption') throw new Error(`expected a redemption: ${JSON.stringify(result)}`);
  return result;
}

async function watch(redemptionId: string, token?: string, url = instances.other.url) {
  return instances.track(subscribeWs(url, RedemptionUpdatedDocument, { redemptionId }, token));
}

describe('redemptionUpdated over graphql-ws', () => {
  it('shows a delivery that fails, is retried and succeeds, on another instance, then completes', async () => {
    const user = 'live-owner';
    // The first attempt hangs until the webhook timeout, long enough to subscribe before it fails.
    receiver.answer = (_key, nth) => (nth === 1 ? 'hang' : nth === 2 ? 'fail' : 'ok');
    const redemption = await redeem(user);
    const owner = await watch(redemption.id, await tokenOf(user));
    const operator = await watch(redemption.id, await tokenOf('live-operator', { admin: true }), instances.server.url);
    for (const watcher of [owner, operator]) {
      await watcher.until(() => watcher.completed(), 15_000);
      for (const event of watcher.events) expect(event.errors).toBeUndefined();
      // Every state is published as it is when read, and a slow watcher skips to the newest:
      // under load the 200 ms between the two retries can pass before the first is sent.
      const seen = states(watcher.events);
      const steps = seen.map((state) => [state.status, state.delivery, state.deliveryAttempts]);
      expect(steps[0]).toEqual(['PENDING', 'QUEUED', 1]);
      expect(steps.at(-1)).toEqual(['DELIVERED', 'DELIVERED', 3]);
      const retrying = seen.filter((state) => state.delivery === 'RETRYING');
      expect(retrying.length, JSON.stringify(steps)).toBeGreaterThan(0);
      expect(steps.slice(1, -1)).toEqual(retrying.map((state) => ['PENDING', 'RETRYING', state.deliveryAttempts]));
      const attempts = retrying.map((state) => state.deliveryAttempts);
      expect(
        attempts.every((n, i) => i === 0 || n > attempts[i - 1]!),
        `attempts ${attempts} only go up`,
      ).toBe(true);
      for (const state of retrying) expect(state.nextDeliveryAttemptAt).toEqual(expect.any(String));
      expect(seen.at(-1)).toMatchObject({ id: redemption.id, userId: user, nextDeliveryAttemptAt: null, deliveredAt: expect.any(String) });
    }
    expect(receiver.of(redemption.id)).toHaveLength(3);
  }, 30_000);

  it('gives a delivered redemption and completion at once', async () => {
    receiver.answer = () => 'ok';
    const redemption = await redeem('live-late');
    const late = await watch(redemption.id, await tokenOf('live-late'));
    await late.until(() => late.completed(), 10_000);
    const seen = states(late.events);
    // Delivered already, or just being delivered: either way it ends DELIVERED.
    expect(seen.at(-1)).toMatchObject({ status: 'DELIVERED', delivery: 'DELIVERED' });
  });

  it("refuses someone else's redemption as NOT_FOUND, and sends that user nothing", async () => {
    receiver.answer = (_key, nth) => (nth === 1 ? 'fail' : 'ok');
    const redemption = await redeem('live-victim');
    const snoop = await watch(redemption.id, await tokenOf('live-snoop'));
    const owner = await watch(redemption.id, await tokenOf('live-victim'));
    await owner.until(() => owner.completed(), 10_000);
    await snoop.until((events) => events.length >= 1);
    await sleep(200);
    expect(snoop.events).toHaveLength(1);
    expect(snoop.events[0]!.data?.redemptionUpdated ?? null).toBeNull();
    expect(firstErrorCode(snoop.events)).toBe('NOT_FOUND');
  });

  it('refuses no token, an unknown id and garbage ids', async () => {
    const redemption = await redeem('live-anon');
    const anonymous = await watch(redemption.id);
    expect(firstErrorCode(await anonymous.until((events) => events.length >= 1))).toBe('UNAUTHENTICATED');
    const token = await tokenOf('live-anon');
    const unknown = await watch(randomUUID(), token);
    expect(firstErrorCode(await unknown.until((events) => events.length >= 1))).toBe('NOT_FOUND');
    for (const id of ['', 'x'.repeat(129)]) {
      const garbage = await watch(id, token);
      expect(firstErrorCode(await garbage.until((events) => events.length >= 1)), id).toBe('BAD_USER_INPUT');
    }
  });
});
