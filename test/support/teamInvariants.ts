import { expect } from 'vitest';
import { activityKeys, teamKeys } from '../../src/domain/teams/store.ts';
import type { RedisClient } from '../../src/infra/redis/connection.ts';
import type { Stores } from './stores.ts';

export interface RedisTeam {
  meta: Record<string, string>;
  members: Record<string, string>;
  /** [userId, expiresAtMs] */
  locks: [string, number][];
}

export interface RedisTeamsSnapshot {
  nowMs: number;
  teams: Map<string, RedisTeam>;
  holders: Record<string, string>;
}

/** Every listed team of one activity, the activity's lock holders and Redis TIME, read in one MULTI: one instant. */
export async function readRedisTeams(redis: RedisClient, activityId: string, teamIds: string[]): Promise<RedisTeamsSnapshot> {
  const tx = redis.multi().time().hgetall(activityKeys(activityId).holders);
  for (const teamId of teamIds) {
    const keys = teamKeys(activityId, teamId);
    tx.hgetall(keys.meta).hgetall(keys.members).zrange(keys.locks, 0, -1, 'WITHSCORES');
  }
  const results = (await tx.exec())!.map(([error, value]) => {
    if (error) throw error;
    return value;
  });
  const [seconds, micros] = results[0] as [string, string];
  const teams = new Map<string, RedisTeam>();
  teamIds.forEach((teamId, i) => {
    const flat = results[2 + i * 3 + 2] as string[];
    const locks: [string, number][] = [];
    for (let j = 0; j < flat.length; j += 2) locks.push([flat[j]!, Number(flat[j + 1])]);
    teams.set(teamId, { meta: results[2 + i * 3] as Record<string, string>, members: results[2 + i * 3 + 1] as Record<string, string>, locks });
  });
  return { nowMs: Number(seconds) * 1000 + Math.floor(Number(micros) / 1000), teams, holders: results[1] as Record<string, string> };
}

/**
 * The seat invariants at one instant of Redis: members + live locks <= capacity, members <=
 * capacity, at most one live lock per user in the activity, the holder index naming each
 * live lock's team, and a COMPLETE team full.
 */
export function redisViolations({ nowMs, teams, holders }: RedisTeamsSnapshot): string[] {
  const violations: string[] = [];
  const lockedIn = new Map<string, string>();
  for (const [teamId, { meta, members, locks }] of teams) {
    if (!meta.capacity) continue;
    const capacity = Number(meta.capacity);
    const live = locks.filter(([, expiresAt]) => expiresAt > nowMs);
    const memberCount = Object.keys(members).length;
    if (memberCount + live.length > capacity) violations.push(`team ${teamId}: ${memberCount} members + ${live.length} live locks > capacity ${capacity}`);
    if (memberCount > capacity) violations.push(`team ${teamId}: ${memberCount} members > capacity ${capacity}`);
    if (meta.status === 'COMPLETE' && memberCount !== capacity) violations.push(`team ${teamId}: COMPLETE with ${memberCount} of ${capacity} members`);
    if (meta.status !== 'OPEN' && live.length > 0) violations.push(`team ${teamId}: ${meta.status} with ${live.length} live locks`);
    for (const [user] of live) {
      const other = lockedIn.get(user);
      if (other) violations.push(`user ${user} holds live locks on ${other} and ${teamId}`);
      lockedIn.set(user, teamId);
      if (holders[user] !== teamId) violations.push(`user ${user} locks ${teamId} but the holder index says ${holders[user]}`);
      if (members[user] !== undefined) violations.push(`user ${user} is a member of ${teamId} and holds a lock on it`);
    }
  }
  return violations;
}

interface TeamRow {
  id: string;
  capacity: number;
  status: 'OPEN' | 'COMPLETE' | 'FAILED';
  leader_id: string;
}

export interface MemberRow {
  team_id: string;
  user_id: string;
  payment_ref: string | null;
}

/** The refunds owed for failed teams (source key 'team:<team>:<user>', team ids are UUIDs). */
export async function teamRefunds(stores: Stores, teamIds: string[]): Promise<{ team_id: string; user_id: string; amount_cents: number; payment_ref: string | null }[]> {
  const { rows } = await stores.sql.query<{ source_key: string; amount_cents: number; payment_ref: string | null }>(
    `SELECT source_key, amount_cents, payment_ref FROM refund WHERE reason = 'TEAM_FAILED'`,
  );
  return rows
    .map(({ source_key, ...rest }) => {
      const [, teamId = ''] = source_key.split(':');
      return { team_id: teamId, user_id: source_key.slice(`team:${teamId}:`.length), ...rest };
    })
    .filter((refund) => teamIds.includes(refund.team_id));
}

/** The seat invariants in PostgreSQL alone. */
export async function postgresViolations(stores: Stores, teamIds: string[]): Promise<string[]> {
  const { rows: teams } = await stores.sql.query<TeamRow>('SELECT id, capacity, status, leader_id FROM team WHERE id = ANY($1)', [teamIds]);
  const { rows: members } = await stores.sql.query<MemberRow>('SELECT team_id, user_id, payment_ref FROM team_member WHERE team_id = ANY($1)', [teamIds]);
  const refunds = await teamRefunds(stores, teamIds);
  const { rows: paid } = await stores.sql.query<{ team_id: string; user_id: string }>(
    `SELECT p.team_id, p.user_id FROM payment p JOIN team_member m ON m.payment_ref = p.payment_ref AND m.user_id = p.user_id AND m.team_id = p.team_id
     WHERE p.team_id = ANY($1) AND p.status = 'SUCCEEDED'`,
    [teamIds],
  );
  const violations: string[] = [];
  for (const team of teams) {
    const ofTeam = members.filter((member) => member.team_id === team.id);
    if (ofTeam.length > team.capacity) violations.push(`PostgreSQL: team ${team.id} has ${ofTeam.length} members > capacity ${team.capacity}`);
    if (!ofTeam.some((member) => member.user_id === team.leader_id)) violations.push(`PostgreSQL: team ${team.id} lacks its leader`);
    if (team.status === 'COMPLETE' && ofTeam.length !== team.capacity) violations.push(`PostgreSQL: team ${team.id} COMPLETE with ${ofTeam.length} members`);
    const refunded = refunds
      .filter((refund) => refund.team_id === team.id)
      .map((refund) => refund.user_id)
      .sort();
    // A failed team owes back what its members paid: those seated by an operator paid nothing here.
    const payers = new Set(paid.filter((row) => row.team_id === team.id).map((row) => row.user_id));
    const expected =
      team.status === 'FAILED'
        ? ofTeam
            .map((member) => member.user_id)
            .filter((user) => payers.has(user))
            .sort()
        : [];
    if (JSON.stringify(refunded) !== JSON.stringify(expected)) violations.push(`PostgreSQL: team ${team.id} (${team.status}) refunds ${refunded} for members ${expected}`);
    const refs = ofTeam.map((member) => member.payment_ref).filter((ref) => ref !== null);
    if (new Set(refs).size !== refs.length) violations.push(`PostgreSQL: team ${team.id} has a payment reference twice`);
  }
  return violations;
}

/** The teams' keys in Redis without an expiry: each must go when its team does, or Redis fills up over the campaigns. */
async function keysThatNeverExpire(stores: Stores, activityId: string, teamIds: string[]): Promise<string[]> {
  const keys = teamIds.flatMap((teamId) => {
    const { meta, members, payments, locks, lockRefs, lockCounts, lateRefs } = teamKeys(activityId, teamId);
    return [meta, members, payments, locks, lockRefs, lockCounts, lateRefs];
  });
  const ttls = await Promise.all(keys.map((key) => stores.redis.pttl(key)));
  // -2: no such key; -1: a key that never expires.
  return keys.filter((_key, index) => ttls[index] === -1);
}

/**
 * Every team invariant of docs/architecture.md in Redis and in PostgreSQL, and the two agreeing (status,
 * members, lock history) once the activity's journal is empty. Returns PostgreSQL's members.
 */
export async function expectTeamInvariants(stores: Stores, activityId: string, teamIds: string[], { locksLost = false }: { locksLost?: boolean } = {}): Promise<MemberRow[]> {
  const snapshot = await readRedisTeams(stores.redis, activityId, teamIds);
  expect(redisViolations(snapshot)).toEqual([]);
  expect(await keysThatNeverExpire(stores, activityId, teamIds)).toEqual([]);
  expect(await postgresViolations(stores, teamIds)).toEqual([]);

  const { rows: members } = await stores.sql.query<MemberRow>('SELECT team_id, user_id, payment_ref FROM team_member WHERE team_id = ANY($1)', [teamIds]);
  const { rows: teams } = await stores.sql.query<TeamRow>('SELECT id, capacity, status, leader_id FROM team WHERE id = ANY($1)', [teamIds]);
  expect(teams).toHaveLength(teamIds.length);
  if ((await stores.redis.xlen(activityKeys(activityId).journal)) === 0) {
    for (const team of teams) {
      const inRedis = snapshot.teams.get(team.id)!;
      if (!inRedis.meta.status) continue;
      expect(inRedis.meta.status, `status of ${team.id}`).toBe(team.status);
      const durable = members
        .filter((member) => member.team_id === team.id)
        .map((member) => member.user_id)
        .sort();
      expect(Object.keys(inRedis.members).sort(), `members of ${team.id}`).toEqual(durable);
    }
    // Every member but the leader came in through exactly one journaled confirmation.
    const { rows: confirmed } = await stores.sql.query<{ team_id: string; user_id: string; n: number }>(
      `SELECT team_id, user_id, count(*)::int AS n FROM team_seat_event WHERE kind = 'CONFIRMED' AND team_id = ANY($1) GROUP BY team_id, user_id`,
      [teamIds],
    );
    const leaders = new Map(teams.map((team) => [team.id, team.leader_id]));
    const joined = members
      .filter((member) => leaders.get(member.team_id) !== member.user_id)
      .map((member) => `${member.team_id}/${member.user_id}:1`)
      .sort();
    expect(confirmed.map((row) => `${row.team_id}/${row.user_id}:${row.n}`).sort()).toEqual(joined);

    // Every journaled lock ended exactly once (released, moved, expired or confirmed) or is still
    // in Redis; unless Redis lost its data, and the locks with it, without a trace.
    if (locksLost) return members;
    // Two reads, Redis's locks then PostgreSQL's history: a lock the expiry sweeper ends in
    // between (journaled and committed) is held in one and ended in the other. Both are read
    // again until they agree, for a while; an imbalance that is real stays.
    let unbalanced = await unbalancedLocks(stores, activityId, teamIds);
    for (let tries = 0; unbalanced.length > 0 && tries < 10; tries++) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      unbalanced = await unbalancedLocks(stores, activityId, teamIds);
    }
    expect(unbalanced, 'lock history that does not match the locks Redis holds').toEqual([]);
  }
  return members;
}

/** The (team, user) pairs whose journaled locks did not end exactly once, or end with one Redis still holds. */
async function unbalancedLocks(stores: Stores, activityId: string, teamIds: string[]) {
  const snapshot = await readRedisTeams(stores.redis, activityId, teamIds);
  const { rows: history } = await stores.sql.query<{ team_id: string; user_id: string; open: number }>(
    `SELECT team_id, user_id,
            (count(*) FILTER (WHERE kind = 'LOCKED') - count(*) FILTER (WHERE kind IN ('RELEASED', 'MOVED', 'EXPIRED'))
             - count(*) FILTER (WHERE kind = 'CONFIRMED' AND expires_at IS NOT NULL))::int AS open
     FROM team_seat_event WHERE team_id = ANY($1) GROUP BY team_id, user_id`,
    [teamIds],
  );
  const held = new Set([...snapshot.teams].flatMap(([teamId, team]) => team.locks.map(([user]) => `${teamId}/${user}`)));
  return history.filter((row) => row.open !== (held.has(`${row.team_id}/${row.user_id}`) ? 1 : 0));
}
