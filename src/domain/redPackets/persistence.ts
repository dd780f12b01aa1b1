import { z } from 'zod';
import { Prisma, type PrismaClient } from '../../generated/prisma/client.ts';
import { unnest } from '../../infra/db/unnest.ts';
import { conflictingEntries, entryKind } from '../../infra/journal/entryKind.ts';
import { refundsOwedFrom } from '../money/refunds.ts';
import { walletFitCtes, walletPostingCtes } from '../money/wallets.ts';
import { type CommittedRedPacket, LATEST_SHARES_MAX, type RedPacketSnapshot, committedSharesOf } from './store.ts';

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
 * Persists journaled grabs in one statement per batch, and credits each grab inserted to
 * its grabber's wallet in the same statement (ledger entry 'grab:<grant id>'), so a
 * share is durable together with its money and the durable ack needs nothing more.
 * The packet rows are share-locked so a grab can never land after the packet was
 * settled (that would break grabs + refund = total). Unique keys on the grant id,
 * (packet, user) and (packet, share) make replays no-ops, and only rows inserted now
 * are credited; a grab that clashes with a different durable grab is reported as a conflict.
 * A share its grabber's wallet cannot hold (MAX_BALANCE_CENTS) is still the grabber's:
 * the grab commits, and the share is owed to them in the refund outbox instead (WALLET_FULL,
 * source 'grab:<grant id>'), paid in once the wallet has room, so a valid grab is never
 * refused by PostgreSQL (no dead letter) and the packet's books still balance.
 */
export const grabJournalKind = entryKind({
  kind: 'redPacket.grab',
  fields: grabFields,
  async persist(db, entries) {
    const grabs = entries.map(({ fields }) => fields);
    const inserted = await db.query<{ id: string }>(Prisma.sql`
      WITH open_packets AS (
        SELECT id FROM red_packet WHERE id = ANY(${grabs.map((grab) => grab.packet)}::text[]) AND refunded_at IS NULL FOR SHARE
      ),
      inserted AS (
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
        RETURNING id, user_id, amount
      ),
      shares AS (
        SELECT 'grab:' || id AS entry_key, user_id, amount AS delta_cents, 'RED_PACKET_GRAB' AS reason FROM inserted
      ),
      ${walletFitCtes('shares', 'entry_key')},
      credits AS (SELECT entry_key, user_id, delta_cents, reason FROM wallet_fits WHERE fits),
      unheld AS (
        SELECT entry_key AS source_key, user_id, delta_cents AS amount_cents, 'WALLET_FULL'::text AS reason, NULL::text AS payment_ref FROM wallet_fits WHERE NOT fits
      ),
      owed AS (${refundsOwedFrom('unheld')}),
      ${walletPostingCtes('credits')}
      SELECT id FROM inserted`);
    return conflictingEntries(
      entries,
      (grab) => grab.grant,
      inserted.map((row) => row.id),
      async (ids) => (await db.prisma.redPacketGrab.findMany({ where: { id: { in: ids } }, select: { id: true } })).map((row) => row.id),
    );
  },
});

/** A new packet's row: its terms, as split, and who funds it. */
export type NewRedPacket = Omit<RedPacketSnapshot, 'refundedAmount' | 'grabs'> & { minAmount: number; maxAmount: number; requestId?: string | null };

/**
 * Inserts the packet and, for a WALLET packet, debits its total from the sender's wallet
 * (ledger entry 'packet:<id>', reason RED_PACKET_SENT), in one statement: a packet never
 * exists without its debit, nor a debit without its packet. The debit is conditional on
 * the balance, so two packets racing for the last cents cannot both pass; the loser waits
 * for the winner's row lock and sees its balance. One statement rather than an
 * interactive transaction, so a storm of creates holds no pool connection across round
 * trips. Returns whether the packet was created; false: the wallet holds too little.
 */
export async function insertPacket(prisma: PrismaClient, packet: NewRedPacket): Promise<boolean> {
  const rows = await prisma.$queryRaw<{ created: boolean }[]>(Prisma.sql`
    WITH debited AS (
      UPDATE wallet_account SET balance_cents = balance_cents - ${packet.totalAmount}
      WHERE ${packet.fundedBy} = 'WALLET' AND user_id = ${packet.senderId} AND balance_cents >= ${packet.totalAmount}
      RETURNING user_id
    ),
    packet AS (
      INSERT INTO red_packet (id, sender_id, funded_by, total_amount, count, mode, min_amount, max_amount, greeting, share_amounts, expires_at, request_id)
      SELECT ${packet.id}, ${packet.senderId}, ${packet.fundedBy}::"RedPacketFunding", ${packet.totalAmount}, ${packet.count}, ${packet.mode}::"SplitMode",
             ${packet.minAmount}, ${packet.maxAmount}, ${packet.greeting}, ${packet.shareAmounts}::int[], ${packet.expiresAt}, ${packet.requestId ?? null}
      WHERE ${packet.fundedBy} = 'SHOP' OR EXISTS (SELECT 1 FROM debited)
      RETURNING id, sender_id, total_amount, funded_by
    ),
    debit_posted AS (
      INSERT INTO wallet_ledger (entry_key, user_id, delta_cents, reason)
      SELECT 'packet:' || id, sender_id, -total_amount, 'RED_PACKET_SENT' FROM packet WHERE funded_by = 'WALLET'
    )
    SELECT EXISTS (SELECT 1 FROM packet) AS created`);
  return rows[0]?.created === true;
}

/** A packet created under a requestId, with the terms a retry must repeat. */
export type PacketOfRequest = NonNullable<Awaited<ReturnType<typeof packetOfRequest>>>;

/** The packet a sender created under `requestId`; null when there is none. */
export function packetOfRequest(prisma: PrismaClient, senderId: string, requestId: string) {
  return prisma.redPacket.findUnique({
    where: { senderId_requestId: { senderId, requestId } },
    select: { id: true, totalAmount: true, count: true, mode: true, minAmount: true, maxAmount: true, greeting: true, fundedBy: true },
  });
}

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
 * Settles an expired packet: whatever no grab took is its remainder. The row lock waits
 * for grab commits holding a share lock, and the sum runs in a later statement, so it
 * sees them. A WALLET packet's remainder is owed back to its sender in the same
 * statement, through the refund outbox (source 'packet:<id>'); a SHOP packet's stays
 * with the shop, which paid only what was grabbed. Returns the remainder, or null if
 * the packet was settled already.
 */
export async function refundRemainder(prisma: PrismaClient, packetId: string): Promise<number | null> {
  const [, refunded] = await prisma.$transaction([
    prisma.$queryRaw`SELECT id FROM red_packet WHERE id = ${packetId} AND refunded_at IS NULL FOR UPDATE`,
    prisma.$queryRaw<{ refunded_amount: number }[]>`
      WITH settled AS (
        UPDATE red_packet p
        SET refunded_at = now(),
            refunded_amount = p.total_amount - COALESCE((SELECT SUM(g.amount) FROM red_packet_grab g WHERE g.packet_id = p.id), 0)
        WHERE p.id = ${packetId} AND p.refunded_at IS NULL
        RETURNING p.id, p.sender_id, p.funded_by, p.refunded_amount
      ),
      remainder AS (
        SELECT 'packet:' || id AS source_key, sender_id AS user_id, refunded_amount AS amount_cents, 'PACKET_EXPIRED' AS reason, NULL::text AS payment_ref
        FROM settled WHERE funded_by = 'WALLET' AND refunded_amount > 0
      ),
      owed AS (${refundsOwedFrom('remainder')})
      SELECT refunded_amount FROM settled`,
  ]);
  return refunded[0]?.refunded_amount ?? null;
}

/**
 * The packet as PostgreSQL has committed it, in one statement (one snapshot): its
 * counts, newest shares, best luck and refund can never disagree, as a grab in flight
 * would make them. Slim whatever the packet's size: the shares themselves stay in
 * PostgreSQL, named by a bitmap of their indexes (see committedSharesOf).
 */
export async function loadCommitted(prisma: PrismaClient, packetId: string): Promise<CommittedRedPacket | null> {
  const share = Prisma.sql`json_build_object('packetId', g.packet_id, 'userId', g.user_id, 'amount', g.amount, 'grabbedAt', g.grabbed_at)`;
  const rows = await prisma.$queryRaw<(Omit<CommittedRedPacket, 'committedShares'> & { refunded: boolean; shareIndexes: number[] })[]>`
    WITH g AS (SELECT packet_id, user_id, share_index, amount, grabbed_at FROM red_packet_grab WHERE packet_id = ${packetId})
    SELECT p.sender_id AS "senderId", p.funded_by::text AS "fundedBy", p.total_amount AS "totalAmount", p.count, p.mode::text AS mode, p.greeting,
           p.expires_at AS "expiresAt", p.refunded_at IS NOT NULL AS refunded, p.refunded_amount AS "refundedAmount",
           (SELECT COUNT(*)::int FROM g) AS "grabbedCount",
           (SELECT COALESCE(SUM(amount), 0)::int FROM g) AS "grabbedAmount",
           (SELECT COALESCE(array_agg(share_index), '{}') FROM g) AS "shareIndexes",
           (SELECT COALESCE(json_agg(${share} ORDER BY g.grabbed_at DESC, g.share_index DESC), '[]')
              FROM (SELECT * FROM g ORDER BY grabbed_at DESC, share_index DESC LIMIT ${LATEST_SHARES_MAX}) g) AS "latestShares",
           (SELECT ${share} FROM g ORDER BY g.amount DESC, g.grabbed_at, g.share_index LIMIT 1) AS "bestLuck"
    FROM red_packet p
    WHERE p.id = ${packetId}`;
  const row = rows[0];
  if (!row) return null;
  const { refunded, shareIndexes, ...packet } = row;
  return { ...packet, refundedAmount: refunded ? packet.refundedAmount : null, committedShares: committedSharesOf(shareIndexes) };
}
