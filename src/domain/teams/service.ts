import { randomFillSync, randomUUID } from 'node:crypto';
import { ruleInputIssue } from '../../i18n/issues.ts';
import type { Missing } from '../../infra/campaign/campaign.ts';
import type { KeysetPage } from '../../infra/db/pages.ts';
import { redisTimeMs } from '../../infra/redis/time.ts';
import { BadInputError, ServiceUnavailableError } from '../errors.ts';
import { createOncePerRequest, operatorRequestOf } from '../operatorRequests.ts';
import { NotFound } from '../problems.ts';
import type { GroupBuyActivity, GroupBuyActivityInput, UpdateGroupBuyActivityInput } from './activities.ts';
import { TeamCampaign, type TeamDeps } from './campaign.ts';
import { DeadlineSweeper } from './deadlines.ts';
import type { OpenTeamInput } from './input.ts';
import { LockExpirySweeper } from './lockExpiry.ts';
import { insertTeam, listTeams, operatorSeatPaymentProblem, recentlyLockedTeams, teamOfRequest, teamsOfUser, teamsPage } from './persistence.ts';
import { AlreadyMember, GroupBuyNotActive, NoSeatLock, SeatLockLimitReached, TeamClosed, TeamFull, TeamLimitReached } from './problems.ts';
import { type ConfirmReply, type ConfirmedBy, type LockReply, type SeatLockView, type TeamRef, type TeamState, type TeamStatus, activityKeys, teamStateOf } from './store.ts';

export type { TeamDeps } from './campaign.ts';

/** What the caller pays for a seat lock: the server minted the reference for this user, team and lock. */
export interface PaymentIntent {
  paymentRef: string;
  amountCents: number;
  expiresAt: string;
}

export interface SeatLocked {
  team: TeamState;
  lock: SeatLockView;
  /** The team the caller's previous live lock was moved from. */
  releasedTeamId: string | null;
  payment: PaymentIntent;
}

/** A provider's notify that a seat's payment succeeded. */
export interface SeatPayment {
  userId: string;
  teamId: string;
  paymentRef: string;
  providerTxnId: string;
}

const PAYMENT_REF_BYTES = 18;
// Drawn from a batch of entropy, as node:crypto draws UUIDs: one randomBytes call per
// lock cost the teams bench 2.9% of its CPU. Each byte is handed out once.
const paymentRefEntropy = Buffer.alloc(PAYMENT_REF_BYTES * 256);
let paymentRefOffset = paymentRefEntropy.length;

/** Unguessable (144 random bits), so no one can pay (or be confirmed with) a reference they were not given. */
export function mintPaymentRef(): string {
  if (paymentRefOffset === paymentRefEntropy.length) {
    randomFillSync(paymentRefEntropy);
    paymentRefOffset = 0;
  }
  const ref = paymentRefEntropy.toString('base64url', paymentRefOffset, paymentRefOffset + PAYMENT_REF_BYTES);
  paymentRefOffset += PAYMENT_REF_BYTES;
  return `pay_${ref}`;
}

/** How many teams a cancel fails at a time: an activity of thousands does not flood Redis and the journal at once. */
const CANCEL_BATCH = 100;

/** Each retry follows the user's lock to where a request of theirs on another instance moved it. */
const LOCK_ATTEMPTS = 8;

/** The group-buy commands and reads; the two sweepers run beside them. */
export class TeamService {
  private readonly teams: TeamCampaign;
  private readonly lockExpiry: LockExpirySweeper;
  private readonly deadlines: DeadlineSweeper;
  /** The tail of each user's queue of lock requests in this process. */
  private readonly queues = new Map<string, Promise<void>>();

  constructor(private readonly deps: TeamDeps) {
    this.teams = new TeamCampaign(deps);
    this.lockExpiry = new LockExpirySweeper(deps, this.teams);
    this.deadlines = new DeadlineSweeper(deps, this.teams);
  }

  /** Creates the activity; with a requestId, once: a retry after a timeout gets the first activity. */
  createActivity(createdBy: string, input: GroupBuyActivityInput): Promise<GroupBuyActivity> {
    const request = operatorRequestOf('groupBuy', createdBy, input);
    return createOncePerRequest(
      this.deps.prisma,
      request,
      () => this.teams.groupBuys.create(input, request),
      (activityId) => this.deps.prisma.groupBuyActivity.findUniqueOrThrow({ where: { id: activityId } }),
    );
  }

  /** Operators: changes the activity's title, description, end or pause. */
  async updateActivity(activityId: string, input: UpdateGroupBuyActivityInput): Promise<GroupBuyActivity> {
    const updated = await this.teams.groupBuys.update(activityId, input, await redisTimeMs(this.deps.redis));
    if (!updated) throw new NotFound('group-buy activity', activityId);
    return updated;
  }

  /**
   * Operators: ends the activity now and fails every team of it still OPEN at once, as
   * their deadline would (GroupBuyActivities.cancel brings it forward): their locks end,
   * their paying members are owed refunds, a payment after is owed back, subscribers hear
   * FAILED; COMPLETE teams stay so. Resolves once each failure is committed. Idempotent: a
   * retry ends nothing more, and fails what a call that broke off left OPEN (as the
   * deadline sweeper does within a second anyway).
   */
  async cancelActivity(activityId: string): Promise<GroupBuyActivity> {
    const cancelled = await this.teams.groupBuys.cancel(activityId, await redisTimeMs(this.deps.redis));
    if (!cancelled) throw new NotFound('group-buy activity', activityId);
    let failed = 0;
    for (let i = 0; i < cancelled.openTeams.length; i += CANCEL_BATCH) {
      const batch = await Promise.all(cancelled.openTeams.slice(i, i + CANCEL_BATCH).map((team) => this.deadlines.fail(team)));
      failed += batch.filter(Boolean).length;
    }
    if (failed > 0) this.deps.log.info({ activityId, failed }, 'a group-buy was cancelled; its open teams failed');
    return cancelled.activity;
  }

  activity(id: string): Promise<GroupBuyActivity | null> {
    return this.teams.groupBuys.get(id);
  }

  activities(page: KeysetPage): Promise<GroupBuyActivity[]> {
    return this.teams.groupBuys.list(page);
  }

  /**
   * The caller becomes the leader and the first member of a new team, on the activity's
   * terms. With a requestId, once: a retry (after a timeout, or racing the first call)
   * gets the team the first call opened, as it is now. That answer comes before the
   * activity's window, pause and maxOpenTeamsPerLeader are checked: they decided whether
   * the team opened, and the retry asks for that team, not for another.
   */
  async open(leaderId: string, { activityId, requestId }: OpenTeamInput): Promise<TeamState> {
    if (!requestId) return this.openOnce(leaderId, activityId, null);
    const first = await teamOfRequest(this.deps.prisma, leaderId, requestId);
    if (first) return this.firstOfRequest(first, activityId, requestId);
    try {
      return await this.openOnce(leaderId, activityId, requestId);
    } catch (error) {
      // The unique (leader, requestId) refused this call, or the leader's cap or a pause did
      // after a racing call with the same requestId opened its team: that one answers for both.
      const winner = await teamOfRequest(this.deps.prisma, leaderId, requestId);
      if (!winner) throw error;
      return this.firstOfRequest(winner, activityId, requestId);
    }
  }

  /** The team first opened under a requestId, if the retry asks for the same activity. */
  private firstOfRequest(first: TeamRef, activityId: string, requestId: string): Promise<TeamState> {
    if (first.activityId !== activityId) throw BadInputError.of([ruleInputIssue(['input', 'requestId'], 'REQUEST_ID_OF_ANOTHER_TEAM', { requestId })]);
    this.teams.remember(first);
    return this.teams.mustRead(first);
  }

  private async openOnce(leaderId: string, activityId: string, requestId: string | null): Promise<TeamState> {
    const activity = await this.teams.groupBuys.get(activityId);
    if (!activity) throw new NotFound('group-buy activity', activityId);
    const now = await redisTimeMs(this.deps.redis);
    const inWindow = now >= activity.startsAt.getTime() && now < activity.endsAt.getTime();
    if (!inWindow || activity.paused) throw new GroupBuyNotActive(activity.startsAt, activity.endsAt, new Date(now), inWindow);
    const ref = { activityId, teamId: randomUUID() };
    // The activity lists the team as soon as PostgreSQL has it, and a rebuild from that list
    // lets seats be locked: created under the rebuild lock, its first keys cannot wipe them.
    await this.teams.runtime.create(ref, async () => {
      const team = await insertTeam(this.deps.prisma, ref, leaderId, requestId, activity, now);
      this.teams.remember(ref);
      return team;
    });
    return (await this.teams.store.readState(ref.activityId, ref.teamId))!;
  }

  /** Locks a seat for the caller (moving their lock from another team of the activity). Resolves once journaled in PostgreSQL. */
  async lock(userId: string, teamId: string): Promise<SeatLocked> {
    const ref = await this.teams.refOf(teamId);
    if (!ref) throw new NotFound('team', teamId);
    return this.oneAtATime(`${ref.activityId}\u0000${userId}`, () => this.lockIn(ref, userId));
  }

  /**
   * The script must be given the keys of the team holding the caller's lock, which only a read
   * before the call can tell; a lock request of the same user that lands in between makes the
   * script answer with the new holder, and the call is repeated with it. Running one user's
   * lock requests one at a time per instance keeps that to requests racing across instances.
   */
  private async lockIn(ref: TeamRef, userId: string): Promise<SeatLocked> {
    let expectedHolder = '';
    const paymentRef = mintPaymentRef();
    for (let attempt = 1; attempt <= LOCK_ATTEMPTS; attempt++) {
      const reply = await this.teams.journaled(ref, () => this.lockOnce(ref, userId, expectedHolder, paymentRef));
      if (!reply) throw new NotFound('team', ref.teamId);
      switch (reply.kind) {
        case 'holderIs':
          expectedHolder = reply.teamId;
          break;
        case 'member':
          throw new AlreadyMember();
        case 'closed':
          throw new TeamClosed(reply.status);
        case 'full':
          throw new TeamFull(reply.nextUnlockAtMs === null ? null : new Date(reply.nextUnlockAtMs), new Date(reply.nowMs));
        case 'limitReached':
          throw new TeamLimitReached(reply.maxTeamsPerUser);
        case 'lockLimitReached':
          throw new SeatLockLimitReached(reply.maxLocks);
        case 'locked':
        case 'alreadyLocked': {
          // The team as the script left it, read in the same step: no second read.
          const team = teamStateOf(ref.activityId, ref.teamId, reply.team)!;
          const expiresAt = new Date(reply.expiresAtMs).toISOString();
          const lock = { userId, lockedAt: new Date(reply.expiresAtMs - team.lockSeconds * 1000).toISOString(), expiresAt };
          // Due a grace before the seat frees, as the script recorded it (lockTeamSeat.lua).
          const payment = { paymentRef: reply.paymentRef, amountCents: reply.amountCents, expiresAt: new Date(reply.paymentDueAtMs).toISOString() };
          return { team, lock, releasedTeamId: reply.kind === 'locked' ? reply.releasedTeamId : null, payment };
        }
      }
    }
    throw new ServiceUnavailableError('your seat lock moved between teams while this request ran; try again');
  }

  /**
   * The lock script, its answer durable: a lock the caller holds already is answered with
   * its payment reference, which the provider's notify looks up in PostgreSQL, so only once
   * that payment is committed (the first call may still be in flight, on another instance).
   * One PostgreSQL never got means Redis was rebuilt while the first call was in flight:
   * the keys are dropped, and the call is made again on rebuilt ones.
   */
  private async lockOnce(ref: TeamRef, userId: string, expectedHolder: string, paymentRef: string): Promise<LockReply | Missing> {
    const reply = await this.teams.store.lock(ref.activityId, ref.teamId, userId, randomUUID(), expectedHolder, paymentRef);
    if (reply.kind !== 'alreadyLocked') return reply;
    const findPayment = () => this.deps.prisma.payment.findUnique({ where: { paymentRef: reply.paymentRef }, select: { paymentRef: true } });
    if (await this.isDurable(ref, findPayment)) return reply;
    this.deps.log.warn({ teamId: ref.teamId, userId }, 'a seat lock conflicted with PostgreSQL; rebuilding the team');
    await this.teams.runtime.forget([ref]);
    return { kind: 'missing' } satisfies Missing;
  }

  /** Gives the caller's lock back; the team as it is now, or null if there is no such team. */
  async release(userId: string, teamId: string): Promise<TeamState | null> {
    const ref = await this.teams.refOf(teamId);
    if (!ref) return null;
    const reply = await this.teams.journaled(ref, () => this.teams.store.release(ref.activityId, teamId, userId, randomUUID()));
    return reply && this.teams.mustRead(ref);
  }

  /** An operator's manual confirmation: lock (or a free seat) -> membership, idempotent per paymentRef. Resolves once the member is committed in PostgreSQL. */
  async confirm(userId: string, teamId: string, paymentRef: string): Promise<TeamState> {
    const ref = await this.teams.refOf(teamId);
    if (!ref) throw new NotFound('team', teamId);
    const problem = await operatorSeatPaymentProblem(this.deps.prisma, teamId, userId, paymentRef);
    if (problem) throw BadInputError.of([ruleInputIssue(['paymentRef'], problem)]);
    const reply = await this.teams.journaled(ref, () => this.confirmOnce(ref, userId, paymentRef, {}));
    if (!reply) throw new NotFound('team', teamId);
    switch (reply.kind) {
      case 'late':
      case 'teamFailed':
        throw new Error(`an operator confirmation cannot be ${reply.kind}`);
      case 'paymentRefTaken':
        throw BadInputError.of([ruleInputIssue(['paymentRef'], 'PAYMENT_SEATED_ANOTHER')]);
      case 'paymentRefunded':
        throw BadInputError.of([ruleInputIssue(['paymentRef'], 'LATE_PAYMENT_SEATS_NO_ONE')]);
      case 'noSeatLock':
        throw new NoSeatLock(reply.nextUnlockAtMs === null ? null : new Date(reply.nextUnlockAtMs));
      case 'closed':
        throw new TeamClosed(reply.status);
      case 'joined':
      case 'alreadyMember':
        return this.teams.mustRead(ref);
    }
  }

  /**
   * A repeat may overtake the first call's commit: a member Redis holds is answered only
   * once it is durable. One PostgreSQL never got means Redis was rebuilt while the first
   * call was in flight: the keys are dropped, and the call is made again on rebuilt ones.
   */
  private async confirmOnce(ref: TeamRef, userId: string, paymentRef: string, by: ConfirmedBy): Promise<ConfirmReply> {
    const reply = await this.teams.store.confirm(ref.activityId, ref.teamId, userId, paymentRef, randomUUID(), by);
    const findMember = () => this.deps.prisma.teamMember.findUnique({ where: { teamId_userId: { teamId: ref.teamId, userId } }, select: { userId: true } });
    if (reply.kind !== 'alreadyMember' || (await this.isDurable(ref, findMember))) return reply;
    this.deps.log.warn({ teamId: ref.teamId, userId }, 'confirmation conflicted with PostgreSQL; rebuilding the team');
    await this.teams.runtime.forget([ref]);
    return { kind: 'missing' } satisfies Missing;
  }

  /**
   * The provider's notify of a seat's payment: 'joined' once the member (and the payment's
   * success, in the same statement) is committed in PostgreSQL, 'seated' when an earlier
   * call seated them (a retry, or a second transaction for the reference), 'late' when
   * the payment seats no one (its lock ran out, moved or was released, or the team
   * closed), or 'teamFailed' when it pays an operator's seat in a team that failed before
   * it came: a refund is owed for the last two. Idempotent per paymentRef.
   */
  async payForSeat({ userId, teamId, paymentRef, providerTxnId }: SeatPayment): Promise<'joined' | 'seated' | 'late' | 'teamFailed'> {
    const ref = await this.teams.refOf(teamId);
    if (!ref) return 'late';
    const reply = await this.teams.journaled(ref, () => this.confirmOnce(ref, userId, paymentRef, { providerTxnId }));
    if (reply?.kind === 'paymentRefTaken') throw new Error(`payment ${paymentRef} seated another user`);
    switch (reply?.kind) {
      case 'joined':
      case 'teamFailed':
        return reply.kind;
      case 'alreadyMember':
        return 'seated';
      default:
        return 'late';
    }
  }

  /** Whether `find` finds the row in PostgreSQL, once the activity's journal is committed if it did not at first. */
  private async isDurable({ activityId }: TeamRef, find: () => Promise<unknown>): Promise<boolean> {
    if (await find()) return true;
    await this.deps.journal.commitStream(activityKeys(activityId).journal);
    return (await find()) !== null;
  }

  async get(teamId: string): Promise<TeamState | null> {
    const ref = await this.teams.refOf(teamId);
    return ref && this.teams.read(ref);
  }

  /** The "join a team" list: open teams with free seats first, then the rest, oldest first. */
  async list(activityId: string, status: TeamStatus | null, limit: number): Promise<TeamState[]> {
    const ids = await listTeams(this.deps.prisma, activityId, status, limit);
    for (const teamId of ids) this.teams.remember({ activityId, teamId });
    const states = (await Promise.all(ids.map((teamId) => this.teams.read({ activityId, teamId })))).filter(
      (state): state is TeamState => state !== null && (status === null || state.status === status),
    );
    // Stable: the order PostgreSQL gave stays within each group.
    return states.sort((a, b) => Number(b.freeSeats > 0) - Number(a.freeSeats > 0));
  }

  /**
   * Every team of the activity (or those of one status), oldest first, a page at a time,
   * each as it is now. The status filters by PostgreSQL, and the page keeps its size: a
   * team whose status moved on since is listed with its new status.
   */
  async page(activityId: string, status: TeamStatus | null, page: KeysetPage): Promise<TeamState[]> {
    const refs = await teamsPage(this.deps.prisma, activityId, status, page);
    for (const ref of refs) this.teams.remember(ref);
    const states = await Promise.all(refs.map((ref) => this.teams.read(ref)));
    return states.filter((state): state is TeamState => state !== null);
  }

  /**
   * The teams the user is in, newest first (by when the team opened): those PostgreSQL
   * holds them a member of (the leader is one), and those where they hold a live seat lock.
   * Membership is durable, so PostgreSQL is its truth; a lock lives only in Redis, so its
   * seat events in PostgreSQL only narrow down where to look, and Redis decides. The set is
   * fixed before the page is read, so page sizes hold; a lock running out in between leaves
   * its team on the page with no lock of the user's.
   */
  async mine(userId: string, page: KeysetPage): Promise<TeamState[]> {
    const candidates = await recentlyLockedTeams(this.deps.prisma, userId, await redisTimeMs(this.deps.redis));
    const locked = await this.teams.store.heldLocks(userId, candidates);
    const refs = await teamsOfUser(
      this.deps.prisma,
      userId,
      locked.map((ref) => ref.teamId),
      page,
    );
    for (const ref of refs) this.teams.remember(ref);
    const states = await Promise.all(refs.map((ref) => this.teams.read(ref)));
    return states.filter((state): state is TeamState => state !== null);
  }

  /**
   * The team now, then after every change, until it is COMPLETE or FAILED; nothing for a
   * team that does not exist.
   */
  async watch(teamId: string): Promise<AsyncIterableIterator<TeamState>> {
    const ref = await this.teams.refOf(teamId);
    return ref ? this.teams.runtime.watch(ref) : nothing();
  }

  /** The lock-expiry sweeper's round: frees the seats of locks that ran out. Returns the locks it expired. */
  expireDueLocks(): Promise<number> {
    return this.lockExpiry.sweep();
  }

  /** The deadline sweeper's round: fails the teams still OPEN at their deadline. */
  failOverdue(): Promise<number> {
    return this.deadlines.sweep();
  }

  /** Runs `task` after every earlier task queued under `key` in this process has finished. */
  private oneAtATime<T>(key: string, task: () => Promise<T>): Promise<T> {
    const run = (this.queues.get(key) ?? Promise.resolve()).then(task);
    const finished = run.then(
      () => undefined,
      () => undefined,
    );
    this.queues.set(key, finished);
    void finished.then(() => {
      if (this.queues.get(key) === finished) this.queues.delete(key);
    });
    return run;
  }
}

async function* nothing<T>(): AsyncIterableIterator<T> {}
