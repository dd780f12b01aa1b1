import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { Prisma } from '../../generated/prisma/client.ts';
import { type RuleInputIssue, requireAChange, ruleInputIssue, ruleIssue } from '../../i18n/issues.ts';
import { rebuildOnce } from '../../infra/campaign/rebuild.ts';
import { type KeysetPage, keysetPageArgs } from '../../infra/db/pages.ts';
import { keysExpireAt, retainUntil } from '../../infra/redis/keys.ts';
import { BadInputError } from '../errors.ts';
import { activityId, requestId } from '../ids.ts';
import { type OperatorRequest, recordRequest } from '../operatorRequests.ts';
import { showsSomething } from '../text.ts';
import type { TeamDeps } from './campaign.ts';
import type { OpenTeam } from './persistence.ts';
import { activityKeys } from './store.ts';

/** The longest a seat lock lasts: a lock taken earlier has run out. */
export const MAX_LOCK_SECONDS = 3600;

const LIMITS = {
  maxCapacity: 50,
  maxLockSeconds: MAX_LOCK_SECONDS,
  maxFormationSeconds: 7 * 24 * 3600,
  maxPriceCents: 100_000_000,
  maxTeamsPerUser: 1000,
  maxLengthDays: 366,
};

/** Trimmed, as the other campaigns' titles are. */
const text = (name: string, max: number) =>
  z
    .string()
    .trim()
    .max(max, `${name} must be at most ${max} characters`)
    .regex(/\S/, `${name} must not be blank`)
    .refine(...showsSomething(name));
const cents = (name: string) => z.number().int().min(1, `${name} must be at least 1 cent`).max(LIMITS.maxPriceCents, `${name} must be at most ${LIMITS.maxPriceCents} cents`);

/** What an operator defines; the terms every team of the activity gets. */
export const groupBuyActivityInput = z
  .object({
    /** Chosen by the operator (a readable slug), or minted. */
    id: activityId.optional(),
    title: text('title', 200),
    description: z.string().max(5000, 'description must be at most 5000 characters'),
    priceCents: cents('priceCents'),
    groupPriceCents: cents('groupPriceCents'),
    capacity: z.number().int().min(2, 'capacity must be 2 to 50').max(LIMITS.maxCapacity, 'capacity must be 2 to 50'),
    lockSeconds: z.number().int().min(1).max(LIMITS.maxLockSeconds),
    formationSeconds: z.number().int().min(1).max(LIMITS.maxFormationSeconds),
    startsAt: z.date(),
    endsAt: z.date(),
    maxTeamsPerUser: z.number().int().min(1).max(LIMITS.maxTeamsPerUser),
    maxOpenTeamsPerLeader: z.number().int().min(1).max(LIMITS.maxTeamsPerUser),
    requestId: requestId.nullish(),
  })
  .refine((input) => input.groupPriceCents <= input.priceCents, { ...ruleIssue('GROUP_PRICE_ABOVE_PRICE'), path: ['groupPriceCents'] })
  .refine((input) => input.endsAt > input.startsAt, { ...ruleIssue('ENDS_BEFORE_STARTS'), path: ['endsAt'] })
  .refine((input) => input.endsAt.getTime() - input.startsAt.getTime() <= LIMITS.maxLengthDays * 86_400_000, {
    ...ruleIssue('ACTIVITY_TOO_LONG', { days: LIMITS.maxLengthDays }),
    path: ['endsAt'],
  });

export type GroupBuyActivityInput = z.infer<typeof groupBuyActivityInput>;

/** updateGroupBuyActivity's input: what changes; a field left out (or null) stays as it is. */
export const updateGroupBuyActivityInput = z
  .object({
    title: text('title', 200).nullish(),
    description: z.string().max(5000, 'description must be at most 5000 characters').nullish(),
    endsAt: z.date().nullish(),
    paused: z.boolean().nullish(),
  })
  .superRefine(requireAChange);

export type UpdateGroupBuyActivityInput = z.infer<typeof updateGroupBuyActivityInput>;

export interface GroupBuyActivity extends Omit<GroupBuyActivityInput, 'id' | 'requestId'> {
  id: string;
  paused: boolean;
  createdAt: Date;
}

/**
 * The advisory lock openTeam's transaction takes shared and an operator's change takes
 * exclusive. PostgreSQL queues these fairly: a change waits for the opens under way only,
 * and the opens after it wait for it, then see it. (Row locks would not do: a stream of
 * KEY SHARE lockers starves a FOR UPDATE for as long as a storm lasts.)
 */
export const activityChangeLock = (activityId: string) => `group-buy:${activityId}`;

/** When an activity's keys may go: once its last team's deadline is long past. */
const activityKeysExpireAt = (activity: GroupBuyActivity) => keysExpireAt(retainUntil(activity.endsAt.getTime() + activity.formationSeconds * 1000));

/**
 * How long an instance trusts its copy of an activity for openTeam's quick refusals and for
 * reads; the open's transaction checks the pause and the end against PostgreSQL anyway.
 */
const ACTIVITY_CACHE_MS = 1000;

/**
 * Group-buy activities: defined by operators in PostgreSQL, each cached for a second once
 * read (openTeam reads it on every call). The terms a team takes are copied into it when
 * it opens; what an operator may change later (title, description, end, pause) concerns
 * new teams only. Each activity has two Redis keys beside its teams' (same hash tag): its
 * terms the seat scripts read, and every user's count of teams joined, which the lock
 * script checks against the limit. Both are written together from PostgreSQL under a
 * rebuild lock while the scripts that use them answer `missing`.
 */
export class GroupBuyActivities {
  private readonly cache = new Map<string, { activity: Promise<GroupBuyActivity | null>; readAtMs: number }>();

  constructor(private readonly deps: TeamDeps) {}

  /** Creates the activity, with a requestId made once per request (src/domain/operatorRequests.ts). */
  async create({ id: chosenId, requestId: _, ...terms }: GroupBuyActivityInput, request: OperatorRequest | null): Promise<GroupBuyActivity> {
    // One created ended could never open a team, and would stay in the lists for good.
    if (terms.endsAt.getTime() <= Date.now()) throw BadInputError.of([ruleInputIssue(['input', 'endsAt'], 'ENDS_IN_THE_PAST')]);
    const id = chosenId ?? randomUUID();
    try {
      return await this.deps.prisma.$transaction(async (tx) => {
        // First: a call racing with the same requestId waits here for this one, then fails on its key.
        if (request) await recordRequest(tx, request, id);
        return tx.groupBuyActivity.create({ data: { id, ...terms } });
      });
    } catch (error) {
      // Only the activity's own key: a clash on the request's is the race createOncePerRequest answers.
      const idTaken = error instanceof Prisma.PrismaClientKnownRequestError && error.code === 'P2002' && error.meta?.modelName === 'GroupBuyActivity';
      if (idTaken) throw BadInputError.of([ruleInputIssue(['input', 'id'], 'ACTIVITY_ID_TAKEN', { id })]);
      throw error;
    }
  }

  /** One read per activity a second, however many opens ask at once; an id that names none is not kept. */
  get(id: string): Promise<GroupBuyActivity | null> {
    const cached = this.cache.get(id);
    if (cached && Date.now() - cached.readAtMs < ACTIVITY_CACHE_MS) return cached.activity;
    const activity = this.deps.prisma.groupBuyActivity.findUnique({ where: { id } });
    const entry = { activity, readAtMs: Date.now() };
    this.cache.set(id, entry);
    const forget = () => this.cache.get(id) === entry && this.cache.delete(id);
    activity.then((found) => found ?? forget(), forget);
    return activity;
  }

  /**
   * Applies an operator's change under the activity's change lock (which also keeps two
   * changes apart), checked against the activity as it is at `nowMs`: an ended activity
   * keeps its end and its pause (its teams were told it ended), the end stays after the
   * start and within the longest window. A later end keeps the activity's keys in Redis
   * that much longer. Null when there is no such activity.
   */
  async update(activityId: string, input: UpdateGroupBuyActivityInput, nowMs: number): Promise<GroupBuyActivity | null> {
    const updated = await this.deps.prisma.$transaction(async (tx) => {
      await tx.$executeRaw`SELECT pg_advisory_xact_lock(hashtextextended(${activityChangeLock(activityId)}, 0))`;
      const [current] = await tx.$queryRaw<{ starts_at: Date; ends_at: Date }[]>`SELECT starts_at, ends_at FROM group_buy_activity WHERE id = ${activityId}`;
      if (!current) return null;
      const issues: RuleInputIssue[] = [];
      const ended = current.ends_at.getTime() <= nowMs;
      for (const field of ['endsAt', 'paused'] as const) if (ended && input[field] != null) issues.push(ruleInputIssue(['input', field], 'GROUP_BUY_ENDED'));
      // An end already past ends it now: no team opened under it ends up after its end.
      const endsAt = input.endsAt == null ? undefined : new Date(Math.max(input.endsAt.getTime(), nowMs));
      if (endsAt && endsAt <= current.starts_at) issues.push(ruleInputIssue(['input', 'endsAt'], 'ENDS_BEFORE_STARTS'));
      if (endsAt && endsAt.getTime() - current.starts_at.getTime() > LIMITS.maxLengthDays * 86_400_000) {
        issues.push(ruleInputIssue(['input', 'endsAt'], 'ACTIVITY_TOO_LONG', { days: LIMITS.maxLengthDays }));
      }
      if (issues.length > 0) throw BadInputError.of(issues);
      const changes = Object.fromEntries(Object.entries({ ...input, endsAt }).filter(([, value]) => value != null));
      return tx.groupBuyActivity.update({ where: { id: activityId }, data: changes });
    });
    this.cache.delete(activityId);
    if (updated && input.endsAt != null) {
      const keys = activityKeys(activityId);
      const expireAt = activityKeysExpireAt(updated);
      // Only ever later: the keys of an end brought forward outlive it, as its teams do.
      await Promise.all([keys.activity, keys.joined].map((key) => this.deps.redis.pexpireat(key, expireAt, 'GT')));
    }
    return updated;
  }

  /**
   * An operator's cancel, its PostgreSQL part, under the activity's change lock (so no
   * open commits after it): ends the activity at `nowMs` (one ended already keeps its end)
   * and brings the deadline of each of its teams still OPEN forward to then, so that a
   * rebuild and the deadline sweeper see them due (failTeam.lua moves Redis's). Returns the
   * activity and those teams, for the caller to fail as their deadline would; null when
   * there is no such activity. One not yet started is refused: it has no team to stop,
   * and an end before its start is no window (a pause keeps its teams from opening).
   */
  async cancel(activityId: string, nowMs: number): Promise<{ activity: GroupBuyActivity; openTeams: OpenTeam[] } | null> {
    const now = new Date(nowMs);
    const cancelled = await this.deps.prisma.$transaction(async (tx) => {
      await tx.$executeRaw`SELECT pg_advisory_xact_lock(hashtextextended(${activityChangeLock(activityId)}, 0))`;
      const current = await tx.groupBuyActivity.findUnique({ where: { id: activityId } });
      if (!current) return null;
      if (current.startsAt >= now) throw BadInputError.of([ruleInputIssue(['activityId'], 'GROUP_BUY_NOT_STARTED')]);
      const activity = current.endsAt <= now ? current : await tx.groupBuyActivity.update({ where: { id: activityId }, data: { endsAt: now } });
      const openTeams = await tx.$queryRaw<OpenTeam[]>`
        UPDATE team SET deadline = least(deadline, ${now}) WHERE activity_id = ${activityId} AND status = 'OPEN'
        RETURNING id AS "teamId", activity_id AS "activityId", deadline`;
      return { activity, openTeams };
    });
    this.cache.delete(activityId);
    return cancelled;
  }

  /** Newest first, by keyset. */
  async list(page: KeysetPage): Promise<GroupBuyActivity[]> {
    const { prisma } = this.deps;
    return prisma.groupBuyActivity.findMany(await keysetPageArgs(prisma.groupBuyActivity, page, { where: {}, orderBy: [{ createdAt: 'desc' }, { id: 'desc' }] }));
  }

  /** Writes the activity's keys if they are missing; false if there is no such activity. */
  install(activityId: string): Promise<boolean> {
    const keys = activityKeys(activityId);
    return rebuildOnce(this.deps, { meta: keys.activity, rebuilding: keys.activityRebuilding }, async () => {
      const activity = await this.get(activityId);
      if (!activity) return false;
      // No script changes the counts while the terms are missing; the changes journaled
      // before are committed first, so PostgreSQL counts them all.
      await this.deps.journal.commitStream(keys.journal);
      const counts = await this.deps.prisma.$queryRaw<{ user_id: string; n: number }[]>(Prisma.sql`
        SELECT m.user_id, count(*)::int AS n FROM team_member m JOIN team t ON t.id = m.team_id
        WHERE t.activity_id = ${activityId} AND t.status <> 'FAILED' AND m.user_id <> t.leader_id
        GROUP BY m.user_id`);
      const expireAt = activityKeysExpireAt(activity);
      const tx = this.deps.redis.multi().del(keys.joined);
      if (counts.length > 0) tx.hset(keys.joined, Object.fromEntries(counts.map((row) => [row.user_id, row.n]))).pexpireat(keys.joined, expireAt);
      tx.hset(keys.activity, { groupPriceCents: activity.groupPriceCents, maxTeamsPerUser: activity.maxTeamsPerUser }).pexpireat(keys.activity, expireAt);
      await tx.exec();
      return true;
    });
  }
}
