import { z } from 'zod';
import { Prisma, type PrismaClient } from '../../generated/prisma/client.ts';
import { unnest } from '../../infra/db/unnest.ts';
import { conflictingEntries, entryKind } from '../../infra/journal/entryKind.ts';
import type { CommittedRedPacket, RedPacketSnapshot } from './store.ts';

/** What lua/grabRedPacket.lua journals for one grant. */
const grabFields = z.object({
  grant: z.string(),
  packet: z.string(),
  user: z.string(),
  index: z.coerce.number().int(),
  amount: z.coerce.number().int(),
  at: z.coerce.number().int(),
});

/**
 * Persists journaled grabs in one statement per batch. The packet rows are share-locked
 * so a grab can never land after the packet was settled (that would break
 * grabs + refund = total). Unique keys on the grant id, (packet, user) and
 * (packet, share) make replays no-ops; a grab that clashes with a different durable
 * grab is reported as a conflict.
 */
export const grabJournalKind = entryKind({
  kind: 'redPacket.grab',
  fields: grabFields,
  async persist(db, entries) {
    const grabs = entries.map(({ fields }) => fields);
    const inserted = await db.$queryRaw<{ id: string }[]>(Prisma.sql`
      WITH open_packets AS (
        SELECT id FROM red_packet WHERE id = ANY(${grabs.map((grab) => grab.packet)}::text[]) AND refunded_at IS NULL FOR SHARE
      )
      INSERT INTO red_packet_grab (id, packet_id, user_id, share_index, amount, grabbed_at)
      SELECT g.id, g.packet_id, g.user_id, g.share_index, g.amount, to_timestamp(g.at_ms / 1000.0)
      FROM ${unnest('g', grabs, {
        id: ['text', (grab) => grab.grant],
        packet_id: ['text', (grab) => grab.packet],
        user_id: ['text', (grab) => grab.user],
        share_index: ['int', (grab) => grab.index],
        amount: ['int', (grab) => grab.amount],
        at_ms: ['bigint', (grab) => grab.at],
      })}
      WHERE g.packet_id IN (SELECT id FROM open_packets)
      ON CONFLICT DO NOTHING
      RETURNING id`);
    return conflictingEntries(
      entries,
      (grab) => grab.grant,
      inserted.map((row) => row.id),
      async (ids) => (await db.redPacketGrab.findMany({ where: { id: { in: ids } }, select: { id: true } })).map((row) => row.id),
    );
  },
});

/** A refund counts once settlement set refunded_at; before that the amount column means nothing. */
function refundOf(packet: { refundedAt: Date | null; refundedAmount: number }): number | null {
  return packet.refundedAt ? packet.refundedAmount : null;
}

export async function loadSnapshot(prisma: PrismaClient, packetId: string): Promise<RedPacketSnapshot | null> {
  const packet = await prisma.redPacket.findUnique({
    where: { id: packetId },
    include: { grabs: { select: { userId: true, shareIndex: true, amount: true, grabbedAt: true } } },
  });
  if (!packet) return null;
  return { ...packet, refundedAmount: refundOf(packet) };
}

/** The refund PostgreSQL recorded for a packet, or null while it is unsettled. */
export async function recordedRefund(prisma: PrismaClient, packetId: string): Promise<number | null> {
  const packet = await prisma.redPacket.findUnique({ where: { id: packetId }, select: { refundedAt: true, refundedAmount: true } });
  return packet ? refundOf(packet) : null;
}

export async function packetsDueForRefund(prisma: PrismaClient, limit: number): Promise<string[]> {
  const rows = await prisma.redPacket.findMany({
    where: { refundedAt: null, expiresAt: { lte: new Date() } },
    select: { id: true },
    orderBy: { expiresAt: 'asc' },
    take: limit,
  });
  return rows.map((row) => row.id);
}

/**
 * Records the refund of an expired packet: whatever no grab took. The row lock waits
 * for grab commits holding a share lock, and the sum runs in a later statement, so it
 * sees them. Returns the refunded amount, or null if the packet was refunded already.
 */
export async function refundRemainder(prisma: PrismaClient, packetId: string): Promise<number | null> {
  const [, refunded] = await prisma.$transaction([
    prisma.$queryRaw`SELECT id FROM red_packet WHERE id = ${packetId} AND refunded_at IS NULL FOR UPDATE`,
    prisma.$queryRaw<{ refunded_amount: number }[]>`
      UPDATE red_packet p
      SET refunded_at = now(),
          refunded_amount = p.total_amount - COALESCE((SELECT SUM(g.amount) FROM red_packet_grab g WHERE g.packet_id = p.id), 0)
      WHERE p.id = ${packetId} AND p.refunded_at IS NULL
      RETURNING p.refunded_amount`,
  ]);
  return refunded[0]?.refunded_amount ?? null;
}

/**
 * The packet as PostgreSQL has committed it, in one statement (one snapshot): its
 * grabs and its refund can never disagree, as a grab in flight would make them.
 */
export async function loadCommitted(prisma: PrismaClient, packetId: string): Promise<CommittedRedPacket | null> {
  const rows = await prisma.$queryRaw<(CommittedRedPacket & { refunded: boolean })[]>`
    SELECT p.sender_id AS "senderId", p.total_amount AS "totalAmount", p.count, p.mode::text AS mode, p.greeting,
            p.expires_at AS "expiresAt", p.refunded_at IS NOT NULL AS refunded, p.refunded_amount AS "refundedAmount",
            COALESCE(json_agg(json_build_object('packetId', g.packet_id, 'userId', g.user_id, 'amount', g.amount, 'grabbedAt', g.grabbed_at)
                              ORDER BY g.grabbed_at, g.share_index) FILTER (WHERE g.id IS NOT NULL), '[]') AS shares
     FROM red_packet p LEFT JOIN red_packet_grab g ON g.packet_id = p.id
     WHERE p.id = ${packetId}
     GROUP BY p.id`;
  const row = rows[0];
  if (!row) return null;
  const { refunded, ...packet } = row;
  return { ...packet, refundedAmount: refunded ? packet.refundedAmount : null };
}
