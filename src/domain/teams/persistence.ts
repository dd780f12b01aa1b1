import type { PrismaClient } from '../../generated/prisma/client.ts';
import { type JournalEntry, type JournalHandler, conflictingEntries } from '../../infra/journal/journal.ts';
import type { OpenTeamInput } from './input.ts';
import { type TeamRef, type TeamSnapshot, type TeamStatus, activityOfJournal } from './store.ts';

const TEAM_JOURNAL_KIND = 'team';

export interface SeatEvent {
  kind: 'LOCKED' | 'RELEASED' | 'MOVED' | 'EXPIRED' | 'CONFIRMED';
  team: string;
  user: string;
  at: number;
  expiresAt?: number;
}

interface RecordedMember {
  user: string;
  paymentRef?: string;
  seat: number;
  joinedAt: number;
}

/** cjson encodes an empty Lua table as `{}`. */
function jsonList<T>(text: string | undefined): T[] {
  const parsed: unknown = JSON.parse(text ?? '[]');
  return Array.isArray(parsed) ? (parsed as T[]) : [];
}

export function seatEventsOf(entry: JournalEntry): SeatEvent[] {
  return jsonList<SeatEvent>(entry.fields.events);
}

/** The teams a journaled change touched: its own, and every team its seat events name (a lock moved from another). */
export function teamsChangedBy(entry: JournalEntry): TeamRef[] {
  const activityId = activityOfJournal(entry.stream);
  return [...new Set([entry.fields.team!, ...seatEventsOf(entry).map((event) => event.team)])].map((teamId) => ({ activityId, teamId }));
}

/**
 * Persists journaled team changes in one statement per batch, plus one to mark filled teams
 * COMPLETE. No row locks: a member's seat number is unique per team and at most its capacity,
 * so PostgreSQL refuses an oversold seat by itself, and concurrent batches never wait on each
 * other. Seat events (the lock history) are inserted by their ids. A failure records the
 * members Redis held (the ones still on their way here included), marks the team FAILED and
 * records each member Redis held as owed a refund (those PostgreSQL holds follow, below).
 * Everything is keyed, so a replay inserts nothing new; a confirmation that clashes with a
 * different durable member (Redis rebuilt while confirmations were in flight) is reported
 * as a conflict.
 */
export const teamJournalHandler: JournalHandler = {
  kind: TEAM_JOURNAL_KIND,
  async persist(db: PrismaClient, entries: JournalEntry[]): Promise<JournalEntry[]> {
    const events = entries.flatMap((entry) => seatEventsOf(entry).map((event, index) => ({ ...event, id: `${entry.fields.event}:${index}` })));
    // Only a confirmation that seated its user: one refused (no lock, team closed) journals
    // just the expired locks it dropped, and is no clash with anything durable.
    const confirms = entries.filter(({ fields }) => fields.op === 'confirm' && fields.user !== undefined);
    const failures = entries.filter(({ fields }) => fields.op === 'fail');
    const failedMembers = failures.flatMap(({ fields }) => jsonList<RecordedMember>(fields.members).map((member) => ({ ...member, team: fields.team! })));
    const members = [
      ...confirms.map(({ fields }) => ({ team: fields.team!, user: fields.user!, paymentRef: fields.paymentRef, seat: Number(fields.seat), joinedAt: Number(fields.at) })),
      ...failedMembers,
    ];

    const inserted = await db.$queryRawUnsafe<{ team_id: string; user_id: string }[]>(
      `WITH joined AS (
         INSERT INTO team_member (team_id, user_id, payment_ref, seat, joined_at)
         SELECT m.team_id, m.user_id, m.payment_ref, m.seat, to_timestamp(m.joined_at_ms / 1000.0)
         FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::bigint[]) AS m(team_id, user_id, payment_ref, seat, joined_at_ms)
         JOIN team t ON t.id = m.team_id AND m.seat BETWEEN 1 AND t.capacity
         ON CONFLICT DO NOTHING
         RETURNING team_id, user_id
       ), history AS (
         INSERT INTO team_seat_event (id, team_id, user_id, kind, at, expires_at)
         SELECT e.id, e.team_id, e.user_id, e.kind::"TeamSeatEventKind", to_timestamp(e.at_ms / 1000.0), to_timestamp(e.expires_at_ms / 1000.0)
         FROM unnest($6::text[], $7::text[], $8::text[], $9::text[], $10::bigint[], $11::bigint[]) AS e(id, team_id, user_id, kind, at_ms, expires_at_ms)
         ON CONFLICT DO NOTHING
       ), failed AS (
         UPDATE team t SET status = 'FAILED', closed_at = to_timestamp(f.at_ms / 1000.0)
         FROM unnest($12::text[], $13::bigint[]) AS f(team_id, at_ms)
         WHERE t.id = f.team_id AND t.status = 'OPEN'
         RETURNING t.id, t.closed_at
       ), failing AS (
         -- Failed now, or by an earlier commit of this entry. Not a team PostgreSQL holds
         -- COMPLETE, whatever a stale Redis failed: it owes nobody a refund.
         SELECT id, closed_at FROM failed
         UNION ALL
         SELECT id, closed_at FROM team WHERE id = ANY($12::text[]) AND status = 'FAILED'
       ), refunds AS (
         -- The members Redis held and those PostgreSQL already holds, so that a reader who
         -- sees the team FAILED sees its refunds too (save a confirmation committing beside it).
         INSERT INTO team_refund (team_id, user_id, payment_ref, recorded_at)
         SELECT r.team_id, r.user_id, r.payment_ref, f.closed_at
         FROM (
           SELECT * FROM unnest($14::text[], $15::text[], $16::text[]) AS r(team_id, user_id, payment_ref)
           UNION
           SELECT m.team_id, m.user_id, m.payment_ref FROM team_member m WHERE m.team_id = ANY($12::text[])
         ) r
         JOIN failing f ON f.id = r.team_id
         ON CONFLICT DO NOTHING
       )
       SELECT team_id, user_id FROM joined`,
      members.map((member) => member.team),
      members.map((member) => member.user),
      members.map((member) => member.paymentRef ?? null),
      members.map((member) => member.seat),
      members.map((member) => member.joinedAt),
      events.map((event) => event.id),
      events.map((event) => event.team),
      events.map((event) => event.user),
      events.map((event) => event.kind),
      events.map((event) => event.at),
      events.map((event) => event.expiresAt ?? null),
      failures.map(({ fields }) => fields.team!),
      failures.map(({ fields }) => Number(fields.at)),
      failedMembers.map((member) => member.team),
      failedMembers.map((member) => member.user),
      failedMembers.map((member) => member.paymentRef ?? null),
    );
    // Every member of a FAILED team is owed a refund, not only those Redis held when it
    // failed: a confirmation may have landed after Redis was rebuilt without it, or after
    // the failure, or beside it in another batch. Run after the insert committed, so of a
    // failure and a confirmation committing at once, the later one sees both.
    const touchedTeams = [...new Set([...confirms, ...failures].map(({ fields }) => fields.team!))];
    if (touchedTeams.length > 0) {
      await db.$executeRawUnsafe(
        `INSERT INTO team_refund (team_id, user_id, payment_ref, recorded_at)
         SELECT m.team_id, m.user_id, m.payment_ref, t.closed_at FROM team_member m JOIN team t ON t.id = m.team_id
         WHERE t.id = ANY($1::text[]) AND t.status = 'FAILED'
         ON CONFLICT DO NOTHING`,
        touchedTeams,
      );
    }
    if (confirms.length === 0) return [];

    // Whoever fills a team completes it. Run after the insert committed, so of two batches
    // filling one team, the later one sees both.
    const confirmedTeams = [...new Set(confirms.map(({ fields }) => fields.team!))];
    await db.$executeRawUnsafe(
      `UPDATE team t SET status = 'COMPLETE', closed_at = (SELECT max(m.joined_at) FROM team_member m WHERE m.team_id = t.id)
       WHERE t.id = ANY($1::text[]) AND t.status = 'OPEN' AND (SELECT count(*) FROM team_member m WHERE m.team_id = t.id) >= t.capacity`,
      confirmedTeams,
    );

    // Not inserted now but already there (a replay, or the failure recorded it first) counts as durable.
    const memberKey = (team: string, user: string) => `${team}\u0000${user}`;
    return conflictingEntries(
      confirms,
      ({ fields }) => memberKey(fields.team!, fields.user!),
      inserted.map((row) => memberKey(row.team_id, row.user_id)),
      async (keys) => {
        const present = await db.teamMember.findMany({
          where: { OR: keys.map((key) => key.split('\u0000')).map(([teamId, userId]) => ({ teamId: teamId!, userId: userId! })) },
          select: { teamId: true, userId: true },
        });
        return present.map((row) => memberKey(row.teamId, row.userId));
      },
    );
  },
};

/** Inserts a new team with its leader as the first member; returns its snapshot. */
export function insertTeam(prisma: PrismaClient, { activityId, teamId }: TeamRef, leaderId: string, input: OpenTeamInput, nowMs: number): Promise<TeamSnapshot> {
  return prisma.team.create({
    data: {
      id: teamId,
      activityId,
      leaderId,
      capacity: input.capacity,
      lockSeconds: input.lockSeconds,
      deadline: new Date(nowMs + input.formationSeconds * 1000),
      createdAt: new Date(nowMs),
      members: { create: { userId: leaderId, seat: 1, joinedAt: new Date(nowMs) } },
    },
    include: { members: { select: { userId: true, paymentRef: true, seat: true, joinedAt: true } } },
  });
}

export async function loadSnapshot(prisma: PrismaClient, teamId: string): Promise<TeamSnapshot | null> {
  const team = await prisma.team.findUnique({
    where: { id: teamId },
    include: { members: { select: { userId: true, paymentRef: true, seat: true, joinedAt: true } } },
  });
  return team;
}

export async function activityOfTeam(prisma: PrismaClient, teamId: string): Promise<string | null> {
  const team = await prisma.team.findUnique({ where: { id: teamId }, select: { activityId: true } });
  return team?.activityId ?? null;
}

export async function teamsPastDeadline(prisma: PrismaClient, now: Date, limit: number): Promise<{ id: string; activityId: string }[]> {
  return prisma.team.findMany({
    where: { status: 'OPEN', deadline: { lte: now } },
    select: { id: true, activityId: true },
    orderBy: { deadline: 'asc' },
    take: limit,
  });
}

/**
 * The teams of an activity for the "join a team" list: OPEN teams with fewer members than
 * seats first (oldest first), then the rest. Live locks are only in Redis; the service
 * refines the order with them.
 */
export async function listTeams(prisma: PrismaClient, activityId: string, status: TeamStatus | null, limit: number): Promise<string[]> {
  const rows = await prisma.$queryRawUnsafe<{ id: string }[]>(
    `SELECT t.id FROM team t
     WHERE t.activity_id = $1 AND ($2::"TeamStatus" IS NULL OR t.status = $2::"TeamStatus")
     ORDER BY (t.status = 'OPEN' AND (SELECT count(*) FROM team_member m WHERE m.team_id = t.id) < t.capacity) DESC, t.created_at, t.id
     LIMIT $3`,
    activityId,
    status,
    limit,
  );
  return rows.map((row) => row.id);
}
