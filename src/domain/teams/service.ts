import { randomUUID } from 'node:crypto';
import { groupBy } from '../../infra/collections.ts';
import type { JournalEntry } from '../../infra/journal/journal.ts';
import { hydrate, withHydrationLock, withRebuild } from '../../infra/redis/hydration.ts';
import { retainUntil } from '../../infra/redis/keys.ts';
import { redisTimeMs } from '../../infra/redis/time.ts';
import type { CampaignDeps } from '../deps.ts';
import { BadInputError, ServiceUnavailableError } from '../errors.ts';
import { NotFound } from '../problems.ts';
import type { OpenTeamInput } from './input.ts';
import { activityOfTeam, listTeams, loadSnapshot, seatEventsOf, teamJournalHandler, teamsChangedBy, teamsPastDeadline } from './persistence.ts';
import { AlreadyMember, NoSeatLock, TeamClosed, TeamFull } from './problems.ts';
import {
  type SeatLockView,
  type TeamSnapshot,
  type TeamState,
  type TeamStatus,
  TeamStore,
  activityKeys,
  activityOfJournal,
  teamKeys,
} from './store.ts';

export interface SeatLocked {
  team: TeamState;
  lock: SeatLockView;
  /** The team the caller's previous live lock was moved from. */
  releasedTeamId: string | null;
}

export type TeamDeps = Omit<CampaignDeps, 'random'>;

/** Activities with teams whose locks the expiry sweeper watches: activityId -> until (ms). */
const ACTIVITY_REGISTRY = 'teams:activities';
/** Each retry follows the user's lock to where a request of theirs on another instance moved it. */
const LOCK_ATTEMPTS = 8;
/** How many times a confirmation that clashed with PostgreSQL rebuilds the team and tries again. */
const CONFIRM_ATTEMPTS = 3;
const EXPIRY_BATCH = 500;
const DEADLINE_BATCH = 100;
const ACTIVITY_CACHE_MAX = 100_000;

const topic = (teamId: string) => `team:${teamId}`;

export class TeamService {
  private readonly store: TeamStore;
  /** teamId -> activityId; a team never changes activity, so entries never go stale. */
  private readonly activities = new Map<string, string>();
  /** The tail of each user's queue of lock requests in this process. */
  private readonly queues = new Map<string, Promise<void>>();

  constructor(private readonly deps: TeamDeps) {
    this.store = new TeamStore(deps.redis, deps.scripts);
    // A confirmation PostgreSQL turned down took a seat (and maybe moved a lock) in Redis.
    const forget = (entry: JournalEntry) => Promise.all(teamsChangedBy(entry).map((teamId) => this.store.invalidate(activityOfJournal(entry.stream), teamId)));
    deps.journal.register(teamJournalHandler, forget);
  }

  /** The caller becomes the leader and the first member. */
  async open(leaderId: string, input: OpenTeamInput): Promise<TeamState> {
    const now = await redisTimeMs(this.deps.redis);
    const id = randomUUID();
    // The team is listed by its activity as soon as PostgreSQL has it, and a rebuild from
    // that list lets seats be locked; under the rebuild lock, this first write of its keys
    // cannot come after such a rebuild and wipe those locks.
    const team = await withHydrationLock(this.deps, teamKeys(input.activityId, id).hydrating, async () => {
      const created = await this.createTeam(id, leaderId, input, now);
      this.remember(created.id, created.activityId);
      await this.writeToRedis(created);
      return created;
    });
    return (await this.store.readState(team.activityId, team.id))!;
  }

  private createTeam(id: string, leaderId: string, input: OpenTeamInput, now: number) {
    return this.deps.prisma.team.create({
      data: {
        id,
        activityId: input.activityId,
        leaderId,
        capacity: input.capacity,
        lockSeconds: input.lockSeconds,
        deadline: new Date(now + input.formationSeconds * 1000),
        createdAt: new Date(now),
        members: { create: { userId: leaderId, seat: 1, joinedAt: new Date(now) } },
      },
      include: { members: { select: { userId: true, paymentRef: true, seat: true, joinedAt: true } } },
    });
  }

  /** Locks a seat for the caller (moving their lock from another team of the activity). Resolves once journaled in PostgreSQL. */
  async lock(userId: string, teamId: string): Promise<SeatLocked> {
    const activityId = await this.activityOf(teamId);
    if (!activityId) throw new NotFound('team', teamId);
    return this.oneAtATime(`${activityId}\u0000${userId}`, () => this.lockIn(activityId, userId, teamId));
  }

  /**
   * The script must be given the keys of the team holding the caller's lock, which only a read
   * before the call can tell; a lock request of the same user that lands in between makes the
   * script answer with the new holder, and the call is repeated with it. Running one user's
   * lock requests one at a time per instance keeps that to requests racing across instances.
   */
  private async lockIn(activityId: string, userId: string, teamId: string): Promise<SeatLocked> {
    let expectedHolder = '';
    for (let attempt = 1; attempt <= LOCK_ATTEMPTS; attempt++) {
      const reply = await withRebuild(
        () => this.store.lock(activityId, teamId, userId, randomUUID(), expectedHolder),
        () => this.rebuild(activityId, teamId),
      );
      if (!reply) throw new NotFound('team', teamId);
      if (reply.kind === 'holderIs') {
        expectedHolder = reply.teamId;
        continue;
      }
      await this.settle(activityId, reply.entry);
      switch (reply.kind) {
        case 'member':
          throw new AlreadyMember();
        case 'closed':
          throw new TeamClosed(reply.status);
        case 'full':
          throw new TeamFull(reply.nextUnlockAtMs === null ? null : new Date(reply.nextUnlockAtMs), new Date(reply.nowMs));
        case 'locked':
        case 'alreadyLocked': {
          const team = await this.mustRead(activityId, teamId);
          const lock = {
            userId,
            lockedAt: new Date(reply.expiresAtMs - team.lockSeconds * 1000).toISOString(),
            expiresAt: new Date(reply.expiresAtMs).toISOString(),
          };
          return { team, lock, releasedTeamId: reply.kind === 'locked' ? reply.releasedTeamId : null };
        }
      }
    }
    throw new ServiceUnavailableError('your seat lock moved between teams while this request ran; try again');
  }

  /** Gives the caller's lock back; the team as it is now, or null if there is no such team. */
  async release(userId: string, teamId: string): Promise<TeamState | null> {
    const activityId = await this.activityOf(teamId);
    if (!activityId) return null;
    const reply = await withRebuild(() => this.store.release(activityId, teamId, userId, randomUUID()), () => this.rebuild(activityId, teamId));
    if (!reply) return null;
    await this.settle(activityId, reply.entry);
    return this.mustRead(activityId, teamId);
  }

  /** Lock -> membership, idempotent per paymentRef. Resolves once the member is committed in PostgreSQL. */
  async confirm(userId: string, teamId: string, paymentRef: string): Promise<TeamState> {
    const activityId = await this.activityOf(teamId);
    if (!activityId) throw new NotFound('team', teamId);
    for (let attempt = 1; attempt <= CONFIRM_ATTEMPTS; attempt++) {
      const reply = await withRebuild(
        () => this.store.confirm(activityId, teamId, userId, paymentRef, randomUUID()),
        () => this.rebuild(activityId, teamId),
      );
      if (!reply) throw new NotFound('team', teamId);
      switch (reply.kind) {
        case 'paymentRefTaken':
          throw new BadInputError('this paymentRef already confirmed another member of the team');
        case 'noSeatLock':
          await this.settle(activityId, reply.entry);
          throw new NoSeatLock(reply.nextUnlockAtMs === null ? null : new Date(reply.nextUnlockAtMs));
        case 'closed':
          await this.settle(activityId, reply.entry);
          throw new TeamClosed(reply.status);
        case 'joined':
          if ((await this.settle(activityId, reply.entry)) === 'persisted') return this.mustRead(activityId, teamId);
          // The commit dropped the team's keys already: dropping them again here could
          // wipe the seat locks of a rebuild made in between.
          break;
        case 'alreadyMember':
          // A repeat may overtake the first call's commit: answer only once the member is durable.
          if (await this.isDurableMember(activityId, teamId, userId)) return this.mustRead(activityId, teamId);
          await this.store.invalidate(activityId, teamId);
          break;
      }
      // Redis holds a member PostgreSQL refused (Redis lost data and was rebuilt while
      // confirmations were in flight). The team is rebuilt from PostgreSQL; retry.
      this.deps.log.warn({ teamId, userId }, 'confirmation conflicted with PostgreSQL; rebuilding the team');
    }
    throw new ServiceUnavailableError('the team is being rebuilt; try again');
  }

  async get(teamId: string): Promise<TeamState | null> {
    const activityId = await this.activityOf(teamId);
    return activityId ? this.read(activityId, teamId) : null;
  }

  /** The "join a team" list: open teams with free seats first, then the rest, oldest first. */
  async list(activityId: string, status: TeamStatus | null, limit: number): Promise<TeamState[]> {
    const ids = await listTeams(this.deps.prisma, activityId, status, limit);
    for (const id of ids) this.remember(id, activityId);
    const states = (await Promise.all(ids.map((id) => this.read(activityId, id)))).filter(
      (state): state is TeamState => state !== null && (status === null || state.status === status),
    );
    // Stable: the order PostgreSQL gave stays within each group.
    return states.sort((a, b) => Number(b.freeSeats > 0) - Number(a.freeSeats > 0));
  }

  /**
   * The team now, then after every change, until it is COMPLETE or FAILED. A state is
   * read from Redis in one transaction (members, locks and version together), and is
   * published only after the change's commit, so the last event is the durable state.
   */
  watch(teamId: string): AsyncIterableIterator<TeamState> {
    return this.deps.events.currentThenChanges(topic(teamId), {
      load: () => this.get(teamId),
      versionOf: (state) => state.version,
      isFinal: (state) => state.status !== 'OPEN',
    });
  }

  /**
   * The expiry sweeper: frees the seats of locks that ran out, without waiting for anyone to
   * ask, and announces it. Reads the due entries of every watched activity's expiry index;
   * the expire script re-checks each team against Redis TIME. Returns the locks it expired.
   */
  async expireDueLocks(): Promise<number> {
    const nowMs = await redisTimeMs(this.deps.redis);
    const registered = await this.deps.redis.zrange(ACTIVITY_REGISTRY, 0, -1, 'WITHSCORES');
    const activities: { activityId: string; until: number }[] = [];
    for (let i = 0; i < registered.length; i += 2) activities.push({ activityId: registered[i]!, until: Number(registered[i + 1]) });
    const pipeline = this.deps.redis.pipeline();
    for (const { activityId } of activities) pipeline.zrangebyscore(activityKeys(activityId).expiries, '-inf', nowMs, 'LIMIT', 0, EXPIRY_BATCH);
    const dueByActivity = (await pipeline.exec()) ?? [];

    const expirations: Promise<number>[] = [];
    for (const [index, { activityId, until }] of activities.entries()) {
      const [error, due] = dueByActivity[index] ?? [];
      if (error) throw error;
      const entries = due as string[];
      if (entries.length === 0) {
        if (until < nowMs) await this.forgetActivity(activityId);
        continue;
      }
      // Entries are "<teamId>:<userId>"; team ids are UUIDs, user ids may hold anything.
      const byTeam = groupBy(entries, (entry) => entry.slice(0, entry.indexOf(':')));
      for (const [teamId, ofTeam] of byTeam) {
        const users = ofTeam.map((entry) => entry.slice(teamId.length + 1));
        expirations.push(this.expireTeam(activityId, teamId, users));
      }
    }
    const counts = await Promise.all(expirations);
    return counts.reduce((a, b) => a + b, 0);
  }

  /**
   * Fails the teams still OPEN at their deadline: Redis first (no seat can be taken after),
   * then PostgreSQL through the journal, with every member recorded as owed a refund.
   */
  async failOverdue(): Promise<number> {
    const now = new Date(await redisTimeMs(this.deps.redis));
    let failed = 0;
    for (const { id, activityId } of await teamsPastDeadline(this.deps.prisma, now, DEADLINE_BATCH)) {
      this.remember(id, activityId);
      try {
        const reply = await withRebuild(() => this.store.fail(activityId, id, randomUUID()), () => this.rebuild(activityId, id));
        if (reply?.kind !== 'failed') continue;
        await this.settle(activityId, reply.entry);
        this.deps.log.info({ teamId: id, activityId }, 'a team missed its deadline; its members are to be refunded');
        failed++;
      } catch (error) {
        // One team's trouble must not hold up the others; the next sweep tries it again.
        this.deps.log.error({ err: error, teamId: id, activityId }, 'could not fail an overdue team');
      }
    }
    return failed;
  }

  /** Runs `task` after every earlier task queued under `key` in this process has settled. */
  private oneAtATime<T>(key: string, task: () => Promise<T>): Promise<T> {
    const run = (this.queues.get(key) ?? Promise.resolve()).then(task);
    const settled = run.then(
      () => undefined,
      () => undefined,
    );
    this.queues.set(key, settled);
    void settled.then(() => {
      if (this.queues.get(key) === settled) this.queues.delete(key);
    });
    return run;
  }

  private async expireTeam(activityId: string, teamId: string, dueUsers: string[]): Promise<number> {
    const entry = await this.store.expire(activityId, teamId, randomUUID(), dueUsers);
    await this.settle(activityId, entry);
    return entry ? seatEventsOf(entry).length : 0;
  }

  /** Commits a script's journal entry (the durable ack), then announces every team it changed. */
  private async settle(activityId: string, entry: JournalEntry | null): Promise<'persisted' | 'conflict' | 'unchanged'> {
    if (!entry) return 'unchanged';
    try {
      return await this.deps.journal.commit(entry);
    } finally {
      // Even when the commit fails: Redis changed already, and a team it closed changes
      // no more, so a later change would never bring its subscribers the final state.
      for (const teamId of teamsChangedBy(entry)) {
        this.deps.events.publishLatest(topic(teamId), () => this.store.readState(activityId, teamId));
      }
    }
  }

  private async isDurableMember(activityId: string, teamId: string, userId: string): Promise<boolean> {
    const find = () => this.deps.prisma.teamMember.findUnique({ where: { teamId_userId: { teamId, userId } }, select: { userId: true } });
    if (await find()) return true;
    await this.deps.journal.commitStream(activityKeys(activityId).journal);
    return (await find()) !== null;
  }

  private async read(activityId: string, teamId: string): Promise<TeamState | null> {
    const state = await this.store.readState(activityId, teamId);
    if (state) return state;
    return (await this.rebuild(activityId, teamId)) ? this.store.readState(activityId, teamId) : null;
  }

  /** For a team known to exist: its keys may have gone since, so a rebuild may be needed. */
  private async mustRead(activityId: string, teamId: string): Promise<TeamState> {
    const state = await this.read(activityId, teamId);
    if (!state) throw new NotFound('team', teamId);
    return state;
  }

  private async activityOf(teamId: string): Promise<string | null> {
    const cached = this.activities.get(teamId);
    if (cached) return cached;
    const activityId = await activityOfTeam(this.deps.prisma, teamId);
    if (activityId) this.remember(teamId, activityId);
    return activityId;
  }

  private remember(teamId: string, activityId: string): void {
    if (this.activities.size >= ACTIVITY_CACHE_MAX) this.activities.delete(this.activities.keys().next().value!);
    this.activities.set(teamId, activityId);
  }

  /** Stops watching an activity past its retention once no lock of it is left. */
  private async forgetActivity(activityId: string): Promise<void> {
    if ((await this.deps.redis.zcard(activityKeys(activityId).expiries)) === 0) {
      await this.deps.redis.zrem(ACTIVITY_REGISTRY, activityId);
    }
  }

  /** Rebuilds the team's keys from PostgreSQL; false if it does not exist. */
  private rebuild(activityId: string, teamId: string): Promise<boolean> {
    return hydrate(this.deps, teamKeys(activityId, teamId), async () => {
      // Entries still in the stream are changes Redis made before it lost the team's keys;
      // persist them first so the rebuild counts them.
      await this.deps.journal.commitStream(activityKeys(activityId).journal);
      const snapshot = await loadSnapshot(this.deps.prisma, teamId);
      if (!snapshot) return false;
      await this.writeToRedis(snapshot);
      return true;
    });
  }

  private async writeToRedis(snapshot: TeamSnapshot): Promise<void> {
    const until = retainUntil(snapshot.deadline.getTime());
    await this.deps.journal.trackStream(activityKeys(snapshot.activityId).journal, until);
    await this.deps.redis.zadd(ACTIVITY_REGISTRY, 'GT', until, snapshot.activityId);
    await this.store.write(snapshot);
  }
}
