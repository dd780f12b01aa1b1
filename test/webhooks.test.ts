import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebhookRefundProvider } from '../src/domain/money/refundDelivery.ts';
import { WebhookVoucherNotifier } from '../src/domain/points/notifiers.ts';

// A webhook that redirects every POST to /hook (302 or 307, by the query) to /landing,
// which answers 200 and counts what reaches it.
const landed: string[] = [];
let server: Server;
let base: string;

beforeAll(async () => {
  server = createServer((request, response) => {
    const url = new URL(request.url ?? '/', 'http://localhost');
    request.resume();
    if (url.pathname === '/landing') {
      landed.push(request.method ?? '');
      response.writeHead(200).end('welcome');
    } else {
      response.writeHead(Number(url.searchParams.get('status')), { location: '/landing' }).end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

describe('outgoing webhooks', () => {
  it('take a redirect for a failure to retry, and follow it nowhere: not as a GET (302), not with the signed body (307)', async () => {
    for (const status of [302, 307]) {
      const refunds = new WebhookRefundProvider(`${base}/hook?status=${status}`, 'refund-webhook-secret-of-at-least-32-chars', 1_000);
      await expect(refunds.refund({ refundId: 'r1', paymentRef: 'pay_1', userId: 'u1', amountCents: 990, reason: 'TEAM_FAILED' })).rejects.toThrow(`answered ${status}`);
      const vouchers = new WebhookVoucherNotifier(`${base}/hook?status=${status}`, 'delivery-webhook-secret-of-at-least-32-chars', 1_000);
      const [outcome] = await vouchers.deliver([{ idempotencyKey: 'd1', userId: 'u1', goodsId: 'g1', voucherCode: 'CODE-1', pointsSpent: 10, attempt: 1 }]);
      expect(outcome?.status).toBe('rejected');
    }
    expect(landed).toEqual([]);
  });
});
