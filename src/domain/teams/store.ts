import { pairsToRecord } from '../../infra/collections.ts';
import type { RedisClient } from '../../infra/redis/connection.ts';
import { campaignKeys, keysExpireAt, retainUntil } from '../../infra/redis/keys.ts';
import { type ReplyOf, type ReplyValues, type Scripts, defineScript } from '../../infra/redis/scripts.ts';
import { redisTimeMs } from '../../infra/redis/time.ts';

/**
 * Every key of every team of one activity shares the activity's hash tag, `{tm:<activityId>}`:
 * moving a lock between two teams of an activity is one script, and a script may only touch
 * keys of one cluster slot. The price is that a hot activity lives on one Redis Cluster slot,
 * so one node carries all of its traffic; that is the cost of the atomic move.
 */
export function activityKeys(activityId: string) {
  return campaignKeys('tm', activityId, ['holders', 'expiries', 'journal', 'activity', 'joined', 'activityRebuilding']);
}

/** The activity whose journal `stream` is: the inverse of activityKeys(id).journal. */
export function activityOfJournal(stream: string): string {
  const match = /^\{tm:(.+)\}:journal$/.exec(stream);
  if (!match) throw new Error(`not a team activity's journal: ${stream}`);
  return match[1]!;
}

/** A team's campaign id: its keys are its own, its journal stream its activity's. */
export interface TeamRef {
  activityId: string;
  teamId: string;
}

/**
 * The team's own keys, with the activity's keys its scripts take beside them. Assigned onto
 * the activity's keys, not spread: every team script call builds these, and copying an
 * object with a spread cost about 10 µs a call (a literal or an assignment, under 1 µs).
 */
export function teamKeys(activityId: string, teamId: string) {
  const { team } = campaignKeys('tm', activityId, ['team']);
  const prefix = `${team}:${teamId}`;
  return Object.assign(activityKeys(activityId), {
    meta: `${prefix}:meta`,
    members: `${prefix}:members`,
    payments: `${prefix}:payments`,
    locks: `${prefix}:locks`,
    lockRefs: `${prefix}:lockRefs`,
    lockCounts: `${prefix}:lockCounts`,
    lateRefs: `${prefix}:lateRefs`,
    rebuilding: `${prefix}:rebuilding`,
  });
}

export type TeamStatus = 'OPEN' | 'COMPLETE' | 'FAILED';

/**
 * Locks one user may take in one team: a buyer whose payment failed can lock again, and a
 * user cannot hold a seat until the deadline by releasing and locking over and over.
 */
export const SEAT_LOCKS_PER_USER_PER_TEAM = 3;

/**
 * The most time between a seat payment's deadline (the provider's order expiry) and its seat
 * freeing; the grace is a tenth of the lock up to this (lockTeamSeat.lua). The seat is judged
 * when the provider's notify arrives, seconds after the buyer paid, later under a crowd: a
 * buyer who paid by the provider's deadline must not be charged, refunded and seatless.
 */
export const SEAT_PAYMENT_GRACE_MAX_MS = 30_000;

export interface TeamMemberView {
  userId: string;
  joinedAt: string;
}

export interface SeatLockView {
  userId: string;
  lockedAt: string;
  expiresAt: string;
}

/** A team's live state, as the API and subscribers see it. Serializable, so it can be published as is. */
export interface TeamState {
  id: string;
  activityId: string;
  leaderId: string;
  capacity: number;
  lockSeconds: number;
  status: TeamStatus;
  deadline: string;
  /** In seat order: the leader first, then in order of confirmation. */
  members: TeamMemberView[];
  /** Live locks only, the earliest expiry first. */
  locks: SeatLockView[];
  freeSeats: number;
  /** The earliest expiry among the live locks when no seat is free. */
  nextUnlockAt: string | null;
  /** Redis TIME when this state was read: clients count down against it. */
  serverTime: string;
  /** Grows with every change, across rebuilds too. */
  version: number;
}

/** Everything needed to rebuild a team's keys: its row and the members PostgreSQL holds. Locks are not kept. */
export interface TeamSnapshot {
  id: string;
  activityId: string;
  leaderId: string;
  capacity: number;
  lockSeconds: number;
  deadline: Date;
  status: TeamStatus;
  createdAt: Date;
  closedAt: Date | null;
  members: { userId: string; paymentRef: string | null; seat: number; joinedAt: Date }[];
}

/** The change a script journaled first in its reply: null when it changed nothing. */
const change = (values: ReplyValues, keys: { journal: string }) => ({ entry: values.entry(0, keys.journal) });
const status = (values: ReplyValues, index: number) => values.str(index) as TeamStatus;
/** A closed team's status: one the script found still OPEN is past its deadline, so FAILED (see teamStateOf). */
const closedStatus = (values: ReplyValues, index: number): TeamStatus => (status(values, index) === 'OPEN' ? 'FAILED' : status(values, index));

/** A team's keys as read (HGETALL, HGETALL, ZRANGE WITHSCORES) and the Redis time then: what teamStateOf turns into a TeamState. */
export interface TeamRead {
  meta: Record<string, string>;
  members: Record<string, string>;
  /** userId, expiresAtMs, … in expiry order. */
  locks: string[];
  nowMs: number;
}

/** The team a script read at the end of its run (lua/includes/teamSeats.lua, team_state). */
function teamReadAt(values: ReplyValues, index: number): TeamRead {
  const team = values.nested(index);
  return { meta: pairsToRecord(team.strings(0)), members: pairsToRecord(team.strings(1)), locks: team.strings(2), nowMs: team.num(3) };
}

const lockTeamSeat = defineScript(
  'lockTeamSeat',
  ['meta', 'members', 'locks', 'holders', 'expiries', 'journal', 'previousMeta', 'previousLocks', 'lockRefs', 'activity', 'joined', 'lockCounts'],
  {
    missing: () => ({}),
    holderIs: (values) => ({ teamId: values.str(0) }),
    locked: (values, keys) => ({
      ...change(values, keys),
      expiresAtMs: values.num(2),
      paymentDueAtMs: values.num(3),
      releasedTeamId: values.str(4) || null,
      paymentRef: values.str(5),
      amountCents: values.num(6),
      team: teamReadAt(values, 7),
    }),
    alreadyLocked: (values, keys) => ({
      ...change(values, keys),
      expiresAtMs: values.num(2),
      paymentDueAtMs: values.num(3),
      paymentRef: values.str(4),
      amountCents: values.num(5),
      team: teamReadAt(values, 6),
    }),
    limitReached: (values, keys) => ({ ...change(values, keys), maxTeamsPerUser: values.num(2) }),
    lockLimitReached: (values, keys) => ({ ...change(values, keys), maxLocks: values.num(2) }),
    member: change,
    closed: (values, keys) => ({ ...change(values, keys), status: closedStatus(values, 2) }),
    full: (values, keys) => ({ ...change(values, keys), nextUnlockAtMs: values.numOrNull(2), nowMs: values.num(3) }),
  },
);

const confirmTeamSeat = defineScript('confirmTeamSeat', ['meta', 'members', 'payments', 'locks', 'holders', 'expiries', 'journal', 'lockRefs', 'activity', 'joined', 'lateRefs'], {
  missing: () => ({}),
  joined: (values, keys) => ({ ...change(values, keys), completed: values.num(2) === 1 }),
  alreadyMember: () => ({}),
  paymentRefTaken: () => ({}),
  paymentRefunded: () => ({}),
  noSeatLock: (values, keys) => ({ ...change(values, keys), nextUnlockAtMs: values.numOrNull(2) }),
  closed: (values, keys) => ({ ...change(values, keys), status: closedStatus(values, 2) }),
  late: change,
  teamFailed: () => ({}),
});

const releaseTeamSeat = defineScript('releaseTeamSeat', ['meta', 'locks', 'holders', 'expiries', 'journal'], {
  missing: () => ({}),
  released: change,
  notHeld: change,
});

const expireTeamSeats = defineScript('expireTeamSeats', ['meta', 'locks', 'holders', 'expiries', 'journal'], {
  gone: () => ({}),
  expired: (values, keys) => ({ ...change(values, keys), count: values.num(2) }),
});

const failTeam = defineScript('failTeam', ['meta', 'members', 'payments', 'locks', 'holders', 'expiries', 'journal', 'activity', 'joined'], {
  missing: () => ({}),
  failed: change,
  notOpen: (values) => ({ status: status(values, 0) }),
  notDue: (values) => ({ deadlineMs: values.num(0) }),
});

export type LockReply = ReplyOf<typeof lockTeamSeat.replies>;
/** Who confirms a seat: the provider's notify (with its transaction id), or an operator. */
export type ConfirmedBy = { providerTxnId?: string };
export type ConfirmReply = ReplyOf<typeof confirmTeamSeat.replies>;

/** The team's Redis side: the script bindings, state reads, and rebuilds. */
export class TeamStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly scripts: Scripts,
  ) {}

  /** `expectedHolder`: the team the caller thinks holds the user's lock ('' for none); a wrong guess is answered with the right one. */
  lock(activityId: string, teamId: string, userId: string, eventId: string, expectedHolder: string, paymentRef: string): Promise<LockReply> {
    const keys = teamKeys(activityId, teamId);
    const previous = expectedHolder ? teamKeys(activityId, expectedHolder) : keys;
    return this.scripts.call(lockTeamSeat, Object.assign(keys, { previousMeta: previous.meta, previousLocks: previous.locks }), [
      userId,
      teamId,
      eventId,
      expectedHolder,
      paymentRef,
      SEAT_LOCKS_PER_USER_PER_TEAM,
      SEAT_PAYMENT_GRACE_MAX_MS,
    ]);
  }

  /** `payment`: the provider's notify (the lock's own reference only); `operator`: a manual confirmation. */
  confirm(activityId: string, teamId: string, userId: string, paymentRef: string, eventId: string, by: ConfirmedBy): Promise<ConfirmReply> {
    const mode = by.providerTxnId === undefined ? 'operator' : 'payment';
    return this.scripts.call(confirmTeamSeat, teamKeys(activityId, teamId), [userId, teamId, paymentRef, eventId, mode, by.providerTxnId ?? '']);
  }

  release(activityId: string, teamId: string, userId: string, eventId: string) {
    return this.scripts.call(releaseTeamSeat, teamKeys(activityId, teamId), [userId, teamId, eventId]);
  }

  /** Drops the team's locks that ran out; `dueUsers` are the index entries the sweeper found for it. */
  expire(activityId: string, teamId: string, eventId: string, dueUsers: string[]) {
    return this.scripts.call(expireTeamSeats, teamKeys(activityId, teamId), [teamId, eventId, ...dueUsers]);
  }

  /** `deadlineMs`: the team's deadline in PostgreSQL, which an operator's cancel may have brought forward. */
  fail(activityId: string, teamId: string, eventId: string, deadlineMs: number) {
    return this.scripts.call(failTeam, teamKeys(activityId, teamId), [teamId, eventId, deadlineMs]);
  }

  /** One atomic read (MULTI), so members and locks are never seen mid-change. Null when the team's keys are missing. */
  async readState(activityId: string, teamId: string): Promise<TeamState | null> {
    const keys = teamKeys(activityId, teamId);
    const results = await this.redis.multi().hgetall(keys.meta).hgetall(keys.members).zrange(keys.locks, 0, -1, 'WITHSCORES').time().exec();
    if (!results) return null;
    for (const [error] of results) if (error) throw error;
    const [meta, members, locks, time] = results.map(([, value]) => value) as [Record<string, string>, Record<string, string>, string[], [string, string]];
    const nowMs = Number(time[0]) * 1000 + Math.floor(Number(time[1]) / 1000);
    return teamStateOf(activityId, teamId, { meta, members, locks, nowMs });
  }

  /** Of `teams`, those where the user holds a live seat lock: the truth is each team's locks zset. */
  async heldLocks(userId: string, teams: TeamRef[]): Promise<TeamRef[]> {
    if (teams.length === 0) return [];
    // Not one pipeline: on a cluster teams of other activities lie on other nodes.
    // Auto-pipelining still sends these in one write per node.
    const [nowMs, ...expiries] = await Promise.all([redisTimeMs(this.redis), ...teams.map(({ activityId, teamId }) => this.redis.zscore(teamKeys(activityId, teamId).locks, userId))]);
    return teams.filter((_team, i) => expiries[i] != null && Number(expiries[i]) > nowMs);
  }

  /**
   * Writes the team's keys in one transaction, replacing whatever was there; locks are not
   * kept in PostgreSQL, so a rebuilt team has none. The version restarts at the Redis time
   * floor the scripts use, so it still only grows.
   */
  async write(snapshot: TeamSnapshot): Promise<void> {
    const keys = teamKeys(snapshot.activityId, snapshot.id);
    const [seconds, micros] = await this.redis.time();
    const expireAt = keysExpireAt(retainUntil(snapshot.deadline.getTime()));
    const meta: Record<string, string | number> = {
      activityId: snapshot.activityId,
      leaderId: snapshot.leaderId,
      capacity: snapshot.capacity,
      lockSeconds: snapshot.lockSeconds,
      deadlineMs: snapshot.deadline.getTime(),
      status: snapshot.status,
      createdAtMs: snapshot.createdAt.getTime(),
      version: String(Number(seconds) * 1_000_000 + Math.floor(Number(micros) / 1000) * 1000),
    };
    if (snapshot.closedAt) meta.closedAtMs = snapshot.closedAt.getTime();
    const paid = snapshot.members.filter((member) => member.paymentRef !== null);

    const tx = this.redis.multi().del(keys.meta, keys.members, keys.payments, keys.locks, keys.lockRefs);
    if (snapshot.members.length > 0) {
      tx.hset(keys.members, Object.fromEntries(snapshot.members.map((member) => [member.userId, `${member.seat}:${member.joinedAt.getTime()}`])));
      tx.pexpireat(keys.members, expireAt);
    }
    if (paid.length > 0) {
      tx.hset(keys.payments, Object.fromEntries(paid.map((member) => [member.paymentRef!, member.userId])));
      tx.pexpireat(keys.payments, expireAt);
    }
    tx.hset(keys.meta, meta).pexpireat(keys.meta, expireAt);
    await tx.exec();
  }
}

const iso = (ms: number) => new Date(ms).toISOString();

/** The team as the API and subscribers see it, from its keys as read; null when its keys are missing. */
export function teamStateOf(activityId: string, teamId: string, { meta, members, locks, nowMs }: TeamRead): TeamState | null {
  if (!meta.deadlineMs) return null;
  const capacity = Number(meta.capacity);
  const lockMs = Number(meta.lockSeconds) * 1000;
  // Past its deadline an OPEN team takes no one and can only end FAILED (a payment after the
  // deadline is owed back): it reads FAILED at once, as the deadline sweeper will leave it
  // (its locks released), and one version on, since the deadline passing changed it.
  const overdue = meta.status === 'OPEN' && nowMs >= Number(meta.deadlineMs);
  const status = overdue ? 'FAILED' : (meta.status as TeamStatus);
  const held = overdue ? [] : locks;
  const live: SeatLockView[] = [];
  for (let i = 0; i < held.length; i += 2) {
    const expiresAtMs = Number(held[i + 1]);
    if (expiresAtMs > nowMs) {
      live.push({ userId: held[i]!, lockedAt: iso(expiresAtMs - lockMs), expiresAt: iso(expiresAtMs) });
    }
  }
  const memberList = Object.entries(members)
    .map(([userId, value]) => {
      const [seat, joinedAtMs] = value.split(':').map(Number) as [number, number];
      return { userId, seat, joinedAtMs };
    })
    .sort((a, b) => a.seat - b.seat);
  const takesMembers = status === 'OPEN';
  const freeSeats = takesMembers ? Math.max(0, capacity - memberList.length - live.length) : 0;
  return {
    id: teamId,
    activityId,
    leaderId: meta.leaderId!,
    capacity,
    lockSeconds: Number(meta.lockSeconds),
    status,
    deadline: iso(Number(meta.deadlineMs)),
    members: memberList.map(({ userId, joinedAtMs }) => ({ userId, joinedAt: iso(joinedAtMs) })),
    locks: live,
    freeSeats,
    nextUnlockAt: takesMembers && freeSeats === 0 && live.length > 0 ? live[0]!.expiresAt : null,
    serverTime: iso(nowMs),
    version: Number(meta.version) + (overdue ? 1 : 0),
  };
}
