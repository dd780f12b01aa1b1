import { type JournalEntry, type JournalHandler, conflictingEntries } from '../../infra/journal/journal.ts';
import type { PrismaClient } from '../../generated/prisma/client.ts';
import type { CommittedRedPacket, RedPacketSnapshot } from './store.ts';

/**
 * Persists journaled grabs in one statement per batch. The packet rows are share-locked
 * so a grab can never land after the packet was settled (that would break
 * grabs + refund = total). Unique keys on the grant id, (packet, user) and
 * (packet, share) make replays no-ops; a grab that clashes with a different durable
 * grab is reported as a conflict.
 */
export const grabJournalHandler: JournalHandler = {
  kind: 'redPacket.grab',
  async persist(db: PrismaClient, entries: JournalEntry[]): Promise<JournalEntry[]> {
    const rows = entries.map(({ fields }) => fields);
    const grantIds = rows.map((row) => row.grant!);
    const inserted = await db.$queryRawUnsafe<{ id: string }[]>(
      `WITH open_packets AS (
         SELECT id FROM red_packet WHERE id = ANY($2::text[]) AND refunded_at IS NULL FOR SHARE
       )
       INSERT INTO red_packet_grab (id, packet_id, user_id, share_index, amount, grabbed_at)
       SELECT g.id, g.packet_id, g.user_id, g.share_index, g.amount, to_timestamp(g.at_ms / 1000.0)
       FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::int[], $6::bigint[])
            AS g(id, packet_id, user_id, share_index, amount, at_ms)
       WHERE g.packet_id IN (SELECT id FROM open_packets)
       ON CONFLICT DO NOTHING
       RETURNING id`,
      grantIds,
      rows.map((row) => row.packet!),
      rows.map((row) => row.user!),
      rows.map((row) => Number(row.index)),
      rows.map((row) => Number(row.amount)),
      rows.map((row) => Number(row.at)),
    );
    return conflictingEntries(entries, ({ fields }) => fields.grant!, inserted.map((row) => row.id), async (ids) =>
      (await db.redPacketGrab.findMany({ where: { id: { in: ids } }, select: { id: true } })).map((row) => row.id),
    );
  },
};

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

export async function packetsDueForSettlement(prisma: PrismaClient, limit: number): Promise<string[]> {
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
 * sees them. Returns the refunded amount, or null if the packet was already settled.
 */
export async function settleRefund(prisma: PrismaClient, packetId: string): Promise<number | null> {
  const [, settled] = await prisma.$transaction([
    prisma.$queryRawUnsafe(`SELECT id FROM red_packet WHERE id = $1 AND refunded_at IS NULL FOR UPDATE`, packetId),
    prisma.$queryRawUnsafe<{ refunded_amount: number }[]>(
      `UPDATE red_packet p
       SET refunded_at = now(),
           refunded_amount = p.total_amount - COALESCE((SELECT SUM(g.amount) FROM red_packet_grab g WHERE g.packet_id = p.id), 0)
       WHERE p.id = $1 AND p.refunded_at IS NULL
       RETURNING p.refunded_amount`,
      packetId,
    ),
  ]);
  return settled[0]?.refunded_amount ?? null;
}

/**
 * The packet as PostgreSQL has committed it, in one statement (one snapshot): its
 * grabs and its refund can never disagree, as a grab in flight would make them.
 */
export async function loadCommitted(prisma: PrismaClient, packetId: string): Promise<CommittedRedPacket | null> {
  const rows = await prisma.$queryRawUnsafe<(CommittedRedPacket & { refunded: boolean })[]>(
    `SELECT p.sender_id AS "senderId", p.total_amount AS "totalAmount", p.count, p.mode::text AS mode, p.greeting,
            p.expires_at AS "expiresAt", p.refunded_at IS NOT NULL AS refunded, p.refunded_amount AS "refundedAmount",
            COALESCE(json_agg(json_build_object('packetId', g.packet_id, 'userId', g.user_id, 'amount', g.amount, 'grabbedAt', g.grabbed_at)
                              ORDER BY g.grabbed_at, g.share_index) FILTER (WHERE g.id IS NOT NULL), '[]') AS shares
     FROM red_packet p LEFT JOIN red_packet_grab g ON g.packet_id = p.id
     WHERE p.id = $1
     GROUP BY p.id`,
    packetId,
  );
  const row = rows[0];
  if (!row) return null;
  const { refunded, ...packet } = row;
  return { ...packet, refundedAmount: refunded ? packet.refundedAmount : null };
}
