import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { ruleInputIssue } from '../../i18n/issues.ts';
import { Campaign } from '../../infra/campaign/campaign.ts';
import type { KeysetPage } from '../../infra/db/pages.ts';
import { JournalCommitError } from '../../infra/journal/groupCommit.ts';
import type { JournalEntry } from '../../infra/journal/journal.ts';
import type { ScriptClock } from '../../infra/redis/testClock.ts';
import { campaignStatus } from '../campaignStatus.ts';
import type { CampaignDeps } from '../deps.ts';
import { BadInputError, ServiceUnavailableError } from '../errors.ts';
import { type OperatorRequest, createOncePerRequest, operatorRequestOf, requestOf } from '../operatorRequests.ts';
import type { DrawPayments } from '../points/drawPayments.ts';
import { NotFound } from '../problems.ts';
import { type RandomSource, cryptoRandom } from '../random.ts';
import { type DrawAudit, auditDraw } from './audit.ts';
import { changeSettings, firstSettings } from './change.ts';
import type { CreateLotteryInput, UpdateLotteryInput } from './input.ts';
import { drawJournalKind, scheduleJournalKind, settingsJournalKind } from './journalKinds.ts';
import { changeIsDurable, drawIsDurable, insertActivity, loadSnapshot, lotteryActivityIds, prizeRemainingStock, remainingStock, winsPage } from './persistence.ts';
import { ActivityNotActive, DrawLimitReached, WinLimitReached } from './problems.ts';
import { LotteryScheduler, scheduledHourEnd } from './scheduler.ts';
import { DRAW_RANDOM_RANGE, type LotterySettings, type LotteryStatus } from './settings.ts';
import { type InactiveReason, type LotterySnapshot, LotteryStore, type PrizeSnapshot, emptySnapshot, lotteryKeys } from './store.ts';
import { localDay } from './timezone.ts';
import { type DrawOutcome, type LotteryActivityView, type LotteryWinView, type WinRecordView, drawOutcome, prizeView } from './views.ts';
import { LotteryWinners } from './winners.ts';

export class DrawNotConfirmedError extends ServiceUnavailableError {}

/**
 * An operator's change that was not applied (the settings changed meanwhile, or PostgreSQL
 * refused it for a newer one after a Redis data loss): the same request may be sent again.
 */
const notApplied = () => new ServiceUnavailableError('the lottery changed while the change was being applied, so it was not applied; try again');

/**
 * An operator's change whose commit PostgreSQL did not confirm in time: it stays in the
 * journal for the sweeper, and is applied later. A retry without its requestId (a delta
 * such as addStock) would apply it a second time.
 */
function mayStillBeApplied<T>(committing: Promise<T>): Promise<T> {
  return committing.catch((error: unknown) => {
    if (!(error instanceof JournalCommitError)) throw error;
    throw new ServiceUnavailableError('the change could not be confirmed in the database and may still be applied; retry with the same requestId (a retry without one may apply it twice)');
  });
}

export interface LotteryDeps extends CampaignDeps {
  clock: ScriptClock;
  /** Where paid draws reserve their points (src/domain/points/drawPayments.ts). */
  payments: DrawPayments;
  /** How often the TIMED schedule runs (LOTTERY_SCHEDULE_INTERVAL_MS): hours are scheduled this far ahead, twice over. */
  scheduleIntervalMs: number;
  /** Tests only: runs between a paid draw's reservation and its draw (a crash test stops the process there). */
  afterReservation?: () => Promise<void>;
}

/** What an operator's change that changes nothing comes to: no script call, no new version. */
const UNCHANGED = { kind: 'unchanged' } as const;

/** How far back a new TIMED activity may start: a start typed a little late is not refused. */
const TIMED_START_GRACE_MS = 60 * 60 * 1000;

/** Every lottery entry names its activity: the campaign whose keys a refused entry drops (none if it names none). */
const activityField = z.object({ activity: z.string() });
const activityOf = (entry: JournalEntry) => {
  const parsed = activityField.safeParse(entry.fields);
  return parsed.success ? [parsed.data.activity] : [];
};

/** A committed draw, as its script answered it or as it journaled it. */
type CommittedDraw = Parameters<typeof drawOutcome>[2] & { activityId: string; userId: string };

function drawOfEntry(entry: JournalEntry): CommittedDraw {
  const draw = drawJournalKind.decode(entry);
  const prize = draw.snapshot ? (JSON.parse(draw.snapshot) as PrizeSnapshot) : null;
  return { drawId: draw.draw, activityId: draw.activity, userId: draw.user, prize, drawnAtMs: draw.at, settingsVersion: draw.version };
}

/** Lotteries (campaign id = activity id): draws, operators' changes, and what they read. */
export class LotteryService {
  private readonly store: LotteryStore;
  private readonly random: RandomSource;
  private readonly activities: Campaign<string, LotterySnapshot>;
  private readonly winnersTicker: LotteryWinners;
  private readonly scheduler: LotteryScheduler;

  constructor(private readonly deps: LotteryDeps) {
    this.store = new LotteryStore(deps.redis, deps.scripts);
    this.random = deps.random ?? cryptoRandom;
    this.activities = new Campaign(deps, {
      name: 'lottery activity',
      keys: lotteryKeys,
      load: async (activityId) => loadSnapshot(deps.prisma, activityId, await deps.clock.nowMs()),
      write: (snapshot) => this.store.write(snapshot),
      retainUntilMs: (snapshot) => snapshot.settings.retainUntilMs,
    });
    // A draw, schedule or settings change PostgreSQL turned down changed counters, stock or settings in Redis.
    this.activities.persistsWith(drawJournalKind, activityOf, { announce: (entry) => this.afterCommit(drawOfEntry(entry)) });
    for (const kind of [scheduleJournalKind, settingsJournalKind]) this.activities.persistsWith(kind, activityOf);
    this.winnersTicker = new LotteryWinners(deps, (activityId) => this.settings(activityId));
    this.scheduler = new LotteryScheduler(deps, this.activities, this.store, this.random);
  }

  /** Creates the activity; with a requestId, once: a retry after a timeout gets the first activity. */
  create(createdBy: string, input: CreateLotteryInput): Promise<LotteryActivityView> {
    const request = operatorRequestOf('lottery', createdBy, input);
    return createOncePerRequest(
      this.deps.prisma,
      request,
      () => this.createOnce(createdBy, input, request),
      async (activityId) => (await this.get(activityId))!,
    );
  }

  private async createOnce(createdBy: string, input: CreateLotteryInput, request: OperatorRequest | null): Promise<LotteryActivityView> {
    const id = randomUUID();
    const nowMs = await this.deps.clock.nowMs();
    if (input.endsAt.getTime() <= nowMs) throw BadInputError.of([ruleInputIssue(['input', 'endsAt'], 'ENDS_IN_THE_PAST')]);
    // The scheduler releases every hour since startsAt that is not released yet, which
    // after downtime is what it should do; for a new activity dated back months it would
    // release months of prizes at once (and write them all, in this request).
    if (input.strategy === 'TIMED' && input.startsAt.getTime() < nowMs - TIMED_START_GRACE_MS) {
      throw BadInputError.of([ruleInputIssue(['input', 'startsAt'], 'TIMED_STARTS_IN_THE_PAST')]);
    }
    const settings = firstSettings(input);
    await this.activities.create(id, async () => {
      await insertActivity(this.deps.prisma, { id, createdBy, settings, request });
      return emptySnapshot(id, settings, localDay(settings.utcOffsets, nowMs));
    });
    if (settings.strategy === 'TIMED') await this.scheduler.scheduleActivity(id, nowMs);
    return (await this.get(id))!;
  }

  /**
   * One draw for the user. Resolves only once the draw is committed in PostgreSQL; the
   * same requestId gives the first draw's result and counts once. A paid draw reserves
   * its cost first and draws on that reservation (src/domain/points/drawPayments.ts).
   */
  async draw(userId: string, activityId: string, requestId: string | null): Promise<DrawOutcome> {
    let drawId: string = randomUUID();
    let cost = 0;
    // Thrown before the draw is known to be committed or not: a paid draw's reservation
    // stays, for the sweeper to release if no draw comes of it.
    const drawOnce = () =>
      this.activities.journaled(activityId, {
        call: () => this.drawWithFreshRandom(activityId, userId, requestId, drawId, cost),
        entryOf: (reply) => (reply.kind === 'drawn' ? reply.entry : null),
        onConflict: async () => {
          if (cost > 0 && (await this.deps.payments.isReleased(drawId))) throw new DrawNotConfirmedError('the points reserved for this draw were released; try again');
          return undefined;
        },
        unavailable: () => new DrawNotConfirmedError('the lottery is being rebuilt; try again'),
      });
    // A free draw is one call. A paid one is refused 'unpaid' (after a retry's 'repeated'
    // check), reserves its cost, and draws on the reservation.
    let reply = await drawOnce();
    if (reply?.kind === 'unpaid') {
      cost = reply.drawCostPoints;
      drawId = await this.deps.payments.reserve({ userId, activityId, requestId, drawId, cost });
      await this.deps.afterReservation?.();
      reply = await drawOnce();
    }
    const drawnHere = reply?.kind === 'drawn' || (reply?.kind === 'repeated' && reply.drawId === drawId);
    if (cost > 0 && !drawnHere) await this.deps.payments.release(drawId);
    if (!reply) throw new NotFound('lottery activity', activityId);
    switch (reply.kind) {
      case 'inactive':
        throw new ActivityNotActive(
          reply.reason,
          new Date(reply.startsAtMs),
          new Date(reply.endsAtMs),
          new Date(reply.nowMs),
          await this.availableAt(activityId, reply.reason, reply.availableAtMs, reply.endsAtMs),
        );
      case 'limit':
        throw new DrawLimitReached(reply.dailyDrawLimit, new Date(reply.resetsAtMs));
      case 'winLimit':
        throw new WinLimitReached(reply.dailyWinLimit, new Date(reply.resetsAtMs));
      case 'unpaid':
        throw new DrawNotConfirmedError('the cost of this lottery changed; try again');
      case 'repeated':
        // The first call may still be committing, or may have failed: answer only with a durable draw.
        await this.deps.journal.commitStream(lotteryKeys(activityId).journal, (entry) => entry.fields.draw === reply.drawId);
        if (!(await drawIsDurable(this.deps.prisma, reply.drawId))) {
          throw new DrawNotConfirmedError('the first draw with this requestId is not confirmed yet; try again');
        }
        // The first call may have died after its commit, before it settled the prize. Not
        // announced again: the ticker had it then, and would get it after newer wins now.
        return this.afterCommit({ ...reply, activityId, userId }, { announce: false });
      case 'drawn':
        return this.afterCommit({ ...reply, activityId, userId });
    }
  }

  /**
   * What follows a draw's commit, by its caller or for a caller that may be dead: the
   * prize is committed with the draw, and the cached balance shows a POINTS prize before
   * the answer does; a win goes to the ticker.
   */
  private async afterCommit(draw: CommittedDraw, { announce = true } = {}): Promise<DrawOutcome> {
    const outcome = drawOutcome(draw.activityId, draw.userId, draw);
    if (draw.prize?.kind === 'POINTS') await this.deps.payments.settleCommitted(draw.drawId);
    if (announce && outcome.outcome === 'win') this.winnersTicker.announce(outcome);
    return outcome;
  }

  /**
   * When a refused draw may go through, from the script's answer. NOTHING_RELEASED: the
   * script names the next release's instant, which must stay secret (a bot drawing right
   * then would win every prize), so the draw is told only when that release's hour ends.
   */
  private async availableAt(activityId: string, reason: InactiveReason, availableAtMs: number, endsAtMs: number): Promise<Date | null> {
    if (availableAtMs <= 0) return null;
    if (reason !== 'NOTHING_RELEASED') return new Date(availableAtMs);
    const settings = await this.settings(activityId);
    return settings ? new Date(Math.min(scheduledHourEnd(settings, availableAtMs), endsAtMs)) : null;
  }

  /** Paid draws: releases reservations whose draw never came, once the lottery's journal holds none for them. */
  sweepPayments(): Promise<number> {
    return this.deps.payments.sweep((activityId, drawId) => this.deps.journal.commitStream(lotteryKeys(activityId).journal, (entry) => entry.fields.draw === drawId));
  }

  /**
   * An operator's change, applied atomically for the next draw; resolves once it is
   * committed in PostgreSQL. With a requestId it is applied once: a retry (after
   * SERVICE_UNAVAILABLE, or racing the first call) answers the activity as it is once the
   * first change is committed, and applies nothing, whatever the change would come to now.
   */
  async update(changedBy: string, activityId: string, input: UpdateLotteryInput): Promise<LotteryActivityView> {
    const request = requestOf(input);
    const reply = await mayStillBeApplied(
      this.activities.journaled(activityId, {
        call: () =>
          this.store.overCurrentSettings(activityId, async (current) => {
            // Checked again by the script, for a first call that lands in between.
            const first = request && (await this.store.changeOf(activityId, changedBy, request.requestId));
            if (first) return first;
            const change = changeSettings(current, input, await this.deps.clock.nowMs());
            if (change.kind === 'invalid') throw BadInputError.of(change.issues);
            if (change.kind === 'unchanged') return UNCHANGED;
            // The end may move: the sweeper watches the journal as long as the keys are kept.
            await this.deps.journal.trackStream(lotteryKeys(activityId).journal, change.settings.retainUntilMs);
            return this.store.updateSettings(activityId, current.version, change.settings, changedBy, request, change.topUps, await this.deps.clock.offsetMs());
          }),
        entryOf: (reply) => (reply.kind === 'applied' ? reply.entry : null),
        unavailable: notApplied,
      }),
    );
    if (!reply) throw new NotFound('lottery activity', activityId);
    if (reply.kind === 'stale') throw notApplied();
    if (reply.kind === 'ended') throw BadInputError.of([ruleInputIssue(['input', 'endsAt'], 'ENDED_STAYS_ENDED')]);
    if (reply.kind === 'applied') this.winnersTicker.settingsChanged(activityId);
    if (reply.kind === 'repeated') {
      const { requestId, digest } = request!;
      if (reply.digest !== digest) throw BadInputError.of([ruleInputIssue(['input', 'requestId'], 'REQUEST_ID_OF_ANOTHER_CHANGE', { requestId })]);
      // The first call may still be committing, or may have failed: answer only with a durable change.
      await mayStillBeApplied(
        this.deps.journal.commitStream(lotteryKeys(activityId).journal, (entry) => entry.fields.kind === settingsJournalKind.kind && entry.fields.version === String(reply.version)),
      );
      if (!(await changeIsDurable(this.deps.prisma, activityId, reply.version, changedBy, requestId))) throw notApplied();
    }
    return (await this.get(activityId))!;
  }

  async get(activityId: string): Promise<LotteryActivityView | null> {
    const settings = await this.settings(activityId);
    if (!settings) return null;
    const [nowMs, remaining] = await Promise.all([this.deps.clock.nowMs(), remainingStock(this.deps.prisma, activityId)]);
    return {
      id: activityId,
      settings,
      status: campaignStatus(settings, nowMs),
      serverTime: new Date(nowMs),
      prizes: settings.prizes.map((prize) => ({ ...prizeView(activityId, prize), remainingStock: remaining.get(prize.id) ?? prize.totalStock })),
    };
  }

  /**
   * The catalog, newest first; `status` picks the activities of that status now, by the
   * columns PostgreSQL mirrors the settings in. Each is then read as get() reads it, so
   * one whose status changes in between is listed with its new status.
   */
  async list(status: LotteryStatus | null, page: KeysetPage): Promise<LotteryActivityView[]> {
    const ids = await lotteryActivityIds(this.deps.prisma, status, await this.deps.clock.nowMs(), page);
    const views = await Promise.all(ids.map((id) => this.get(id)));
    return views.filter((view): view is LotteryActivityView => view !== null);
  }

  /** totalStock − wins persisted in PostgreSQL: every acknowledged win, and only those. */
  remainingStock(prizeId: string): Promise<number> {
    return prizeRemainingStock(this.deps.prisma, prizeId);
  }

  /** The latest `recent` wins, then every new win as it is committed; completes once the activity has ENDED. */
  winners(activityId: string, recent: number): AsyncIterableIterator<LotteryWinView> {
    return this.winnersTicker.stream(activityId, recent);
  }

  /**
   * Operators: a page of the activity's winning draws (of one prize, or all), oldest first,
   * as PostgreSQL holds them: every acknowledged win, and only those. None for an unknown
   * activity or prize.
   */
  wins(activityId: string, prizeId: string | null, page: KeysetPage): Promise<WinRecordView[]> {
    return winsPage(this.deps.prisma, activityId, prizeId, page);
  }

  /** Replays a persisted WEIGHTED draw from its random input against the settings of its version. */
  audit(drawId: string): Promise<DrawAudit | null> {
    return auditDraw(this.deps.prisma, drawId);
  }

  /** TIMED: schedules the hours now due of every running activity; returns how many prizes it released. */
  scheduleDue(): Promise<number> {
    return this.scheduler.scheduleDue();
  }

  /** One draw; a random input in the rejected sliver of the range is replaced by a fresh one. */
  private async drawWithFreshRandom(activityId: string, userId: string, requestId: string | null, drawId: string, paidPoints: number) {
    const clockOffsetMs = await this.deps.clock.offsetMs();
    for (;;) {
      const reply = await this.store.draw({ activityId, userId, drawId, requestId, randomInput: this.random.int(0, DRAW_RANDOM_RANGE), clockOffsetMs, paidPoints });
      if (reply.kind !== 'reroll') return reply;
    }
  }

  /** The activity's settings from Redis, rebuilt from PostgreSQL when missing; null if it does not exist. */
  private settings(activityId: string): Promise<LotterySettings | null> {
    return this.activities.read(activityId, () => this.store.readSettings(activityId));
  }
}
