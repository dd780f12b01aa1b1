import { beforeAll, describe, expect, it } from 'vitest';
import { aliasScope } from '../src/domain/privacy.ts';
import { redPacketKeys } from '../src/domain/redPackets/store.ts';
import { GrabRedPacketDocument } from './gql/generated.ts';
import { testEnv } from './support/env.ts';
import { startedServer } from './support/lifecycle.ts';
import { waitFor } from './support/poll.ts';
import { aliasOf } from './support/privacy.ts';
import { expectRedPacketInvariants } from './support/redPacketInvariants.ts';
import { type RedPacketsClient, redPacketsAt } from './support/redPackets.ts';
import { stormOf, tallyOf } from './support/storm.ts';
import { tokenOf } from './support/tokens.ts';

// The settlement worker looks for expired packets five times a second.
const env = testEnv('rp_expiry', { SWEEP_INTERVAL_MS: '200' });
const started = startedServer(env);
let redPackets: RedPacketsClient;

beforeAll(() => {
  redPackets = redPacketsAt(started.server.url);
});

const grab = (user: string, packetId: string) => redPackets.grab(user, packetId);

const readPacket = (id: string) => redPackets.packet('reader', id);

interface SettlementRow {
  refunded_at: Date | null;
  refunded_amount: number;
  granted: number;
}

async function settlement(packetId: string): Promise<SettlementRow> {
  const { rows } = await started.stores.sql.query<SettlementRow>(
    `SELECT p.refunded_at, p.refunded_amount, COALESCE((SELECT SUM(g.amount) FROM red_packet_grab g WHERE g.packet_id = p.id), 0)::int AS granted
     FROM red_packet p WHERE p.id = $1`,
    [packetId],
  );
  return rows[0]!;
}

/** Waits, without touching the API, until the settlement worker has refunded the packet. */
const settled = (packetId: string) =>
  waitFor(
    `packet ${packetId} to be refunded`,
    async () => {
      const row = await settlement(packetId);
      return row.refunded_at ? row : undefined;
    },
    { timeoutMs: 8_000, intervalMs: 100 },
  );

describe('expiry and refunds', () => {
  it('refunds what is left of an expired packet that nobody looks at, then reports it EXPIRED', async () => {
    const TOTAL = 1_000;
    const packet = await redPackets.create('expiry-sender', { totalAmount: TOTAL, count: 5, mode: 'RANDOM', expiresInSeconds: 2 });
    expect(packet.status).toBe('ACTIVE');

    const won = new Map<string, number>();
    for (const user of ['early-1', 'early-2']) {
      const result = await grab(user, packet.id);
      expect(result.__typename).toBe('GrabbedShare');
      if (result.__typename === 'GrabbedShare') won.set(user, result.amount);
    }
    const granted = [...won.values()].reduce((a, b) => a + b, 0);
    const createdAt = Date.now();

    // Nobody queries the packet; the worker settles it on its own within a few seconds.
    const row = await settled(packet.id);
    expect(Date.now() - createdAt).toBeLessThan(6_000);
    expect(row.refunded_at!.getTime()).toBeGreaterThanOrEqual(Date.parse(packet.expiresAt));
    expect(row.granted).toBe(granted);
    expect(row.refunded_amount).toBe(TOTAL - granted);
    expect(row.refunded_amount).toBeGreaterThan(0);

    // PostgreSQL is settled first, Redis right after; the API reads Redis.
    const expired = await waitFor(
      'the refund to show in the API',
      async () => {
        const state = await readPacket(packet.id);
        return state?.refundedAmount === TOTAL - granted ? state : undefined;
      },
      { timeoutMs: 2_000, intervalMs: 50 },
    );
    expect(expired).toMatchObject({ status: 'EXPIRED', remainingCount: 3, remainingAmount: TOTAL - granted, refundedAmount: TOTAL - granted });
    const grabbers = [...won].map(([user, amount]) => [aliasOf(aliasScope.redPacket(packet.id), user), amount]);
    expect(expired.shares.map((share) => [share.userId, share.amount]).sort()).toEqual(grabbers.sort());
    expect(expired.bestLuck).toBeNull();

    // Too late for newcomers; earlier grabbers still see their share.
    const late = await grab('late-user', packet.id);
    expect(late.__typename).toBe('RedPacketExpired');
    for (const [user, amount] of won) {
      expect(await grab(user, packet.id)).toMatchObject({ __typename: 'AlreadyGrabbed', share: { userId: user, amount } });
    }

    const grabs = await expectRedPacketInvariants(started.stores, packet.id);
    expect(grabs).toHaveLength(2);
    expect((await settlement(packet.id)).refunded_amount).toBe(TOTAL - granted);
  });

  it('reports a fully grabbed packet EMPTY with nothing to refund, before and after expiry', async () => {
    const TOTAL = 900;
    const packet = await redPackets.create('expiry-sender', { totalAmount: TOTAL, count: 3, mode: 'EQUAL', expiresInSeconds: 2 });
    for (const user of ['full-1', 'full-2', 'full-3']) expect((await grab(user, packet.id)).__typename).toBe('GrabbedShare');
    expect((await grab('full-4', packet.id)).__typename).toBe('RedPacketEmpty');

    const empty = await readPacket(packet.id);
    expect(empty).toMatchObject({ status: 'EMPTY', remainingCount: 0, remainingAmount: 0, refundedAmount: 0 });
    expect(empty?.bestLuck?.amount).toBe(300);

    const row = await settled(packet.id);
    expect(row).toMatchObject({ refunded_amount: 0, granted: TOTAL });
    expect(await readPacket(packet.id)).toMatchObject({ status: 'EMPTY', refundedAmount: 0 });
    expect((await grab('full-4', packet.id)).__typename).toBe('RedPacketEmpty');
    expect(await expectRedPacketInvariants(started.stores, packet.id)).toHaveLength(3);
  });

  it('lets an operator close a packet early; what is left is refunded', async () => {
    const TOTAL = 5_000;
    const packet = await redPackets.create('expiry-sender', { totalAmount: TOTAL, count: 10, mode: 'NORMAL' });
    const first = await grab('before-close', packet.id);
    expect(first.__typename).toBe('GrabbedShare');
    const granted = first.__typename === 'GrabbedShare' ? first.amount : 0;

    const closed = await redPackets.close('op', packet.id);
    expect(closed).toMatchObject({ __typename: 'RedPacket', id: packet.id, status: 'EXPIRED', remainingCount: 9 });
    if (closed.__typename === 'RedPacket') expect(Date.parse(closed.expiresAt)).toBeLessThan(Date.parse(packet.expiresAt));
    expect((await grab('after-close', packet.id)).__typename).toBe('RedPacketExpired');
    expect(await grab('before-close', packet.id)).toMatchObject({ __typename: 'AlreadyGrabbed', share: { amount: granted } });

    const row = await settled(packet.id);
    expect(row.refunded_amount).toBe(TOTAL - granted);
    const state = await waitFor(
      'the refund to show in the API',
      async () => {
        const current = await readPacket(packet.id);
        return current?.refundedAmount === TOTAL - granted ? current : undefined;
      },
      { timeoutMs: 2_000, intervalMs: 50 },
    );
    expect(state).toMatchObject({ status: 'EXPIRED', remainingAmount: TOTAL - granted });

    // Closing again changes nothing; an unknown packet is NotFound.
    const again = await redPackets.close('op', packet.id);
    expect(again).toMatchObject({ __typename: 'RedPacket', status: 'EXPIRED', refundedAmount: TOTAL - granted });
    if (again.__typename === 'RedPacket' && closed.__typename === 'RedPacket') expect(again.expiresAt).toBe(closed.expiresAt);
    const missing = await redPackets.close('op', '00000000-0000-0000-0000-000000000000');
    expect(missing.__typename).toBe('NotFound');
    expect((await settlement(packet.id)).refunded_amount).toBe(TOTAL - granted);
    expect(await expectRedPacketInvariants(started.stores, packet.id)).toHaveLength(1);
  });

  it('mends a close that failed between PostgreSQL and Redis when it is sent again', async () => {
    const packet = await redPackets.create('expiry-sender', { totalAmount: 300, count: 3, mode: 'EQUAL' });
    // The first step of a close, PostgreSQL, without its second, Redis.
    await started.stores.sql.query('UPDATE red_packet SET expires_at = now() WHERE id = $1', [packet.id]);
    const closed = await redPackets.close('op', packet.id);
    if (closed.__typename !== 'RedPacket') throw new Error(JSON.stringify(closed));
    expect(closed.status).toBe('EXPIRED');
    expect((await grab('after-mended-close', packet.id)).__typename).toBe('RedPacketExpired');
    const { rows } = await started.stores.sql.query<{ expires_at: Date }>('SELECT expires_at FROM red_packet WHERE id = $1', [packet.id]);
    expect(rows[0]!.expires_at.toISOString()).toBe(closed.expiresAt);
    expect((await settled(packet.id)).refunded_amount).toBe(300);
  });

  it('closes a packet while 400 grabs are in flight: no grab is dated after the end it records, and the books balance', async () => {
    const TOTAL = 100_000;
    const packet = await redPackets.create('expiry-sender', { totalAmount: TOTAL, count: 1_000, mode: 'NORMAL' });
    const tokens = await Promise.all(Array.from({ length: 400 }, (_, i) => tokenOf(`closing-${i}`)));
    const storm = stormOf(started.server.url, GrabRedPacketDocument, { packetId: packet.id }, tokens);
    await waitFor('the first grabs to be answered', () => storm.progress.answered >= 50, { intervalMs: 2 });
    const closed = await redPackets.close('op', packet.id);
    if (closed.__typename !== 'RedPacket') throw new Error(JSON.stringify(closed));
    const kinds = await tallyOf(storm.answers, (data) => data.grabRedPacket.__typename);
    expect(kinds.get('RedPacketExpired'), JSON.stringify([...kinds])).toBeGreaterThan(0);

    const row = await settled(packet.id);
    expect(row.refunded_amount + row.granted).toBe(TOTAL);
    const grabs = await expectRedPacketInvariants(started.stores, packet.id);
    expect(grabs).toHaveLength(kinds.get('GrabbedShare') ?? 0);
    const { rows } = await started.stores.sql.query<{ expires_at: Date; last_grab: Date }>(
      'SELECT p.expires_at, (SELECT MAX(g.grabbed_at) FROM red_packet_grab g WHERE g.packet_id = p.id) AS last_grab FROM red_packet p WHERE p.id = $1',
      [packet.id],
    );
    expect(rows[0]!.expires_at.toISOString()).toBe(closed.expiresAt);
    expect(rows[0]!.last_grab.getTime(), `last grab ${rows[0]!.last_grab.toISOString()}, end ${closed.expiresAt}`).toBeLessThan(rows[0]!.expires_at.getTime());
  });

  it('goes on past a packet whose refund fails every round, and logs it with its id', async () => {
    // The oldest packet due, whose journal cannot be read (a key of another type): it fails every round.
    const poisoned = 'poisoned-packet';
    await started.stores.sql.query(
      `INSERT INTO red_packet (id, sender_id, funded_by, total_amount, count, mode, min_amount, max_amount, share_amounts, expires_at)
       VALUES ($1, 'expiry-sender', 'SHOP', 100, 1, 'EQUAL', 100, 100, '{100}', now() - interval '1 hour')`,
      [poisoned],
    );
    await started.stores.redis.set(redPacketKeys(poisoned).journal, 'not a stream');
    try {
      const packet = await redPackets.create('expiry-sender', { totalAmount: 500, count: 5, mode: 'EQUAL', expiresInSeconds: 1 });
      expect((await settled(packet.id)).refunded_amount).toBe(500);
      expect((await settlement(poisoned)).refunded_at).toBeNull();
      const failure = started.server
        .output()
        .split('\n')
        .find((line) => line.includes('could not refund an expired red packet'));
      expect(JSON.parse(failure!)).toMatchObject({ level: 50, packetId: poisoned });
    } finally {
      await started.stores.sql.query('DELETE FROM red_packet WHERE id = $1', [poisoned]);
      await started.stores.redis.del(...Object.values(redPacketKeys(poisoned)));
    }
  });
});
