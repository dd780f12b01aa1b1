import { builder } from '../builder.ts';
import { CAMPAIGN_STATUSES, campaignStatus } from '../domain/campaignStatus.ts';
import { activityId } from '../domain/ids.ts';
import { NotFound } from '../domain/problems.ts';
import { type GroupBuyActivity, groupBuyActivityInput, updateGroupBuyActivityInput } from '../domain/teams/activities.ts';
import { serverNow, serverTimeNote } from './common.ts';
import { keysetConnection } from './connections.ts';

const GroupBuyStatus = builder.enumType('GroupBuyStatus', {
  description:
    'Whether a team may be opened now: only while ACTIVE. Teams already open may still fill while PAUSED or ENDED, until their own deadline, unless an operator cancelled the activity (cancelGroupBuyActivity), which fails them.',
  values: CAMPAIGN_STATUSES,
});

const GroupBuyActivityRef = builder.objectRef<GroupBuyActivity>('GroupBuyActivity').implement({
  description: 'A group-buy an operator defined: every team of it gets these terms.',
  fields: (t) => ({
    id: t.exposeID('id', { description: 'The activityId of its teams.' }),
    title: t.exposeString('title'),
    description: t.exposeString('description'),
    priceCents: t.exposeInt('priceCents'),
    groupPriceCents: t.exposeInt('groupPriceCents', { description: 'What a seat costs.' }),
    capacity: t.exposeInt('capacity', { description: 'Seats per team, the leader included.' }),
    lockSeconds: t.exposeInt('lockSeconds', { description: 'How long a seat lock lasts. Its payment is due a tenth of that (at most 30 s) before the seat frees.' }),
    formationSeconds: t.exposeInt('formationSeconds', { description: 'A team still OPEN this long after it opened fails.' }),
    startsAt: t.expose('startsAt', { type: 'DateTime' }),
    endsAt: t.expose('endsAt', { type: 'DateTime', description: 'Teams may be opened from startsAt until endsAt; those open then may still fill, unless the activity was cancelled.' }),
    maxTeamsPerUser: t.exposeInt('maxTeamsPerUser', { description: 'How many teams one user may join as a buyer (FAILED ones not counted).' }),
    maxOpenTeamsPerLeader: t.exposeInt('maxOpenTeamsPerLeader', { description: 'How many OPEN teams one user may lead at once.' }),
    paused: t.exposeBoolean('paused', { description: 'True while an operator has paused it: no new team opens; teams already open may still fill.' }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    status: t.field({
      type: GroupBuyStatus,
      description: 'At serverTime: ENDED from endsAt on, else PAUSED while paused, else UPCOMING before startsAt, else ACTIVE.',
      resolve: async (activity, _args, { app }) => {
        const { startsAt, endsAt, paused } = activity;
        return campaignStatus({ startsAtMs: startsAt.getTime(), endsAtMs: endsAt.getTime(), paused }, (await serverNow(app)).getTime());
      },
    }),
    serverTime: t.field({ type: 'DateTime', description: serverTimeNote, resolve: (_activity, _args, { app }) => serverNow(app) }),
  }),
});

const CreateGroupBuyActivityInput = builder
  .inputType('CreateGroupBuyActivityInput', {
    description: 'A new group-buy: its prices in cents (fen), team size, time limits and window. Every team opened in it takes these terms.',
    fields: (t) => ({
      id: t.id({ description: 'A readable id such as "double11-tea" (1 to 64 letters, digits, "_", "-" or "."); unset: one is minted.' }),
      title: t.string({ required: true }),
      description: t.string({ defaultValue: '' }),
      priceCents: t.int({ required: true, description: '1 to 100,000,000.' }),
      groupPriceCents: t.int({ required: true, description: 'What a seat costs: 1 to priceCents.' }),
      capacity: t.int({ required: true, description: 'Seats per team, the leader included: 2 to 50.' }),
      lockSeconds: t.int({ defaultValue: 300, description: 'How long a seat lock lasts: 1 to 3,600.' }),
      formationSeconds: t.int({ defaultValue: 86_400, description: 'Time to fill a team: 1 to 604,800.' }),
      startsAt: t.field({ type: 'DateTime', required: true }),
      endsAt: t.field({ type: 'DateTime', required: true, description: 'After startsAt, at most 366 days later.' }),
      maxTeamsPerUser: t.int({ defaultValue: 1, description: 'Teams one user may join as a buyer: 1 to 1,000.' }),
      maxOpenTeamsPerLeader: t.int({ defaultValue: 1, description: 'OPEN teams one user may lead at once: 1 to 1,000.' }),
      requestId: t.string({
        description:
          "The operator's idempotency key (1 to 128 characters): a retry with the same requestId and terms, after a timeout or at once, gets the first activity, created once. The same requestId for other terms: BAD_USER_INPUT (REQUEST_ID_OF_ANOTHER_CREATE).",
      }),
    }),
  })
  .validate(groupBuyActivityInput);

builder.mutationField('createGroupBuyActivity', (t) =>
  t.withAuth({ admin: true }).field({
    type: GroupBuyActivityRef,
    description: 'Operators: defines a group-buy; its teams are opened with openTeam(input: { activityId }).',
    args: { input: t.arg({ type: CreateGroupBuyActivityInput, required: true }) },
    // Parsed again for its types: the input was validated, its defaults filled in by GraphQL.
    resolve: (_root, { input }, { app, viewer }) => app.teams.createActivity(viewer.userId, groupBuyActivityInput.parse(input)),
  }),
);

const UpdateGroupBuyActivityInput = builder
  .inputType('UpdateGroupBuyActivityInput', {
    description: 'What changes; a field left out or null stays as it is. The terms a team took when it opened never change.',
    fields: (t) => ({
      title: t.string(),
      description: t.string(),
      endsAt: t.field({
        type: 'DateTime',
        description:
          'A new end, after startsAt and at most 366 days later; one already past ends it now. Teams already open may still fill (cancelGroupBuyActivity fails them). An ended activity keeps its end.',
      }),
      paused: t.boolean({ description: 'True: no new team opens until it is false again. An ended activity cannot be paused or resumed.' }),
    }),
  })
  .validate(updateGroupBuyActivityInput);

builder.mutationField('updateGroupBuyActivity', (t) =>
  t.withAuth({ admin: true }).field({
    type: GroupBuyActivityRef,
    description:
      "Operators: changes a group-buy's title, description, end or pause. Once it answers, no team opens on any instance while paused or after the end; a resume or a new title reaches other instances within a second.",
    errors: {
      types: [NotFound],
      directResult: true,
      union: { name: 'UpdateGroupBuyActivityResult', description: 'What updateGroupBuyActivity answers: the activity as changed, or NotFound.' },
    },
    args: {
      activityId: t.arg.id({ required: true, validate: activityId, description: 'The group-buy activity to change.' }),
      input: t.arg({ type: UpdateGroupBuyActivityInput, required: true, description: 'What changes.' }),
    },
    resolve: (_root, { activityId, input }, { app }) => app.teams.updateActivity(String(activityId), input),
  }),
);

builder.mutationField('cancelGroupBuyActivity', (t) =>
  t.withAuth({ admin: true }).field({
    type: GroupBuyActivityRef,
    description:
      'Operators: stops a group-buy at once, after a pricing mistake say. It ends now (status ENDED; one ended already keeps its end), and every team of it still OPEN fails as at its deadline, which moves to now: its seat locks end, each member who paid is owed a refund (once), a payment arriving after it is owed back, and subscribers get the FAILED team. COMPLETE teams stay COMPLETE. Answers once every failure is committed; called again, it answers the same and changes nothing. An activity not yet started has no team to stop: BAD_USER_INPUT (GROUP_BUY_NOT_STARTED; pause it instead).',
    errors: {
      types: [NotFound],
      directResult: true,
      union: { name: 'CancelGroupBuyActivityResult', description: 'What cancelGroupBuyActivity answers: the activity, ended, or NotFound.' },
    },
    args: { activityId: t.arg.id({ required: true, validate: activityId, description: 'The group-buy activity to cancel.' }) },
    resolve: (_root, { activityId }, { app }) => app.teams.cancelActivity(String(activityId)),
  }),
);

builder.queryField('groupBuyActivity', (t) =>
  t.withAuth({ signedIn: true }).field({
    type: GroupBuyActivityRef,
    nullable: true,
    description: 'The group-buy activity with this id; null when there is none.',
    args: { id: t.arg.id({ required: true, validate: activityId }) },
    resolve: (_root, { id }, { app }) => app.teams.activity(String(id)),
  }),
);

builder.queryField('groupBuyActivities', (t) =>
  t.withAuth({ signedIn: true }).connection({
    type: GroupBuyActivityRef,
    description: 'Newest first.',
    resolve: (_root, args, { app, locale }) =>
      keysetConnection(
        args,
        (page) => app.teams.activities(page),
        (activity) => activity.id,
        locale,
      ),
  }),
);
