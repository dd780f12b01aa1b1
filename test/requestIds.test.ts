import { print } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CreditWalletDocument, RedPacketUpdatedDocument } from './gql/generated.ts';
import { gql, openWs } from './support/client.ts';
import { testEnv } from './support/env.ts';
import { sendNotify } from './support/payments.ts';
import { pointsAt, voucherCodes } from './support/points.ts';
import { waitFor } from './support/poll.ts';
import { redPacketsAt } from './support/redPackets.ts';
import { type ServerProcess, startServerProcess } from './support/server.ts';
import { type Stores, openStores } from './support/stores.ts';
import { tokenOf } from './support/tokens.ts';

// Debug: every operation logs a line of its own ("graphql operation done"); a quick sweeper expires packets soon.
const env = testEnv('request_ids', { LOG_LEVEL: 'debug', SWEEP_INTERVAL_MS: '100' });
let server: ServerProcess;
let stores: Stores;

beforeAll(async () => {
  stores = openStores(env);
  server = await startServerProcess(env.vars);
}, 90_000);

afterAll(async () => {
  await server?.stop();
  await stores?.cleanup();
});

interface LogLine {
  msg: string;
  reqId?: string;
  [field: string]: unknown;
}

/** The server's JSON log lines so far. */
function logLines(): LogLine[] {
  return server
    .output()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as LogLine);
}

async function linesWhere(what: string, match: (line: LogLine) => boolean, count = 1): Promise<LogLine[]> {
  await waitFor(what, () => logLines().filter(match).length >= count, { timeoutMs: 30_000 });
  return logLines().filter(match);
}

const operationDone = (operation: string) => (line: LogLine) => line.msg === 'graphql operation done' && line.operation === operation;

describe('request ids on log lines', () => {
  it('stamp the lines a service logs deep inside each of hundreds of concurrent requests with that request id', async () => {
    const operator = await tokenOf('ids-operator', { admin: true });
    const credits = 200;
    const answers = await Promise.all(
      Array.from({ length: credits }, (_, i) =>
        gql(server.url, CreditWalletDocument, { userId: `ids-user-${i % 20}`, amountCents: 1, reason: 'ids', requestId: `ids-credit-${i}` }, operator, {
          'x-request-id': `ids-http-${i}`,
        }),
      ),
    );
    expect(answers.every((answer) => typeof answer.body.data?.creditWallet === 'number')).toBe(true);

    // The wallet service logs with the app's logger; the line names the credit, and must name its request.
    const credited = await linesWhere('every credit logged', (line) => line.msg === 'wallet credited' && String(line.requestId).startsWith('ids-credit-'), credits);
    for (const line of credited) expect(line.reqId, String(line.requestId)).toBe(String(line.requestId).replace('ids-credit-', 'ids-http-'));
    const done = await linesWhere('every operation logged', (line) => operationDone('CreditWallet')(line) && String(line.reqId).startsWith('ids-http-'), credits);
    expect(new Set(done.map((line) => line.reqId)).size).toBe(credits);
  });

  it('stamp a refusal logged by the payment service behind the notify endpoint', async () => {
    const answer = await sendNotify(server.url, { paymentRef: 'ids-no-such-payment', amountCents: 100, status: 'SUCCEEDED', providerTxnId: 'ids-txn' }, { requestId: 'ids-notify-1' });
    expect(answer.status).toBeGreaterThanOrEqual(400);
    const [refused] = await linesWhere('the refusal logged', (line) => line.msg === 'payment notify for an unknown paymentRef refused' && line.paymentRef === 'ids-no-such-payment');
    expect(refused!.reqId).toBe('ids-notify-1');
  });

  it('give each graphql-ws operation an id of its own, carried by its service lines', async () => {
    const packet = await redPacketsAt(server.url).create('ids-ws-sender', { totalAmount: 10, count: 2 });
    const connection = openWs(server.url, { authorization: `Bearer ${await tokenOf('ids-ws-operator', { admin: true })}` });
    try {
      const watching = connection.subscribe({ query: print(RedPacketUpdatedDocument), variables: { packetId: packet.id } });
      await watching.until((events) => events.length > 0);
      const crediting = connection.subscribe<{ creditWallet: number }>({
        query: print(CreditWalletDocument),
        variables: { userId: 'ids-ws-user', amountCents: 1, reason: 'ids', requestId: 'ids-ws-credit' },
      });
      const [answer] = await crediting.until((events) => events.length > 0);
      expect(answer?.data?.creditWallet, JSON.stringify(answer)).toBeTypeOf('number');
      watching.close();
    } finally {
      connection.dispose();
    }
    const [credited] = await linesWhere('the ws credit logged', (line) => line.msg === 'wallet credited' && line.requestId === 'ids-ws-credit');
    expect(credited!.reqId).toMatch(/^[0-9a-f-]{36}$/);
    const [creditDone] = await linesWhere('the ws mutation done', (line) => operationDone('CreditWallet')(line) && line.reqId === credited!.reqId);
    expect(creditDone!.type).toBe('mutation');
    const [watchDone] = await linesWhere('the subscription logged', (line) => operationDone('RedPacketUpdated')(line) && line.reqId !== undefined);
    expect(watchDone!.reqId).toMatch(/^[0-9a-f-]{36}$/);
    expect(watchDone!.reqId).not.toBe(credited!.reqId);
  });

  it('leave them off background work, even work a request set going', async () => {
    const packet = await redPacketsAt(server.url).create('ids-expiring-sender', { totalAmount: 10, count: 5, expiresInSeconds: 1 });
    // The sweeper refunds the packet a request created: no request is being served then.
    const [refunded] = await linesWhere('the expired packet refunded', (line) => line.msg === 'refunded an expired red packet' && line.packetId === packet.id);
    expect(refunded!.reqId).toBeUndefined();

    // A redemption's voucher is delivered after the group commit that made it durable, a batch of many requests'.
    const points = pointsAt(server.url);
    const goods = await points.createGoods('ids-operator', { title: 'ids card', pointsCost: 1, stock: 3, voucherCodes: voucherCodes('IDS', 3) });
    await points.award('ids-operator', { userId: 'ids-redeemer', amount: 3 });
    const redemptions = await Promise.all([0, 1, 2].map((i) => points.tryRedeem('ids-redeemer', goods.id, `ids-redeem-${i}`)));
    expect(redemptions.every((attempt) => attempt.result?.__typename === 'Redemption')).toBe(true);
    const delivered = await linesWhere('the vouchers delivered', (line) => line.msg === 'voucher delivered' && line.goodsId === goods.id, 3);
    for (const line of delivered) expect(line.reqId).toBeUndefined();
    const redeemed = await linesWhere('the redemptions done', (line) => operationDone('RedeemPoints')(line), 3);
    for (const line of redeemed) expect(line.reqId).toMatch(/^[0-9a-f-]{36}$/);
  });
});
