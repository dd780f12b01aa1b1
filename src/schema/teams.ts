import { builder } from '../builder.ts';
import type { Context } from '../context.ts';
import { activityId as activityIdSchema, recordId, userId as userIdSchema } from '../domain/ids.ts';
import { aliasScope, userIdRule } from '../domain/privacy.ts';
import { NotFound } from '../domain/problems.ts';
import { openTeamInput, paymentRef as paymentRefSchema, teamListLimit } from '../domain/teams/input.ts';
import { AlreadyMember, GroupBuyNotActive, NoSeatLock, OpenTeamLimitReached, SeatLockLimitReached, TeamClosed, TeamFull, TeamLimitReached } from '../domain/teams/problems.ts';
import type { SeatLocked } from '../domain/teams/service.ts';
import type { SeatLockView, TeamMemberView, TeamState } from '../domain/teams/store.ts';
import { asProblem, notFoundError, shownUserId, watchExisting } from './common.ts';
import { describePaging, keysetConnection } from './connections.ts';
import { PaymentIntentRef } from './payments.ts';

const USER_IDS = userIdRule('this group-buy activity (all its teams)');

const TeamStatusEnum = builder.enumType('TeamStatus', {
  description:
    'OPEN: seats may be taken until the deadline. COMPLETE: every seat is filled. FAILED: it did not fill by its deadline (FAILED from the deadline on, by Redis time), and its seat payments are owed back.',
  values: ['OPEN', 'COMPLETE', 'FAILED'] as const,
});

const TeamMember = builder.objectRef<TeamMemberView>('TeamMember').implement({
  description: "A team's member: the leader, or a buyer whose seat payment was confirmed.",
  fields: (t) => ({
    userId: t.exposeID('userId', { description: USER_IDS }),
    joinedAt: t.expose('joinedAt', { type: 'DateTime' }),
  }),
});

const SeatLock = builder.objectRef<SeatLockView>('SeatLock').implement({
  description: 'A seat held for a buyer who is paying.',
  fields: (t) => ({
    userId: t.exposeID('userId', { description: `Who holds the lock. ${USER_IDS}` }),
    lockedAt: t.expose('lockedAt', { type: 'DateTime' }),
    expiresAt: t.expose('expiresAt', {
      type: 'DateTime',
      description:
        "When the lock lets the seat go, lockSeconds after lockedAt. The team's deadline frees it first if it comes sooner (the team fails): count down to the earlier of the two. Its holder pays by their payment's expiresAt, a grace before then.",
    }),
  }),
});

/** Members and lock holders as the caller may see them; the activity is the campaign. */
function shownUsers<Item extends { userId: string }>(items: Item[], team: TeamState, context: Context): Item[] {
  const scope = aliasScope.teamActivity(team.activityId);
  return items.map((item) => ({ ...item, userId: shownUserId(context, scope, item.userId) }));
}

export const Team = builder.objectRef<TeamState>('Team').implement({
  description: 'A group-buy team. Absolute state: clients count down to lock expiries against serverTime.',
  fields: (t) => ({
    id: t.exposeID('id'),
    activityId: t.exposeID('activityId'),
    leaderId: t.id({
      description: `The member who opened the team. ${USER_IDS}`,
      resolve: (team, _args, context) => shownUserId(context, aliasScope.teamActivity(team.activityId), team.leaderId),
    }),
    capacity: t.exposeInt('capacity'),
    lockSeconds: t.exposeInt('lockSeconds', { description: 'How long a seat lock lasts.' }),
    status: t.expose('status', { type: TeamStatusEnum }),
    members: t.field({
      type: [TeamMember],
      description: 'Oldest first; the leader is the first.',
      resolve: (team, _args, context) => shownUsers(team.members, team, context),
    }),
    locks: t.field({
      type: [SeatLock],
      description: 'Live seat locks, the earliest expiry first.',
      resolve: (team, _args, context) => shownUsers(team.locks, team, context),
    }),
    myLock: t.field({
      type: SeatLock,
      nullable: true,
      description: "The caller's own live seat lock in this team (as in locks), with its expiresAt; null when they hold none.",
      resolve: (team, _args, { viewer }) => team.locks.find((lock) => lock.userId === viewer?.userId) ?? null,
    }),
    freeSeats: t.exposeInt('freeSeats', { description: 'capacity - members - live locks; 0 unless OPEN and before the deadline.' }),
    nextUnlockAt: t.expose('nextUnlockAt', {
      type: 'DateTime',
      nullable: true,
      description: 'The earliest expiry among live locks when no seat is free.',
    }),
    deadline: t.expose('deadline', { type: 'DateTime', description: 'A team still OPEN then becomes FAILED.' }),
    serverTime: t.expose('serverTime', { type: 'DateTime', description: 'When this state was read (Redis time).' }),
    version: t.exposeFloat('version', { description: 'Grows with every change: a client drops a state older than the one it has.' }),
  }),
});

const SeatLockedRef = builder.objectRef<SeatLocked>('SeatLocked').implement({
  description: 'A seat now held for the caller in team: paying payment before its expiresAt makes them a member.',
  fields: (t) => ({
    team: t.expose('team', { type: Team }),
    lock: t.field({ type: SeatLock, description: "The caller's lock.", resolve: ({ team, lock }, _args, context) => shownUsers([lock], team, context)[0]! }),
    releasedTeamId: t.exposeID('releasedTeamId', { nullable: true, description: "The team the caller's previous lock was moved from." }),
    payment: t.field({
      type: PaymentIntentRef,
      description:
        "What to pay for this lock, by its expiresAt: the group price, under a reference minted for the caller, this team and this lock. When the provider's notify arrives, the lock becomes a seat if it still holds, or the money is owed back.",
      resolve: ({ payment }, _args, { app }) => app.payments.describe(payment),
    }),
  }),
});

builder.objectType(TeamFull, {
  name: 'TeamFull',
  ...asProblem(TeamFull),
  description: 'Every seat is taken by a member or a live seat lock; one may free up at nextUnlockAt.',
  fields: (t) => ({
    nextUnlockAt: t.expose('nextUnlockAt', { type: 'DateTime', nullable: true, description: 'When the earliest lock runs out.' }),
    serverTime: t.expose('serverTime', { type: 'DateTime' }),
  }),
});
builder.objectType(AlreadyMember, { name: 'AlreadyMember', ...asProblem(AlreadyMember), description: 'The caller is already a member of this team.' });
builder.objectType(TeamClosed, {
  name: 'TeamClosed',
  ...asProblem(TeamClosed),
  description: 'The team takes no more seats: it is COMPLETE, or FAILED (from its deadline on).',
  fields: (t) => ({ status: t.expose('status', { type: TeamStatusEnum }) }),
});
builder.objectType(TeamLimitReached, {
  name: 'TeamLimitReached',
  ...asProblem(TeamLimitReached),
  description: 'The caller has joined maxTeamsPerUser teams of this activity as a buyer already (FAILED ones not counted).',
  fields: (t) => ({ maxTeamsPerUser: t.exposeInt('maxTeamsPerUser') }),
});
builder.objectType(SeatLockLimitReached, {
  name: 'SeatLockLimitReached',
  ...asProblem(SeatLockLimitReached),
  description: 'The caller has taken as many seat locks in this team as one user may (moves into it included).',
  fields: (t) => ({ maxLocks: t.exposeInt('maxLocks', { description: 'The most seat locks one user may take in one team.' }) }),
});
builder.objectType(OpenTeamLimitReached, {
  name: 'OpenTeamLimitReached',
  ...asProblem(OpenTeamLimitReached),
  description: 'The caller already leads maxOpenTeamsPerLeader OPEN teams of this activity.',
  fields: (t) => ({ maxOpenTeamsPerLeader: t.exposeInt('maxOpenTeamsPerLeader') }),
});
builder.objectType(GroupBuyNotActive, {
  name: 'GroupBuyNotActive',
  ...asProblem(GroupBuyNotActive),
  description: 'The group-buy opens no team now: before startsAt, from endsAt on, or while paused.',
  fields: (t) => ({
    startsAt: t.expose('startsAt', { type: 'DateTime' }),
    endsAt: t.expose('endsAt', { type: 'DateTime' }),
    serverTime: t.expose('serverTime', { type: 'DateTime' }),
    paused: t.exposeBoolean('paused', { description: 'Within its window, but an operator paused it: teams may open again once it resumes.' }),
  }),
});
builder.objectType(NoSeatLock, {
  name: 'NoSeatLock',
  ...asProblem(NoSeatLock),
  description: 'The user holds no live seat lock in the team and no seat is free; one may free up at nextUnlockAt.',
  fields: (t) => ({ nextUnlockAt: t.expose('nextUnlockAt', { type: 'DateTime', nullable: true }) }),
});

const OpenTeamInput = builder
  .inputType('OpenTeamInput', {
    description: 'The group-buy activity to open a team in.',
    fields: (t) => ({
      activityId: t.id({ required: true, description: 'A group-buy activity (createGroupBuyActivity); the team gets its capacity, lock and formation times.' }),
      requestId: t.string({
        description:
          "The leader's idempotency key (1 to 128 characters): a retry with the same requestId, after a timeout or at once, gets the team the first call opened, as it is now (it may have filled or failed since), and opens nothing new. Neither maxOpenTeamsPerLeader nor the activity having ended or paused since refuses such a retry: they decided only whether the first call opened a team. A call that opened none leaves the requestId unused. The same requestId for another activity: BAD_USER_INPUT (REQUEST_ID_OF_ANOTHER_TEAM).",
      }),
    }),
  })
  .validate(openTeamInput);

builder.queryField('team', (t) =>
  t.withAuth({ signedIn: true }).field({
    type: Team,
    nullable: true,
    description: 'The team with this id as it is now; null when there is none.',
    args: { id: t.arg.id({ required: true, validate: recordId }) },
    resolve: (_root, { id }, { app }) => app.teams.get(String(id)),
  }),
);

builder.queryField('teams', (t) =>
  t.withAuth({ signedIn: true }).field({
    type: [Team],
    description: 'The "join a team" list: open teams with free seats first, then the rest, oldest first.',
    args: {
      activityId: t.arg.id({ required: true, validate: activityIdSchema, description: 'The group-buy activity whose teams to list.' }),
      status: t.arg({ type: TeamStatusEnum, description: 'Only the teams of this status; unset: all.' }),
      limit: t.arg.int({ defaultValue: 50, validate: teamListLimit, description: '1 to 200.' }),
    },
    resolve: (_root, { activityId, status, limit }, { app }) => app.teams.list(String(activityId), status ?? null, limit ?? 50),
  }),
);

builder.queryField('teamsConnection', (t) =>
  describePaging(
    t.withAuth({ admin: true }).connection({
      type: Team,
      description:
        "Operators: every team of the activity (or those of one status), oldest first, a page at a time, each as it is now. The status filters by PostgreSQL's record, so a team that just changed may be listed with its new status. An unknown activity has none.",
      args: {
        activityId: t.arg.id({ required: true, validate: activityIdSchema, description: 'The group-buy activity whose teams to list.' }),
        status: t.arg({ type: TeamStatusEnum, description: 'Only the teams of this status; unset: all.' }),
      },
      resolve: (_root, { activityId, status, ...args }, { app, locale }) =>
        keysetConnection(
          args,
          (page) => app.teams.page(String(activityId), status ?? null, page),
          (team) => team.id,
          locale,
        ),
    }),
  ),
);

builder.mutationField('openTeam', (t) =>
  t.withAuth({ signedIn: true }).field({
    type: Team,
    description: "The caller becomes the leader and the first member, on the activity's terms, while the activity is on.",
    errors: {
      types: [NotFound, GroupBuyNotActive, OpenTeamLimitReached],
      directResult: true,
      union: { name: 'OpenTeamResult', description: 'What openTeam answers: the new team, or why none was opened.' },
    },
    args: { input: t.arg({ type: OpenTeamInput, required: true }) },
    resolve: (_root, { input }, { app, viewer }) => app.teams.open(viewer.userId, { activityId: String(input.activityId), requestId: input.requestId }),
  }),
);

builder.mutationField('lockTeamSeat', (t) =>
  t.withAuth({ signedIn: true }).field({
    type: SeatLockedRef,
    description: "Holds a seat while the caller pays; moves the caller's live lock from another team of the activity.",
    errors: {
      types: [TeamFull, AlreadyMember, TeamClosed, NotFound, TeamLimitReached, SeatLockLimitReached],
      directResult: true,
      union: { name: 'LockTeamSeatResult', description: 'What lockTeamSeat answers: the seat held and its payment, or why none was.' },
    },
    args: { teamId: t.arg.id({ required: true, validate: recordId }) },
    resolve: (_root, { teamId }, { app, viewer }) => app.teams.lock(viewer.userId, String(teamId)),
  }),
);

builder.mutationField('releaseTeamSeat', (t) =>
  t.withAuth({ signedIn: true }).field({
    type: Team,
    description: "Gives the caller's seat lock back at once. Without a lock: the team, unchanged.",
    args: { teamId: t.arg.id({ required: true, validate: recordId }) },
    resolve: async (_root, { teamId }, context) => {
      const team = await context.app.teams.release(context.viewer.userId, String(teamId));
      if (!team) throw notFoundError(new NotFound('team', String(teamId)), context);
      return team;
    },
  }),
);

builder.mutationField('confirmTeamSeat', (t) =>
  t.withAuth({ admin: true }).field({
    type: Team,
    description:
      "Operators, for manual cases: userId's lock (or a free seat) -> member, idempotent per paymentRef. A success is already committed in PostgreSQL. Buyers are seated by their payment's notify (POST /payments/notify), never by this.",
    errors: {
      types: [NoSeatLock, TeamClosed, NotFound],
      directResult: true,
      union: { name: 'ConfirmTeamSeatResult', description: 'What confirmTeamSeat answers: the team with the user seated, or why they were not.' },
    },
    args: {
      teamId: t.arg.id({ required: true, validate: recordId }),
      userId: t.arg.id({ required: true, validate: userIdSchema }),
      paymentRef: t.arg.string({ required: true, validate: paymentRefSchema }),
    },
    resolve: (_root, { teamId, userId, paymentRef }, { app }) => app.teams.confirm(String(userId), String(teamId), paymentRef),
  }),
);

builder.subscriptionField('teamStatus', (t) =>
  t.withAuth({ signedIn: true }).field({
    type: Team,
    description:
      'The current state first, then newer states after changes: lock, release, lock expiry, confirm, completion, failure. Changes close together are merged into one event carrying the newest state (version grows), so intermediate states may be skipped. The stream completes after the team is COMPLETE or FAILED.',
    args: { teamId: t.arg.id({ required: true, validate: recordId }) },
    subscribe: (_root, { teamId }, context) => {
      const id = String(teamId);
      return watchExisting(new NotFound('team', id), context, context.app.teams.get(id), () => context.app.teams.watch(id));
    },
    resolve: (state) => state,
  }),
);
