import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CreateRedPacketDocument } from './gql/generated.ts';
import { testEnv } from './support/env.ts';
import { startedServer } from './support/lifecycle.ts';
import { expectMoneyInvariants } from './support/moneyInvariants.ts';
import { waitFor } from './support/poll.ts';
import { expectRedPacketInvariants } from './support/redPacketInvariants.ts';
import { type RedPacketsClient, redPacketsAt } from './support/redPackets.ts';
import { signAhead } from './support/tokens.ts';
import { type TestWallets, testWallets } from './support/wallets.ts';

// The settlement worker looks for expired packets five times a second.
const env = testEnv('rp_money', { SWEEP_INTERVAL_MS: '200' });
const started = startedServer(env);
let redPackets: RedPacketsClient;
let wallets: TestWallets;

beforeAll(() => {
  redPackets = redPacketsAt(started.server.url);
  wallets = testWallets(env);
});
afterAll(() => wallets?.close());

const balanceOf = async (user: string) =>
  (await started.stores.sql.query<{ balance_cents: number }>('SELECT balance_cents FROM wallet_account WHERE user_id = $1', [user])).rows[0]?.balance_cents ?? 0;

describe('red packets funded from wallets, in a storm', () => {
  it('debits exactly the senders who can pay, credits every grab, and owes every remainder back: money is conserved', async () => {
    const PACKET = 3_000;
    const SHARES = 8;
    // Each sender sends two packets at once. 150 hold enough for one of them only, 50
    // for neither, 50 hold nothing: exactly one packet each for the first, none for the rest.
    const canPayOne = Array.from({ length: 150 }, (_, i) => `money-rich-${i}`);
    const canPayNone = Array.from({ length: 50 }, (_, i) => `money-poor-${i}`);
    const holdNothing = Array.from({ length: 50 }, (_, i) => `money-none-${i}`);
    await wallets.fund([...canPayOne.map((user) => [user, 5_000] as const), ...canPayNone.map((user) => [user, 2_000] as const)]);
    const senders = [...canPayOne, ...canPayNone, ...holdNothing];
    await signAhead(senders);

    const sent = await Promise.all(
      senders.flatMap((sender) => [0, 1].map(async () => ({ sender, created: await redPackets.send(sender, { totalAmount: PACKET, count: SHARES, mode: 'RANDOM' }) }))),
    );
    const packetsOf = new Map<string, string[]>();
    for (const { sender, created } of sent) {
      if (created.__typename === 'RedPacket') {
        expect(created.fundedBy).toBe('WALLET');
        packetsOf.set(sender, [...(packetsOf.get(sender) ?? []), created.id]);
      } else {
        expect(created.amountCents).toBe(PACKET);
        expect(created.balanceCents, sender).toBeLessThan(PACKET);
        expect(created.message).toContain(`${(PACKET / 100).toFixed(2)} yuan`);
      }
    }
    for (const sender of canPayOne) expect(packetsOf.get(sender), sender).toHaveLength(1);
    for (const sender of [...canPayNone, ...holdNothing]) expect(packetsOf.has(sender), sender).toBe(false);
    for (const sender of canPayOne) expect(await balanceOf(sender), sender).toBe(2_000);
    const { rows: rowsBySender } = await started.stores.sql.query<{ sender_id: string; n: number }>(
      `SELECT sender_id, count(*)::int AS n FROM red_packet WHERE funded_by = 'WALLET' GROUP BY sender_id`,
    );
    expect(new Map(rowsBySender.map((row) => [row.sender_id, row.n]))).toEqual(new Map(canPayOne.map((sender) => [sender, 1])));

    // A few shop-funded packets from an operator join them, with more shares than the storm takes.
    const shopPackets = await Promise.all(Array.from({ length: 5 }, () => redPackets.create('money-operator', { totalAmount: PACKET * 10, count: 100 })));
    for (const packet of shopPackets) expect(packet.fundedBy).toBe('SHOP');
    const walletPackets = [...packetsOf.values()].flat();
    const packets = [...walletPackets, ...shopPackets.map((packet) => packet.id)];

    // 400 grabbers, three packets each, all at once: some packets empty, most keep a remainder.
    const grabbers = Array.from({ length: 400 }, (_, i) => `money-grabber-${i}`);
    await signAhead(grabbers);
    const grabs = await Promise.all(grabbers.flatMap((user, u) => [0, 1, 2].map(async (k) => ({ user, result: await redPackets.grab(user, packets[(u * 7 + k * 31) % packets.length]!) }))));
    const won = new Map<string, number>();
    for (const { user, result } of grabs) {
      expect(['GrabbedShare', 'RedPacketEmpty']).toContain(result.__typename);
      if (result.__typename === 'GrabbedShare') won.set(user, (won.get(user) ?? 0) + result.amount);
    }
    // Every acknowledged grab is in its grabber's wallet already.
    for (const user of grabbers) expect(await balanceOf(user), user).toBe(won.get(user) ?? 0);
    for (const packet of packets) await expectRedPacketInvariants(started.stores, packet);
    // Who paid survives a rebuild from PostgreSQL.
    await started.stores.redis.del(`{rp:${walletPackets[0]}}:meta`);
    expect((await redPackets.packet('money-reader', walletPackets[0]!))?.fundedBy).toBe('WALLET');
    const during = await expectMoneyInvariants(started.stores.sql, wallets.putIn);
    expect(during.heldByPackets).toBeGreaterThan(0);
    expect(during.refundsPending).toBe(0);

    // Operators end every packet; what is left goes back through the refund outbox.
    await Promise.all(packets.map((packet) => redPackets.close('money-operator', packet)));
    await waitFor(
      'every packet to be settled',
      async () => (await started.stores.sql.query<{ n: number }>('SELECT count(*)::int AS n FROM red_packet WHERE refunded_at IS NULL')).rows[0]!.n === 0,
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    const after = await expectMoneyInvariants(started.stores.sql, wallets.putIn);
    expect(after.heldByPackets).toBe(0);
    const { rows: remainders } = await started.stores.sql.query<{ funded_by: string; n: number; owed: number; left: number }>(
      `SELECT p.funded_by, count(r.id)::int AS n, COALESCE(SUM(r.amount_cents), 0)::int AS owed, SUM(p.refunded_amount)::int AS left
       FROM red_packet p LEFT JOIN refund r ON r.source_key = 'packet:' || p.id WHERE p.refunded_amount > 0 GROUP BY p.funded_by`,
    );
    const byFunding = new Map(remainders.map((row) => [row.funded_by, row]));
    // Every wallet packet with a remainder owes it to its sender; the shop's remainders stay with the shop.
    expect(byFunding.get('WALLET')?.n).toBeGreaterThan(0);
    // Owed once each, whether the refund worker has paid it into the wallet yet or not.
    expect(byFunding.get('WALLET')?.owed).toBe(byFunding.get('WALLET')?.left);
    expect(byFunding.get('SHOP')?.n).toBe(0);
    for (const packet of packets) await expectRedPacketInvariants(started.stores, packet);
    console.info(`money storm: ${walletPackets.length} wallet packets, ${won.size} grabbers paid, books ${JSON.stringify(after)}`);
  });
});

describe('a sender retrying createRedPacket with a requestId', () => {
  it('creates and debits once: 30 sends at once and a later retry all get the first packet', async () => {
    await wallets.fund([
      ['retrier', 5_000],
      ['other-retrier', 3_000],
    ]);
    await signAhead(['retrier', 'other-retrier']);
    const input = { totalAmount: 3_000, count: 3, mode: 'EQUAL' as const, greeting: '恭喜发财', requestId: 'send-1' };
    const answers = await Promise.all(Array.from({ length: 30 }, () => redPackets.send('retrier', input)));
    const first = answers[0]!;
    if (first.__typename !== 'RedPacket') throw new Error(JSON.stringify(first));
    for (const answer of [...answers, await redPackets.send('retrier', input)]) expect(answer).toMatchObject({ __typename: 'RedPacket', id: first.id });
    expect(await balanceOf('retrier')).toBe(2_000);
    const { rows } = await started.stores.sql.query<{ n: number }>("SELECT count(*)::int AS n FROM red_packet WHERE sender_id = 'retrier'");
    expect(rows[0]!.n).toBe(1);

    // Another packet under the same requestId is refused and changes nothing; another sender's is their own.
    const other = await redPackets.raw(CreateRedPacketDocument, { input: { ...input, totalAmount: 1_000 } }, 'retrier');
    expect(other.body.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', issues: [{ path: ['input', 'requestId'], code: 'REQUEST_ID_OF_ANOTHER_PACKET' }] });
    expect(await balanceOf('retrier')).toBe(2_000);
    const theirs = await redPackets.send('other-retrier', input);
    expect(theirs.__typename === 'RedPacket' && theirs.id !== first.id).toBe(true);
    expect(await balanceOf('other-retrier')).toBe(0);
    await expectRedPacketInvariants(started.stores, first.id);
    await expectMoneyInvariants(started.stores.sql, wallets.putIn);
  });
});
