import { z } from 'zod';
import { Prisma, type PrismaClient } from '../../generated/prisma/client.ts';
import type { InputRule } from '../../i18n/messages.ts';
import { type KeysetPage, keysetPageArgs } from '../../infra/db/pages.ts';
import { unnest } from '../../infra/db/unnest.ts';
import { conflictingEntries, entryKind } from '../../infra/journal/entryKind.ts';
import type { JournalEntry } from '../../infra/journal/journal.ts';
import { lateSeatPaymentKey, refundsOwedFrom } from '../money/refunds.ts';
import { type GroupBuyActivity, MAX_LOCK_SECONDS, activityChangeLock } from './activities.ts';
import { GroupBuyNotActive, OpenTeamLimitReached } from './problems.ts';
import { type TeamRef, type TeamSnapshot, type TeamStatus, activityOfJournal } from './store.ts';

/** A JSON list the scripts wrote; cjson encodes an empty Lua table as `{}`. */
const jsonList = <T>(item: z.ZodType<T>) =>
  z
    .string()
    .transform((text, ctx) => {
      try {
        const parsed: unknown = JSON.parse(text);
        return Array.isArray(parsed) ? parsed : [];
      } catch {
        ctx.addIssue({ code: 'custom', message: 'not JSON' });
        return z.NEVER;
      }
    })
    .pipe(z.array(item));

/** One step of a seat's history (lua/includes/teamSeats.lua, add_event). */
const seatEvent = z.object({
  kind: z.enum(['LOCKED', 'RELEASED', 'MOVED', 'EXPIRED', 'CONFIRMED']),
  team: z.string(),
  user: z.string(),
  at: z.number().int(),
  expiresAt: z.number().int().optional(),
});

/** A member failTeam.lua records as owed a refund. */
const recordedMember = z.object({ user: z.string(), paymentRef: z.string().optional(), seat: z.number().int(), joinedAt: z.number().int() });

/** What every team script journals (journal_changes): the call, and the seat events it caused. */
const change = z.object({ event: z.string(), team: z.string(), at: z.coerce.number().int(), events: jsonList(seatEvent) });

// The part each op adds, checked apart from `change`, so the events are parsed once.
const seatsFields = change.and(
  z.union([
    // A confirmation that seated its user; by the provider's notify when providerTxnId is set.
    z.object({ op: z.literal('confirm'), user: z.string(), paymentRef: z.string(), seat: z.coerce.number().int(), providerTxnId: z.string().optional() }),
    // A new lock, with the payment minted for it.
    z.object({
      op: z.literal('lock'),
      payer: z.string(),
      paymentRef: z.string(),
      amountCents: z.coerce.number().int().positive(),
      expiresAt: z.coerce.number().int(),
    }),
    // A failure, with the members Redis held.
    z.object({ op: z.literal('fail'), members: jsonList(recordedMember) }),
    // A lock, release or expiry, or a refused confirmation: seat events only.
    z.object({ op: z.enum(['lock', 'release', 'expire', 'confirm']), user: z.never().optional() }),
  ]),
);

/**
 * Persists journaled team changes in one statement per batch, plus one to mark filled teams
 * COMPLETE. No row locks: a member's seat number is unique per team and at most its capacity,
 * so PostgreSQL refuses an oversold seat by itself, and concurrent batches never wait on each
 * other. Seat events (the lock history) are inserted by their ids; a new lock inserts the
 * payment minted for it; a confirmation by the provider's notify marks that payment
 * SUCCEEDED in the same statement. A failure records the members Redis held (the ones still
 * on their way here included), marks the team FAILED and owes each paying member Redis held
 * a refund in the outbox (those PostgreSQL holds follow, below).
 * Everything is keyed, so a replay inserts nothing new; a confirmation that clashes with a
 * different durable member (Redis rebuilt while confirmations were in flight) is reported
 * as a conflict.
 */
export const seatsJournalKind = entryKind({
  kind: 'team.seats',
  fields: seatsFields,
  async persist(db, entries) {
    const changes = entries.map(({ fields }) => fields);
    const events = changes.flatMap((fields) => fields.events.map((event, index) => ({ ...event, id: `${fields.event}:${index}` })));
    // Only a confirmation that seated its user: one refused (no lock, team closed) journals
    // just the expired locks it dropped, and is no clash with anything durable.
    const confirms = entries.flatMap(({ entry, fields }) => (fields.op === 'confirm' && fields.user !== undefined ? [{ entry, fields }] : []));
    const failures = changes.flatMap((fields) => (fields.op === 'fail' ? [fields] : []));
    const failedTeams = failures.map((failure) => failure.team);
    const failedMembers = failures.flatMap(({ team, members }) => members.map((member) => ({ ...member, team })));
    const locks = entries.flatMap(({ entry, fields }) => (fields.op === 'lock' && 'payer' in fields ? [{ ...fields, activityId: activityOfJournal(entry.stream) }] : []));
    const paidConfirms = confirms.filter(({ fields }) => fields.providerTxnId);
    const members = [...confirms.map(({ fields }) => ({ team: fields.team, user: fields.user, paymentRef: fields.paymentRef, seat: fields.seat, joinedAt: fields.at })), ...failedMembers];

    const written = await db.query<{ what: 'member' | 'event' | 'failed'; key: string }>(Prisma.sql`
      WITH joined AS (
        INSERT INTO team_member (team_id, user_id, payment_ref, seat, joined_at)
        SELECT m.team_id, m.user_id, m.payment_ref, m.seat, to_timestamp(m.joined_at_ms / 1000.0)
        FROM ${unnest('m', members, {
          team_id: ['text', (member) => member.team],
          user_id: ['text', (member) => member.user],
          payment_ref: ['text', (member) => member.paymentRef],
          seat: ['int', (member) => member.seat],
          joined_at_ms: ['bigint', (member) => member.joinedAt],
        })}
        JOIN team t ON t.id = m.team_id AND m.seat BETWEEN 1 AND t.capacity
        ON CONFLICT DO NOTHING
        RETURNING team_id, user_id
      ), history AS (
        INSERT INTO team_seat_event (id, team_id, user_id, kind, at, expires_at)
        SELECT e.id, e.team_id, e.user_id, e.kind::"TeamSeatEventKind", to_timestamp(e.at_ms / 1000.0), to_timestamp(e.expires_at_ms / 1000.0)
        FROM ${unnest('e', events, {
          id: ['text', (event) => event.id],
          team_id: ['text', (event) => event.team],
          user_id: ['text', (event) => event.user],
          kind: ['text', (event) => event.kind],
          at_ms: ['bigint', (event) => event.at],
          expires_at_ms: ['bigint', (event) => event.expiresAt],
        })}
        ON CONFLICT DO NOTHING
        RETURNING id
      ), failed AS (
        UPDATE team t SET status = 'FAILED', closed_at = to_timestamp(f.at_ms / 1000.0)
        FROM ${unnest('f', failures, { team_id: ['text', (failure) => failure.team], at_ms: ['bigint', (failure) => failure.at] })}
        WHERE t.id = f.team_id AND t.status = 'OPEN'
        RETURNING t.id, t.closed_at
      ), failing AS (
        -- Failed now, or by an earlier commit of this entry. Not a team PostgreSQL holds
        -- COMPLETE, whatever a stale Redis failed: it owes nobody a refund.
        SELECT id, closed_at FROM failed
        UNION ALL
        SELECT id, closed_at FROM team WHERE id = ANY(${failedTeams}::text[]) AND status = 'FAILED'
      ), failed_members AS (
        -- The members Redis held and those PostgreSQL already holds, so that a reader who
        -- sees the team FAILED sees its refunds too (save a confirmation committing beside it).
        SELECT r.team_id, r.user_id, r.payment_ref
        FROM (
          SELECT * FROM ${unnest('r', failedMembers, {
            team_id: ['text', (member) => member.team],
            user_id: ['text', (member) => member.user],
            payment_ref: ['text', (member) => member.paymentRef],
          })}
          UNION
          SELECT m.team_id, m.user_id, m.payment_ref FROM team_member m WHERE m.team_id = ANY(${failedTeams}::text[])
        ) r
        JOIN failing f ON f.id = r.team_id
      ), owed AS (${teamRefundsOwed('failed_members')}
      ), refunds AS (${refundsOwedFrom('owed')}
      ), locked AS (
        -- The payment minted for each new lock, durable before the lock is answered.
        INSERT INTO payment (payment_ref, user_id, purpose, activity_id, team_id, amount_cents, expires_at)
        SELECT l.payment_ref, l.user_id, 'TEAM_SEAT', l.activity_id, l.team_id, l.amount_cents, to_timestamp(l.expires_at_ms / 1000.0)
        FROM ${unnest('l', locks, {
          payment_ref: ['text', (lock) => lock.paymentRef],
          user_id: ['text', (lock) => lock.payer],
          activity_id: ['text', (lock) => lock.activityId],
          team_id: ['text', (lock) => lock.team],
          amount_cents: ['int', (lock) => lock.amountCents],
          expires_at_ms: ['bigint', (lock) => lock.expiresAt],
        })}
        ON CONFLICT DO NOTHING
      ), paid AS (
        -- What the provider's notify confirmed: the payment bound to that user and team succeeded.
        UPDATE payment p SET status = 'SUCCEEDED', provider_txn_id = c.provider_txn_id, settled_at = now()
        FROM ${unnest('c', paidConfirms, {
          payment_ref: ['text', ({ fields }) => fields.paymentRef],
          user_id: ['text', ({ fields }) => fields.user],
          team_id: ['text', ({ fields }) => fields.team],
          provider_txn_id: ['text', ({ fields }) => fields.providerTxnId],
        })}
        WHERE p.payment_ref = c.payment_ref AND p.user_id = c.user_id AND p.team_id = c.team_id AND p.status <> 'SUCCEEDED'
      )
      SELECT 'member' AS what, team_id || '/' || user_id AS key FROM joined
      UNION ALL SELECT 'event', id FROM history
      UNION ALL SELECT 'failed', id FROM failed`);
    const writtenKeys = (what: string) => new Set(written.filter((row) => row.what === what).map((row) => row.key));
    // Of the entries other than seating confirmations, the replays: nothing of theirs was
    // new (each writes its seat events, a failure its team's status, all or nothing).
    const insertedEvents = writtenKeys('event');
    const failedNow = writtenKeys('failed');
    const seating = new Set(confirms.map(({ entry }) => entry));
    const wroteNothing = ({ entry, fields }: (typeof entries)[number]) =>
      !seating.has(entry) && !fields.events.some((_, index) => insertedEvents.has(`${fields.event}:${index}`)) && !(fields.op === 'fail' && failedNow.has(fields.team));
    const replayed = entries.filter(wroteNothing).map(({ entry }) => entry);
    // Run after the insert committed, one statement for both, so of two batches that
    // commit at once the later one sees what both did:
    // - every member of a FAILED team is owed a refund, not only those Redis held when it
    //   failed: a confirmation may have landed after Redis was rebuilt without it, or after
    //   the failure, or beside it in another batch;
    // - whoever fills a team completes it.
    // They touch disjoint teams (a refund is owed only by a FAILED team, an OPEN one completes).
    const confirmedTeams = [...new Set(confirms.map(({ fields }) => fields.team))];
    const touchedTeams = [...new Set([...confirmedTeams, ...failedTeams])];
    if (touchedTeams.length > 0) {
      await db.query(Prisma.sql`
        WITH failed_members AS (
          SELECT m.team_id, m.user_id, m.payment_ref FROM team_member m JOIN team t ON t.id = m.team_id
          WHERE t.id = ANY(${touchedTeams}::text[]) AND t.status = 'FAILED'
        ), owed AS (${teamRefundsOwed('failed_members')}
        ), refunds AS (${refundsOwedFrom('owed')}
        )
        UPDATE team t SET status = 'COMPLETE', closed_at = (SELECT max(m.joined_at) FROM team_member m WHERE m.team_id = t.id)
        WHERE t.id = ANY(${confirmedTeams}::text[]) AND t.status = 'OPEN' AND (SELECT count(*) FROM team_member m WHERE m.team_id = t.id) >= t.capacity`);
    }
    if (confirms.length === 0) return { conflicts: [], replayed };

    // Not inserted now but already there (a replay, or the failure recorded it first) counts as durable.
    // Team ids are UUIDs: the first '/' ends one.
    const memberKey = (team: string, user: string) => `${team}/${user}`;
    const seated = await conflictingEntries(
      confirms,
      (confirm) => memberKey(confirm.team, confirm.user),
      writtenKeys('member'),
      async (keys) => {
        const present = await db.prisma.teamMember.findMany({
          where: { OR: keys.map((key) => key.split(/\/(.*)/)).map(([teamId, userId]) => ({ teamId: teamId!, userId: userId! })) },
          select: { teamId: true, userId: true },
        });
        return present.map((row) => memberKey(row.teamId, row.userId));
      },
    );
    return { conflicts: seated.conflicts, replayed: [...seated.replayed, ...replayed] };
  },
});

/**
 * The refunds a failed team owes, from the relation `members` (team_id, user_id,
 * payment_ref): one per member whose seat a payment bound to them and the team paid for
 * (the leader, and members an operator seated without one, paid nothing here). One owed
 * back already as too late is not owed again (refund_seat_payment_key).
 */
function teamRefundsOwed(members: string): Prisma.Sql {
  return Prisma.sql`
    SELECT 'team:' || m.team_id || ':' || m.user_id AS source_key, m.user_id, p.amount_cents, 'TEAM_FAILED' AS reason, p.payment_ref
    FROM ${Prisma.raw(members)} m
    JOIN payment p ON p.payment_ref = m.payment_ref AND p.user_id = m.user_id AND p.team_id = m.team_id AND p.status = 'SUCCEEDED'`;
}

/**
 * The rule of the catalog an operator's seat breaks with its payment (src/i18n/messages.ts).
 */
export type SeatPaymentRule = Extract<InputRule, 'PAYMENT_OF_ANOTHER_SEAT' | 'LATE_PAYMENT_SEATS_NO_ONE'>;

/**
 * Why an operator may not seat `userId` in the team with `paymentRef`, or null. A reference
 * the provider knows must be that user's payment for that team, and not one owed back as
 * too late: the buyer would keep the seat and the refund, or be refunded twice.
 */
export async function operatorSeatPaymentProblem(prisma: PrismaClient, teamId: string, userId: string, paymentRef: string): Promise<SeatPaymentRule | null> {
  // PostgreSQL text holds no NUL, so no payment has such a reference (and asking would fail):
  // the seat's journal entry is refused instead, like any entry PostgreSQL cannot take.
  if (paymentRef.includes('\u0000')) return null;
  const payment = await prisma.payment.findUnique({ where: { paymentRef }, select: { userId: true, teamId: true } });
  if (!payment) return null;
  if (payment.userId !== userId || payment.teamId !== teamId) return 'PAYMENT_OF_ANOTHER_SEAT';
  const refunded = await prisma.refund.findUnique({ where: { sourceKey: lateSeatPaymentKey(paymentRef) }, select: { id: true } });
  // An operator's seat with a payment that came too late, which is owed back.
  return refunded ? 'LATE_PAYMENT_SEATS_NO_ONE' : null;
}

/** Just the teams an entry names, read apart from its full schema: an entry that schema refuses changed them too. */
const namedTeams = z.object({ team: z.string(), events: jsonList(z.object({ team: z.string() })).catch([]) });

/**
 * The teams a journaled change touched: its own, and every team its seat events name (a
 * lock moved from another); none when not even that can be read, since it decides what is
 * published after a commit and what is dropped after a refusal, whatever the entry holds.
 */
export function teamsChangedBy(entry: JournalEntry): TeamRef[] {
  const named = namedTeams.safeParse(entry.fields);
  if (!named.success) return [];
  const activityId = activityOfJournal(entry.stream);
  const { team, events } = named.data;
  return [...new Set([team, ...events.map((event) => event.team)])].map((teamId) => ({ activityId, teamId }));
}

/**
 * Inserts a new team of the activity, on its terms, with its leader as the first member;
 * returns its snapshot. The leader's count of OPEN teams is checked in the same
 * transaction, under a transaction lock on (activity, leader): opening is PostgreSQL-first,
 * so two opens racing cannot both pass the cap. The activity's row is read again under
 * its change lock (shared; activityChangeLock): a team commits only if the activity was
 * not paused or ended when it did, so none is opened after updateGroupBuyActivity
 * answered, whatever an instance's copy said. A requestId is unique per leader: a call
 * racing one that took it fails here, and TeamService.open answers it with that team.
 */
export function insertTeam(
  prisma: PrismaClient,
  { activityId, teamId }: TeamRef,
  leaderId: string,
  requestId: string | null,
  activity: GroupBuyActivity,
  nowMs: number,
): Promise<TeamSnapshot> {
  return prisma.$transaction(async (tx) => {
    await tx.$executeRaw`SELECT pg_advisory_xact_lock_shared(hashtextextended(${activityChangeLock(activityId)}, 0))`;
    // Ended by the clock of now, not of when the open began: it may have waited for the lock and a connection since.
    const [current] = await tx.$queryRaw<{ paused: boolean; ends_at: Date; ended: boolean }[]>`
      SELECT paused, ends_at, ends_at <= greatest(clock_timestamp(), to_timestamp(${nowMs}::bigint / 1000.0)) AS ended FROM group_buy_activity WHERE id = ${activityId}`;
    const ended = !current || current.ended;
    if (ended || current.paused) throw new GroupBuyNotActive(activity.startsAt, current?.ends_at ?? activity.endsAt, new Date(nowMs), !ended);
    await tx.$executeRaw`SELECT pg_advisory_xact_lock(hashtextextended(${`team-leader:${activityId}:${leaderId}`}, 0))`;
    const open = await tx.team.count({ where: { activityId, leaderId, status: 'OPEN', deadline: { gt: new Date(nowMs) } } });
    if (open >= activity.maxOpenTeamsPerLeader) throw new OpenTeamLimitReached(activity.maxOpenTeamsPerLeader);
    return tx.team.create({
      data: {
        id: teamId,
        activityId,
        leaderId,
        requestId,
        capacity: activity.capacity,
        lockSeconds: activity.lockSeconds,
        deadline: new Date(nowMs + activity.formationSeconds * 1000),
        createdAt: new Date(nowMs),
        members: { create: { userId: leaderId, seat: 1, joinedAt: new Date(nowMs) } },
      },
      include: { members: { select: { userId: true, paymentRef: true, seat: true, joinedAt: true } } },
    });
    // A crowd opening teams at once queues for the pool's connections: wait rather than fail.
  }, OPEN_TRANSACTION);
}

const OPEN_TRANSACTION = { maxWait: 15_000, timeout: 15_000 };

/** The team the leader opened under `requestId`; null when there is none. */
export async function teamOfRequest(prisma: PrismaClient, leaderId: string, requestId: string): Promise<TeamRef | null> {
  const team = await prisma.team.findUnique({ where: { leaderId_requestId: { leaderId, requestId } }, select: { id: true, activityId: true } });
  return team && { activityId: team.activityId, teamId: team.id };
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

/** A team still OPEN in PostgreSQL, with its deadline there. */
export interface OpenTeam extends TeamRef {
  deadline: Date;
}

export async function teamsPastDeadline(prisma: PrismaClient, now: Date, limit: number): Promise<OpenTeam[]> {
  // Teams of activities never defined (opened before operators defined them) have no
  // terms to be failed with, and would hold up the batch.
  return prisma.$queryRaw<OpenTeam[]>(Prisma.sql`
    SELECT t.id AS "teamId", t.activity_id AS "activityId", t.deadline FROM team t
    WHERE t.status = 'OPEN' AND t.deadline <= ${now} AND EXISTS (SELECT 1 FROM group_buy_activity a WHERE a.id = t.activity_id)
    ORDER BY t.deadline LIMIT ${limit}`);
}

/**
 * The teams of an activity for the "join a team" list: OPEN teams with fewer members than
 * seats first (oldest first), then the rest. Live locks are only in Redis; the service
 * refines the order with them.
 */
export async function listTeams(prisma: PrismaClient, activityId: string, status: TeamStatus | null, limit: number): Promise<string[]> {
  const rows = await prisma.$queryRaw<{ id: string }[]>(Prisma.sql`
    SELECT t.id FROM team t
    WHERE t.activity_id = ${activityId} AND (${status}::"TeamStatus" IS NULL OR t.status = ${status}::"TeamStatus")
    ORDER BY (t.status = 'OPEN' AND (SELECT count(*) FROM team_member m WHERE m.team_id = t.id) < t.capacity) DESC, t.created_at, t.id
    LIMIT ${limit}`);
  return rows.map((row) => row.id);
}

/**
 * A page of the activity's teams (of one status, or all), oldest first, by status in
 * PostgreSQL. A cursor must name a team of the activity; one whose team has left the
 * status since (an OPEN team that filled) still keeps the client's place.
 */
export async function teamsPage(prisma: PrismaClient, activityId: string, status: TeamStatus | null, page: KeysetPage): Promise<TeamRef[]> {
  const rows = await prisma.team.findMany({
    select: { id: true },
    ...(await keysetPageArgs(prisma.team, page, {
      where: { activityId, ...(status === null ? {} : { status }) },
      cursorScope: { activityId },
      orderBy: [{ createdAt: 'asc' }, { id: 'asc' }],
    })),
  });
  return rows.map((row) => ({ activityId, teamId: row.id }));
}

/**
 * The teams where the user may hold a seat lock now: those where a lock of theirs was
 * taken within the longest a lock lasts and is not yet due. A lock is journaled here
 * before it is answered, so none is missed; one released, moved on or lost since is still
 * listed, and only Redis can tell (TeamStore.heldLocks).
 */
export async function recentlyLockedTeams(prisma: PrismaClient, userId: string, nowMs: number): Promise<TeamRef[]> {
  const rows = await prisma.teamSeatEvent.findMany({
    where: { userId, kind: 'LOCKED', at: { gt: new Date(nowMs - MAX_LOCK_SECONDS * 1000) }, expiresAt: { gt: new Date(nowMs) } },
    select: { teamId: true, team: { select: { activityId: true } } },
  });
  const teams = new Map(rows.map((row) => [row.teamId, { activityId: row.team.activityId, teamId: row.teamId }]));
  return [...teams.values()];
}

/**
 * A page of the teams the user is a member of (the leader is one) or among `lockedTeamIds`,
 * newest first. A cursor may name any team the user ever locked a seat in: a lock that ran
 * out between two pages keeps the client's place.
 */
export async function teamsOfUser(prisma: PrismaClient, userId: string, lockedTeamIds: string[], page: KeysetPage): Promise<TeamRef[]> {
  const member = { members: { some: { userId } } };
  const rows = await prisma.team.findMany({
    select: { id: true, activityId: true },
    ...(await keysetPageArgs(prisma.team, page, {
      where: { OR: [member, { id: { in: lockedTeamIds } }] },
      cursorScope: { OR: [member, { seatEvents: { some: { userId } } }] },
      orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
    })),
  });
  return rows.map((row) => ({ activityId: row.activityId, teamId: row.id }));
}
