import type { Redis } from 'ioredis';
import { type JournalEntry, journalEntry } from '../../infra/journal/journal.ts';
import { campaignKeys, keysExpireAt, retainUntil } from '../../infra/redis/keys.ts';
import type { Scripts } from '../../infra/redis/scripts.ts';


/**
 * Every key of every team of one activity shares the activity's hash tag, `{tm:<activityId>}`:
 * moving a lock between two teams of an activity is one script, and a script may only touch
 * keys of one cluster slot. The price is that a hot activity lives on one Redis Cluster slot,
 * so one node carries all of its traffic; that is the cost of the atomic move.
 */
export function activityKeys(activityId: string) {
  return campaignKeys('tm', activityId, ['holders', 'expiries', 'journal']);
}

/** The activity whose journal `stream` is: the inverse of activityKeys(id).journal. */
export function activityOfJournal(stream: string): string {
  const match = /^\{tm:(.+)\}:journal$/.exec(stream);
  if (!match) throw new Error(`not a team activity's journal: ${stream}`);
  return match[1]!;
}

export function teamKeys(activityId: string, teamId: string) {
  const { team } = campaignKeys('tm', activityId, ['team']);
  const prefix = `${team}:${teamId}`;
  return {
    meta: `${prefix}:meta`,
    members: `${prefix}:members`,
    payments: `${prefix}:payments`,
    locks: `${prefix}:locks`,
    hydrating: `${prefix}:hydrating`,
  };
}

export type TeamStatus = 'OPEN' | 'COMPLETE' | 'FAILED';

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

interface Journaled {
  /** Null when the script changed nothing. */
  entry: JournalEntry | null;
}

export type LockReply = Journaled &
  (
    | { kind: 'locked'; expiresAtMs: number; releasedTeamId: string | null }
    | { kind: 'alreadyLocked'; expiresAtMs: number }
    | { kind: 'member' }
    | { kind: 'closed'; status: TeamStatus }
    | { kind: 'full'; nextUnlockAtMs: number | null; nowMs: number }
  );

export type ConfirmReply = Journaled &
  (
    | { kind: 'joined'; completed: boolean }
    | { kind: 'alreadyMember' }
    | { kind: 'paymentRefTaken' }
    | { kind: 'noSeatLock'; nextUnlockAtMs: number | null }
    | { kind: 'closed'; status: TeamStatus }
  );

export type FailReply = Journaled & ({ kind: 'failed' } | { kind: 'notOpen'; status: TeamStatus } | { kind: 'notDue' });

type Missing = { kind: 'missing' };
type Raw = [code: number, entryId: string, fields: string[], ...rest: unknown[]];

/** The team's Redis side: the script bindings, state reads, and rebuilds. */
export class TeamStore {
  constructor(private readonly redis: Redis, private readonly scripts: Scripts) {}

  /** `expectedHolder`: the team the caller thinks holds the user's lock ('' for none); a wrong guess is answered with the right one. */
  async lock(activityId: string, teamId: string, userId: string, eventId: string, expectedHolder: string): Promise<Missing | { kind: 'holderIs'; teamId: string } | LockReply> {
    const team = teamKeys(activityId, teamId);
    const activity = activityKeys(activityId);
    const previous = expectedHolder ? teamKeys(activityId, expectedHolder) : team;
    const reply = (await this.scripts.run(
      'lockTeamSeat',
      [team.meta, team.members, team.locks, activity.holders, activity.expiries, activity.journal, previous.meta, previous.locks],
      [userId, teamId, eventId, expectedHolder],
    )) as unknown[];
    if (reply[0] === 0) return { kind: 'missing' };
    if (reply[0] === 1) return { kind: 'holderIs', teamId: reply[1] as string };
    const [code, , , a, b] = reply as Raw;
    const entry = this.entry(activityId, reply as Raw);
    switch (code) {
      case 2:
        return { kind: 'locked', entry, expiresAtMs: a as number, releasedTeamId: (b as string) || null };
      case 3:
        return { kind: 'alreadyLocked', entry, expiresAtMs: a as number };
      case 4:
        return { kind: 'member', entry };
      case 5:
        return { kind: 'closed', entry, status: a as TeamStatus };
      case 6:
        return { kind: 'full', entry, nextUnlockAtMs: (a as number | null) ?? null, nowMs: b as number };
      default:
        throw new Error(`lockTeamSeat returned an unknown reply: ${JSON.stringify(reply)}`);
    }
  }

  async confirm(activityId: string, teamId: string, userId: string, paymentRef: string, eventId: string): Promise<Missing | ConfirmReply> {
    const team = teamKeys(activityId, teamId);
    const activity = activityKeys(activityId);
    const reply = (await this.scripts.run(
      'confirmTeamSeat',
      [team.meta, team.members, team.payments, team.locks, activity.holders, activity.expiries, activity.journal],
      [userId, teamId, paymentRef, eventId],
    )) as unknown[];
    if (reply[0] === 0) return { kind: 'missing' };
    const [code, , , a] = reply as Raw;
    const entry = this.entry(activityId, reply as Raw);
    switch (code) {
      case 1:
        return { kind: 'joined', entry, completed: a === 1 };
      case 2:
        return { kind: 'alreadyMember', entry };
      case 3:
        return { kind: 'paymentRefTaken', entry };
      case 4:
        return { kind: 'noSeatLock', entry, nextUnlockAtMs: (a as number | null) ?? null };
      case 5:
        return { kind: 'closed', entry, status: a as TeamStatus };
      default:
        throw new Error(`confirmTeamSeat returned an unknown reply: ${JSON.stringify(reply)}`);
    }
  }

  async release(activityId: string, teamId: string, userId: string, eventId: string): Promise<Missing | (Journaled & { kind: 'done'; released: boolean })> {
    const team = teamKeys(activityId, teamId);
    const activity = activityKeys(activityId);
    const reply = (await this.scripts.run(
      'releaseTeamSeat',
      [team.meta, team.locks, activity.holders, activity.expiries, activity.journal],
      [userId, teamId, eventId],
    )) as unknown[];
    if (reply[0] === 0) return { kind: 'missing' };
    return { kind: 'done', entry: this.entry(activityId, reply as Raw), released: reply[3] === 1 };
  }

  /** Drops the team's locks that ran out; `dueUsers` are the index entries the sweeper found for it. Null when the team's keys are gone. */
  async expire(activityId: string, teamId: string, eventId: string, dueUsers: string[]): Promise<JournalEntry | null> {
    const team = teamKeys(activityId, teamId);
    const activity = activityKeys(activityId);
    const reply = (await this.scripts.run(
      'expireTeamSeats',
      [team.meta, team.locks, activity.holders, activity.expiries, activity.journal],
      [teamId, eventId, ...dueUsers],
    )) as unknown[];
    return reply[0] === 0 ? null : this.entry(activityId, reply as Raw);
  }

  async fail(activityId: string, teamId: string, eventId: string): Promise<Missing | FailReply> {
    const team = teamKeys(activityId, teamId);
    const activity = activityKeys(activityId);
    const reply = (await this.scripts.run(
      'failTeam',
      [team.meta, team.members, team.payments, team.locks, activity.holders, activity.expiries, activity.journal],
      [teamId, eventId],
    )) as unknown[];
    const entry = reply[0] === 0 ? null : this.entry(activityId, reply as Raw);
    switch (reply[0]) {
      case 0:
        return { kind: 'missing' };
      case 1:
        return { kind: 'failed', entry };
      case 2:
        return { kind: 'notOpen', entry, status: reply[3] as TeamStatus };
      case 3:
        return { kind: 'notDue', entry };
      default:
        throw new Error(`failTeam returned an unknown reply: ${JSON.stringify(reply)}`);
    }
  }

  /** One atomic read (MULTI), so members and locks are never seen mid-change. Null when the team's keys are missing. */
  async readState(activityId: string, teamId: string): Promise<TeamState | null> {
    const keys = teamKeys(activityId, teamId);
    const results = await this.redis.multi().hgetall(keys.meta).hgetall(keys.members).zrange(keys.locks, 0, -1, 'WITHSCORES').time().exec();
    if (!results) return null;
    for (const [error] of results) if (error) throw error;
    const [meta, members, locks, time] = results.map(([, value]) => value) as [
      Record<string, string>,
      Record<string, string>,
      string[],
      [string, string],
    ];
    if (!meta.deadlineMs) return null;
    const nowMs = Number(time[0]) * 1000 + Math.floor(Number(time[1]) / 1000);
    const capacity = Number(meta.capacity);
    const lockMs = Number(meta.lockSeconds) * 1000;
    const status = meta.status as TeamStatus;
    const live: SeatLockView[] = [];
    for (let i = 0; i < locks.length; i += 2) {
      const expiresAtMs = Number(locks[i + 1]);
      if (expiresAtMs > nowMs) {
        live.push({ userId: locks[i]!, lockedAt: iso(expiresAtMs - lockMs), expiresAt: iso(expiresAtMs) });
      }
    }
    const memberList = Object.entries(members)
      .map(([userId, value]) => {
        const [seat, joinedAtMs] = value.split(':').map(Number) as [number, number];
        return { userId, seat, joinedAtMs };
      })
      .sort((a, b) => a.seat - b.seat);
    // Past its deadline a team takes no one, though the worker may not have marked it FAILED yet.
    const takesMembers = status === 'OPEN' && nowMs < Number(meta.deadlineMs);
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
      version: Number(meta.version),
    };
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

    const tx = this.redis.multi().del(keys.meta, keys.members, keys.payments, keys.locks);
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

  /** Drops the meta key so the next access rebuilds the team from PostgreSQL. */
  async invalidate(activityId: string, teamId: string): Promise<void> {
    await this.redis.del(teamKeys(activityId, teamId).meta);
  }

  private entry(activityId: string, [, entryId, fields]: Raw): JournalEntry | null {
    return entryId ? journalEntry(activityKeys(activityId).journal, entryId, fields) : null;
  }
}

const iso = (ms: number) => new Date(ms).toISOString();
