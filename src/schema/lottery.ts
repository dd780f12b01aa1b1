import { wrapOrThrow } from '@pothos/plugin-errors';
import { z } from 'zod';
import { builder, countRefusal } from '../builder.ts';
import { CAMPAIGN_STATUSES } from '../domain/campaignStatus.ts';
import { recordId } from '../domain/ids.ts';
import type { DrawAudit } from '../domain/lottery/audit.ts';
import { createLotteryInput, drawRequestId, updateLotteryInput } from '../domain/lottery/input.ts';
import { ActivityNotActive, DrawLimitReached, WinLimitReached } from '../domain/lottery/problems.ts';
import { LOTTERY_LIMITS, SOLD_OUT_ODDS } from '../domain/lottery/settings.ts';
import type { LotteryActivityView, LotteryLoseView, LotteryWinView, PrizeView, WinRecordView } from '../domain/lottery/views.ts';
import type { UserDrawView } from '../domain/me/history.ts';
import { InsufficientPoints } from '../domain/points/problems.ts';
import { aliasScope, userIdRule } from '../domain/privacy.ts';
import { NotFound } from '../domain/problems.ts';
import { asProblem, shownUserId, watchExisting } from './common.ts';
import { describePaging, keysetConnection } from './connections.ts';

const USER_IDS = userIdRule('this lottery activity');

const LotteryStrategy = builder.enumType('LotteryStrategy', {
  description: 'WEIGHTED: each draw chooses by weight among the prizes in stock. TIMED: prizes are released at random instants of each hour; every draw wins.',
  values: ['WEIGHTED', 'TIMED'] as const,
});
const PrizeKind = builder.enumType('PrizeKind', {
  description:
    "GOODS: an item operators ship to the winner (see lotteryWins). POINTS: points credited to the winner's balance in the draw's commit. CONSOLATION: a lesser prize; a TIMED activity has exactly one without hourlyQuota, which a draw wins when no released prize is waiting.",
  values: ['GOODS', 'POINTS', 'CONSOLATION'] as const,
});
const LotteryStatus = builder.enumType('LotteryStatus', {
  description: 'At serverTime: ENDED from endsAt on, else PAUSED while paused, else UPCOMING before startsAt, else ACTIVE. A draw outside ACTIVE is refused (ActivityNotActive).',
  values: CAMPAIGN_STATUSES,
});
const SoldOutOdds = builder.enumType('SoldOutOdds', {
  description:
    "WEIGHTED: what a prize's weight does once it is out of stock or over its daily stock. SHARED: it leaves the pool, and the prizes left share its chance (a rare prize becomes likelier as the common ones run out). NO_PRIZE: it stays, and a roll landing on it loses: every prize keeps the chance it was given.",
  values: SOLD_OUT_ODDS,
});
const InactiveReason = builder.enumType('LotteryInactiveReason', {
  description:
    'SOLD_OUT: a paid WEIGHTED draw with no prize left to win before the end (it could only lose, so it is refused and spends nothing), or a TIMED activity with nothing left to release and no consolation prize left. SOLD_OUT_TODAY: a paid WEIGHTED draw with prizes left but none today (daily stocks), and a day left before the end; draws again from availableAt. NOTHING_RELEASED: TIMED, no consolation prize left and no prize released right now; more come later (availableAt: by when the next one is released, when scheduled).',
  values: ['NOT_STARTED', 'ENDED', 'PAUSED', 'SOLD_OUT', 'SOLD_OUT_TODAY', 'NOTHING_RELEASED'] as const,
});

const Prize = builder.objectRef<PrizeView>('Prize').implement({
  description: 'A prize of a lottery activity, with the stock of wins it allows.',
  fields: (t) => ({
    id: t.exposeID('id'),
    title: t.exposeString('title'),
    kind: t.expose('kind', { type: PrizeKind }),
    weight: t.exposeInt('weight'),
    totalStock: t.exposeInt('totalStock'),
    remainingStock: t.int({
      description: 'totalStock minus the wins committed in PostgreSQL.',
      resolve: (prize, _args, { app }) => prize.remainingStock ?? app.lottery.remainingStock(prize.id),
    }),
    points: t.int({ nullable: true, resolve: (prize) => prize.points || null }),
    dailyStock: t.int({ nullable: true, description: 'Wins per local day at most; null for no daily stock.', resolve: (prize) => prize.dailyStock || null }),
    hourlyQuota: t.intList({
      nullable: true,
      description: 'TIMED: prizes released in each local hour of the day.',
      resolve: (prize) => (prize.hourlyQuota.length > 0 ? prize.hourlyQuota : null),
    }),
  }),
});

const LotteryActivity = builder.objectRef<LotteryActivityView>('LotteryActivity').implement({
  description: 'Absolute state: clients count down to startsAt and endsAt against serverTime.',
  fields: (t) => ({
    id: t.exposeID('id'),
    title: t.string({ resolve: (activity) => activity.settings.title }),
    strategy: t.field({ type: LotteryStrategy, resolve: (activity) => activity.settings.strategy }),
    prizes: t.field({ type: [Prize], resolve: (activity) => activity.prizes }),
    status: t.field({ type: LotteryStatus, resolve: (activity) => activity.status }),
    startsAt: t.field({ type: 'DateTime', resolve: (activity) => new Date(activity.settings.startsAtMs) }),
    endsAt: t.field({ type: 'DateTime', resolve: (activity) => new Date(activity.settings.endsAtMs) }),
    paused: t.boolean({ resolve: (activity) => activity.settings.paused }),
    noPrizeWeight: t.int({ resolve: (activity) => activity.settings.noPrizeWeight }),
    soldOutOdds: t.field({ type: SoldOutOdds, resolve: (activity) => activity.settings.soldOutOdds ?? 'SHARED' }),
    dailyDrawLimit: t.int({ description: '0 = unlimited.', resolve: (activity) => activity.settings.dailyDrawLimit }),
    dailyWinLimit: t.int({ description: '0 = unlimited.', resolve: (activity) => activity.settings.dailyWinLimit }),
    drawCostPoints: t.int({ description: 'Points each draw costs; 0 = free.', resolve: (activity) => activity.settings.drawCostPoints ?? 0 }),
    timezone: t.string({ description: 'Daily limits and stock reset at midnight here.', resolve: (activity) => activity.settings.timezone }),
    settingsVersion: t.int({ description: 'Grows by one with every change; stored with every draw.', resolve: (activity) => activity.settings.version }),
    serverTime: t.expose('serverTime', { type: 'DateTime', description: 'When status was judged, by the clock draws use (Redis time).' }),
  }),
});

/** A draw in its user's history (Me.draws). */
export const LotteryDrawRecord = builder.objectRef<UserDrawView>('LotteryDrawRecord').implement({
  description: "One of the caller's own lottery draws (Me.draws), won or lost.",
  fields: (t) => ({
    id: t.exposeID('id', { description: 'The drawId drawLottery answered with.' }),
    activityId: t.exposeID('activityId'),
    activity: t.field({ type: LotteryActivity, nullable: true, description: 'The activity as it is now.', resolve: (draw, _args, { app }) => app.lottery.get(draw.activityId) }),
    won: t.boolean({ resolve: (draw) => draw.prize !== null }),
    prize: t.field({ type: Prize, nullable: true, description: 'The prize as it was when won; null for a losing draw.', resolve: (draw) => draw.prize }),
    drawnAt: t.expose('drawnAt', { type: 'DateTime' }),
    costPoints: t.exposeInt('costPoints', { description: 'Points the draw cost; 0 for a free one.' }),
    settingsVersion: t.exposeInt('settingsVersion'),
  }),
});

const LotteryWin = builder.objectRef<LotteryWinView>('LotteryWin').implement({
  description: 'A winning draw, committed: what drawLottery answers a winner, and each event of lotteryWinners.',
  isTypeOf: (value) => (value as { outcome?: string }).outcome === 'win',
  fields: (t) => ({
    drawId: t.exposeID('drawId'),
    prize: t.field({ type: Prize, description: 'The prize as it was when won.', resolve: (win) => win.prize }),
    userId: t.id({
      description: `The winner. ${USER_IDS}`,
      resolve: (win, _args, context) => shownUserId(context, aliasScope.lottery(win.activityId), win.userId),
    }),
    wonAt: t.field({ type: 'DateTime', resolve: (win) => win.drawnAt }),
    settingsVersion: t.exposeInt('settingsVersion'),
  }),
});

const LotteryWinRecord = builder.objectRef<WinRecordView>('LotteryWinRecord').implement({
  description: 'A winning draw as operators list it (lotteryWins), to ship its prize.',
  fields: (t) => ({
    drawId: t.exposeID('drawId', { description: 'The drawId drawLottery answered the winner with.' }),
    userId: t.id({
      description: "The winner's user id in full, as operators see every user id (only operators read this list).",
      resolve: (win, _args, context) => shownUserId(context, aliasScope.lottery(win.activityId), win.userId),
    }),
    prize: t.field({ type: Prize, description: 'The prize as it was when won.', resolve: (win) => win.prize }),
    drawnAt: t.expose('drawnAt', { type: 'DateTime' }),
    requestId: t.exposeString('requestId', { nullable: true, description: 'The requestId the winner drew with; null for a draw made without one.' }),
    settingsVersion: t.exposeInt('settingsVersion'),
    costPoints: t.exposeInt('costPoints', { description: 'Points the draw cost; 0 for a free one.' }),
  }),
});

const LotteryLose = builder.objectRef<LotteryLoseView>('LotteryLose').implement({
  description: 'A losing draw, committed like a win: it counts toward dailyDrawLimit, and a paid one has spent drawCostPoints.',
  isTypeOf: (value) => (value as { outcome?: string }).outcome === 'lose',
  fields: (t) => ({
    drawId: t.exposeID('drawId'),
    drawnAt: t.field({ type: 'DateTime', resolve: (lose) => lose.drawnAt }),
    settingsVersion: t.exposeInt('settingsVersion'),
  }),
});

builder.objectType(DrawLimitReached, {
  name: 'DrawLimitReached',
  ...asProblem(DrawLimitReached),
  description: "The caller has made dailyDrawLimit draws in this activity today (by the activity's timezone): refused, and nothing is spent.",
  fields: (t) => ({
    dailyDrawLimit: t.exposeInt('dailyDrawLimit'),
    resetsAt: t.expose('resetsAt', { type: 'DateTime', description: "The next midnight in the activity's timezone." }),
  }),
});
builder.objectType(ActivityNotActive, {
  name: 'ActivityNotActive',
  ...asProblem(ActivityNotActive),
  description: 'The activity takes no draw now, for reason: refused, and nothing is spent.',
  fields: (t) => ({
    reason: t.expose('reason', { type: InactiveReason }),
    startsAt: t.expose('startsAt', { type: 'DateTime' }),
    endsAt: t.expose('endsAt', { type: 'DateTime' }),
    serverTime: t.expose('serverTime', { type: 'DateTime', description: 'When the draw was refused, by the clock draws use.' }),
    availableAt: t.expose('availableAt', {
      type: 'DateTime',
      nullable: true,
      description:
        "SOLD_OUT_TODAY: the next midnight in the activity's timezone. NOTHING_RELEASED: the end of the hour (of the activity's timezone) in which the next prize is released, or endsAt if sooner: the prize is released before then, at a random moment of that hour that is never told, and a draw from availableAt on (before endsAt) finds it unless another draw took it first; null while no release is scheduled. Null for the other reasons.",
    }),
  }),
});
builder.objectType(WinLimitReached, {
  name: 'WinLimitReached',
  ...asProblem(WinLimitReached),
  description: 'A paid draw at the daily win limit, which could only lose: refused, and nothing is spent. A free draw at the limit is a LotteryLose.',
  fields: (t) => ({
    dailyWinLimit: t.exposeInt('dailyWinLimit'),
    resetsAt: t.expose('resetsAt', { type: 'DateTime', description: "The next midnight in the activity's timezone." }),
  }),
});

const drawProblems = [DrawLimitReached, WinLimitReached, ActivityNotActive, InsufficientPoints, NotFound];
type DrawProblem = InstanceType<(typeof drawProblems)[number]>;

// A win and a loss are both successes, and the errors plugin builds unions around one
// success type; so this union is declared here and the resolver hands the problems the
// service throws to the plugin's own wrapping (wrapOrThrow), as its fields do, and counts them.
const DrawLotteryResult = builder.unionType('DrawLotteryResult', {
  description: 'What drawLottery answers: the draw, won or lost, or why no draw was made.',
  types: [LotteryWin, LotteryLose, ...drawProblems],
});

const LotteryDrawAudit = builder.objectRef<DrawAudit>('LotteryDrawAudit').implement({
  description: 'A committed draw replayed from its random input against the settings of its version.',
  fields: (t) => ({
    drawId: t.exposeID('drawId'),
    settingsVersion: t.exposeInt('settingsVersion'),
    randomInput: t.exposeString('randomInput', { nullable: true, description: 'WEIGHTED: the uniform integer in [0, 2^48 - 1) from crypto.' }),
    weightTotal: t.exposeInt('weightTotal', { nullable: true }),
    roll: t.exposeInt('roll', { nullable: true, description: 'randomInput mod weightTotal.' }),
    pool: t.exposeIDList('pool', { description: 'The prizes that were available, in the order of the cumulative weights.' }),
    recordedPrizeId: t.exposeID('recordedPrizeId', { nullable: true }),
    replayedPrizeId: t.exposeID('replayedPrizeId', { nullable: true }),
    matches: t.exposeBoolean('matches', { description: 'TIMED draws use no randomness and always match.' }),
  }),
});

const PrizeInput = builder.inputType('PrizeInput', {
  description: 'A prize of a new lottery activity; totalStock is how many times it can be won.',
  fields: (t) => ({
    title: t.string({ required: true }),
    kind: t.field({ type: PrizeKind, defaultValue: 'GOODS' }),
    points: t.int({ description: 'POINTS prizes only.' }),
    weight: t.int({ defaultValue: 0, description: 'WEIGHTED: relative weight against the other prizes and noPrizeWeight.' }),
    totalStock: t.int({ required: true }),
    dailyStock: t.int({ description: 'WEIGHTED: wins per local day at most (at least 1); omitted: no daily stock.' }),
    hourlyQuota: t.intList({ description: 'TIMED: 24 numbers, prizes released in each local hour of the day.' }),
  }),
});

const CreateLotteryInput = builder
  .inputType('CreateLotteryInput', {
    description: 'A new lottery activity: its window, strategy, daily limits, draw cost and prizes. Limits and stocks count by local day in timezone.',
    fields: (t) => ({
      title: t.string({ required: true }),
      startsAt: t.field({ type: 'DateTime', required: true }),
      endsAt: t.field({ type: 'DateTime', required: true }),
      strategy: t.field({ type: LotteryStrategy, defaultValue: 'WEIGHTED' }),
      noPrizeWeight: t.int({ defaultValue: 0 }),
      soldOutOdds: t.field({ type: SoldOutOdds, defaultValue: 'SHARED', description: 'WEIGHTED only.' }),
      dailyDrawLimit: t.int({ defaultValue: 0, description: '0 = unlimited.' }),
      dailyWinLimit: t.int({ defaultValue: 0, description: '0 = unlimited.' }),
      drawCostPoints: t.int({
        defaultValue: 0,
        description: 'Points each draw costs (0 to 1,000,000; 0 = free). A draw that does not happen (limit, inactive, sold out) spends nothing.',
      }),
      timezone: t.string({ defaultValue: 'Asia/Shanghai' }),
      prizes: t.field({ type: [PrizeInput], required: true }),
      requestId: t.string({
        description:
          "The operator's idempotency key (1 to 128 characters): a retry with the same requestId and terms, after a timeout or at once, gets the first activity, created once. The same requestId for other terms: BAD_USER_INPUT (REQUEST_ID_OF_ANOTHER_CREATE).",
      }),
    }),
  })
  .validate(createLotteryInput);

const PrizeUpdateInput = builder.inputType('PrizeUpdateInput', {
  description: 'A change to one prize of the activity, named by prizeId; omitted fields stay as they are.',
  fields: (t) => ({
    prizeId: t.id({ required: true }),
    weight: t.int(),
    addStock: t.int({ description: 'Units added to totalStock (and to what is left).' }),
    dailyStock: t.int({ description: 'WEIGHTED: wins per local day at most, at least 1 as on creation; clearDailyStock removes it.' }),
    clearDailyStock: t.boolean({
      description: 'WEIGHTED: true removes the daily stock, so the prize may be won any number of times a day, up to its stock. Not with dailyStock (BAD_USER_INPUT, SET_AND_CLEARED).',
    }),
    hourlyQuota: t.intList({
      description: 'TIMED: applies to the hours not scheduled yet. An hour is scheduled shortly before it begins (twice LOTTERY_SCHEDULE_INTERVAL_MS, one minute by default).',
    }),
  }),
});

const UpdateLotteryInput = builder
  .inputType('UpdateLotteryInput', {
    description: 'Omitted fields stay as they are.',
    fields: (t) => ({
      endsAt: t.field({ type: 'DateTime', description: 'A new end; one already past ends the activity now, so no draw is recorded after its end. An ended activity keeps its end.' }),
      paused: t.boolean(),
      noPrizeWeight: t.int(),
      soldOutOdds: t.field({ type: SoldOutOdds, description: 'WEIGHTED only; from the next draw on.' }),
      dailyDrawLimit: t.int(),
      dailyWinLimit: t.int(),
      prizes: t.field({ type: [PrizeUpdateInput] }),
      requestId: t.string({
        description:
          "The operator's idempotency key (1 to 128 characters), its own per activity: send it again on every retry of one change. A retry with the same requestId and change, after SERVICE_UNAVAILABLE or at once, answers the activity as it is once the first change is committed, and never applies it twice (addStock adds once). A call that changed nothing leaves the requestId unused. The same requestId for another change of the activity: BAD_USER_INPUT (REQUEST_ID_OF_ANOTHER_CHANGE).",
      }),
    }),
  })
  .validate(updateLotteryInput);

builder.queryField('lotteryActivity', (t) =>
  t.withAuth({ signedIn: true }).field({
    type: LotteryActivity,
    nullable: true,
    description: 'The lottery activity with this id as it is now; null when there is none.',
    args: { id: t.arg.id({ required: true, validate: recordId }) },
    resolve: (_root, { id }, { app }) => app.lottery.get(String(id)),
  }),
);

builder.queryField('lotteryActivities', (t) =>
  describePaging(
    t.withAuth({ signedIn: true }).connection({
      type: LotteryActivity,
      description: 'The lottery catalog, newest first.',
      args: { status: t.arg({ type: LotteryStatus, description: 'Only the activities of this status now; unset: all.' }) },
      resolve: (_root, { status, ...args }, { app, locale }) =>
        keysetConnection(
          args,
          (page) => app.lottery.list(status ?? null, page),
          (activity) => activity.id,
          locale,
        ),
    }),
  ),
);

builder.queryField('lotteryDrawAudit', (t) =>
  t.withAuth({ admin: true }).field({
    type: LotteryDrawAudit,
    nullable: true,
    description: 'Operators: replays a committed draw.',
    args: { drawId: t.arg.id({ required: true, validate: recordId, description: 'The drawId drawLottery answered with.' }) },
    resolve: (_root, { drawId }, { app }) => app.lottery.audit(String(drawId)),
  }),
);

builder.queryField('lotteryWins', (t) =>
  describePaging(
    t.withAuth({ admin: true }).connection({
      type: LotteryWinRecord,
      description:
        "Operators: an activity's winning draws, oldest first, every one committed (losses are not listed), to ship the prizes; with prizeId, that prize's only. An unknown activity or prize has none.",
      args: {
        activityId: t.arg.id({ required: true, validate: recordId, description: 'The lottery activity whose wins to list.' }),
        prizeId: t.arg.id({ validate: recordId, description: 'Only the wins of this prize of the activity; unset: every prize.' }),
      },
      resolve: (_root, { activityId, prizeId, ...args }, { app, locale }) =>
        keysetConnection(
          args,
          (page) => app.lottery.wins(String(activityId), prizeId == null ? null : String(prizeId), page),
          (win) => win.drawId,
          locale,
        ),
    }),
  ),
);

builder.mutationField('createLotteryActivity', (t) =>
  t.withAuth({ admin: true }).field({
    type: LotteryActivity,
    description: 'Operators only.',
    args: { input: t.arg({ type: CreateLotteryInput, required: true }) },
    resolve: (_root, { input }, { app, viewer }) => app.lottery.create(viewer.userId, input),
  }),
);

builder.mutationField('drawLottery', (t) =>
  t.withAuth({ signedIn: true }).field({
    type: DrawLotteryResult,
    description:
      'One draw; a result is already committed in PostgreSQL, with its cost in points and any POINTS prize. The same requestId (1 to 128 characters) returns the first result, counts once and pays once. InsufficientPoints: the balance does not cover drawCostPoints; nothing was spent.',
    args: {
      activityId: t.arg.id({ required: true, validate: recordId }),
      requestId: t.arg.string({ validate: drawRequestId }),
    },
    resolve: (_root, { activityId, requestId }, { app, viewer }) =>
      app.lottery.draw(viewer.userId, String(activityId), requestId ?? null).catch((error: unknown) => wrapOrThrow(error, drawProblems, countRefusal) as DrawProblem),
  }),
);

builder.mutationField('updateLotteryActivity', (t) =>
  t.withAuth({ admin: true }).field({
    type: LotteryActivity,
    description:
      'Operators: changes weights, stock, limits, the end or pause; the next draw sees all of it at once. SERVICE_UNAVAILABLE says whether the change was not applied (send it again) or may still be applied (retry with the same requestId, which applies it at most once).',
    errors: {
      types: [NotFound],
      directResult: true,
      union: { name: 'UpdateLotteryActivityResult', description: 'What updateLotteryActivity answers: the activity as changed, or NotFound.' },
    },
    args: {
      activityId: t.arg.id({ required: true, validate: recordId, description: 'The lottery activity to change.' }),
      input: t.arg({ type: UpdateLotteryInput, required: true, description: 'What changes.' }),
    },
    resolve: (_root, { activityId, input }, { app, viewer }) => app.lottery.update(viewer.userId, String(activityId), input),
  }),
);

builder.subscriptionField('lotteryWinners', (t) =>
  t.withAuth({ signedIn: true }).field({
    type: LotteryWin,
    description:
      "The latest `recent` wins, then every win as it is committed (each its own event, none merged). Completes once the activity has ENDED, after the wins of draws made before the end. Each subscriber sees the winners' user ids by the rule of LotteryWin.userId.",
    args: {
      activityId: t.arg.id({ required: true, validate: recordId }),
      recent: t.arg.int({
        defaultValue: 0,
        description: `How many of the latest wins to send first: 0 to ${LOTTERY_LIMITS.maxRecentWins}, more is BAD_USER_INPUT. A ticker, not a list: operators page every win with lotteryWins.`,
        validate: z.number().int().min(0).max(LOTTERY_LIMITS.maxRecentWins),
      }),
    },
    subscribe: (_root, { activityId, recent }, context) => {
      const id = String(activityId);
      return watchExisting(new NotFound('lottery activity', id), context, context.app.lottery.get(id), () => context.app.lottery.winners(id, recent ?? 0));
    },
    resolve: (win) => win,
  }),
);
