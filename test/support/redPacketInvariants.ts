import { expect } from 'vitest';
import type { Stores } from './stores.ts';

export interface GrabRow {
  id: string;
  user_id: string;
  share_index: number;
  amount: number;
}

const keysOf = (packetId: string) => ({
  meta: `{rp:${packetId}}:meta`,
  shares: `{rp:${packetId}}:shares`,
  grabs: `{rp:${packetId}}:grabs`,
  journal: `{rp:${packetId}}:journal`,
});

/**
 * Every red-packet invariant of docs/architecture.md, checked in PostgreSQL and Redis:
 * no oversell, one share per user, amounts as split, and Redis agreeing with
 * PostgreSQL once the journal is drained. Returns the durable grabs.
 */
export async function expectRedPacketInvariants(stores: Stores, packetId: string): Promise<GrabRow[]> {
  const { rows: packets } = await stores.sql.query<{ count: number; total_amount: number; share_amounts: number[]; refunded_at: Date | null; refunded_amount: number }>(
    'SELECT count, total_amount, share_amounts, refunded_at, refunded_amount FROM red_packet WHERE id = $1',
    [packetId],
  );
  const packet = packets[0]!;
  expect(packet, `packet ${packetId} in PostgreSQL`).toBeDefined();
  const { rows: grabs } = await stores.sql.query<GrabRow>('SELECT id, user_id, share_index, amount FROM red_packet_grab WHERE packet_id = $1', [packetId]);

  // PostgreSQL: no oversell, no double grant, amounts exactly as split.
  expect(packet.share_amounts).toHaveLength(packet.count);
  expect(packet.share_amounts.reduce((a, b) => a + b, 0)).toBe(packet.total_amount);
  expect(grabs.length).toBeLessThanOrEqual(packet.count);
  expect(new Set(grabs.map((grab) => grab.user_id)).size).toBe(grabs.length);
  expect(new Set(grabs.map((grab) => grab.share_index)).size).toBe(grabs.length);
  for (const grab of grabs) expect(grab.amount).toBe(packet.share_amounts[grab.share_index]);
  const granted = grabs.reduce((sum, grab) => sum + grab.amount, 0);
  expect(granted).toBeLessThanOrEqual(packet.total_amount);
  if (packet.refunded_at) expect(granted + packet.refunded_amount).toBe(packet.total_amount);

  // Redis, when it holds the packet: its own books balance, and match PostgreSQL once the journal is empty.
  const keys = keysOf(packetId);
  const meta = await stores.redis.hgetall(keys.meta);
  if (meta.count) {
    const redisGrabs = await stores.redis.hgetall(keys.grabs);
    const remainingShares = await stores.redis.lrange(keys.shares, 0, -1);
    const remainingCount = Number(meta.remainingCount);
    const redisGranted = Object.values(redisGrabs).reduce((sum, value) => sum + Number(value.split(':')[1]), 0);
    expect(Object.keys(redisGrabs).length + remainingCount).toBe(packet.count);
    expect(remainingShares).toHaveLength(remainingCount);
    expect(Number(meta.remainingAmount)).toBe(packet.total_amount - redisGranted);
    if ((await stores.redis.xlen(keys.journal)) === 0) {
      const fromRedis = Object.entries(redisGrabs)
        .map(([user, value]) => `${user}:${value.split(':')[0]}`)
        .sort();
      const fromPostgres = grabs.map((grab) => `${grab.user_id}:${grab.share_index}`).sort();
      expect(fromRedis).toEqual(fromPostgres);
    }
  }
  return grabs;
}
