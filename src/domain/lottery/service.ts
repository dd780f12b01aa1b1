import { randomUUID } from 'node:crypto';
import { ErrorCode, ServiceUnavailableError, graphqlError } from '../../errors.ts';
import type { JournalEntry } from '../../infra/journal/journal.ts';
import { hydrate, withRebuild } from '../../infra/redis/hydration.ts';
import type { ScriptClock } from '../../infra/redis/testClock.ts';
import type { CampaignDeps } from '../deps.ts';
import { NotFound } from '../problems.ts';
import { type RandomSource, cryptoRandom } from '../random.ts';
import { changeSettings } from './change.ts';
import { chooseWeighted } from './choice.ts';
import type { CreateLotteryInput, UpdateLotteryInput } from './input.ts';
import { drawJournalKind, scheduleJournalKind, settingsJournalKind } from './journalKinds.ts';
import { insertActivity, loadDrawForAudit, loadSnapshot, prizeRemainingStock, remainingStock, timedActivitiesToSchedule } from './persistence.ts';
import { ActivityNotActive, DrawLimitReached } from './problems.ts';
import { DRAW_RANDOM_RANGE, type LotterySettings, type LotteryStatus, RELEASE_RANDOM_RANGE, lotteryStatus, lotteryRetainUntil } from './settings.ts';
import { type LotterySnapshot, LotteryStore, type PrizeSnapshot, emptySnapshot, lotteryKeys } from './store.ts';
import { ONE_HOUR_MS, localDay, localHourOfDay, localHourStart, utcOffsetTable } from './timezone.ts';
import { LotteryWinners, prizeView } from './winners.ts';

export interface PrizeView extends PrizeSnapshot {
  activityId: string;
  /** [] when the prize is not scheduled, or when the view is a win's snapshot. */
  hourlyQuota: number[];
  /** Filled in when the activity is read; otherwise the resolver reads it. */
  remainingStock?: number;
}

export interface LotteryActivityView {
  id: string;
  settings: LotterySettings;
  status: LotteryStatus;
  prizes: PrizeView[];
}

interface DrawView {
  drawId: string;
  activityId: string;
  userId: string;
  drawnAt: Date;
  settingsVersion: number;
}

export interface LotteryWinView extends DrawView {
  outcome: 'win';
  /** The prize as it was when won. */
  prize: PrizeView;
}

export interface LotteryLoseView extends DrawView {
  outcome: 'lose';
}

export type DrawOutcome = LotteryWinView | LotteryLoseView;

/** A journaled draw replayed against the settings of its version. */
export interface DrawAudit {
  drawId: string;
  settingsVersion: number;
  randomInput: string | null;
  weightTotal: number | null;
  roll: number | null;
  pool: string[];
  recordedPrizeId: string | null;
  replayedPrizeId: string | null;
  matches: boolean;
}

export class DrawNotConfirmedError extends ServiceUnavailableError {}

export interface LotteryDeps extends CampaignDeps {
  clock: ScriptClock;
}

/** How many times an operation that clashed with durable state rebuilds the activity and tries again. */
const ATTEMPTS = 3;
/** The scheduler fills every hour that starts within this much of now. */
const SCHEDULE_LOOK_AHEAD_MS = ONE_HOUR_MS;

function badInput(issues: { path: (string | number)[]; message: string }[]): Error {
  return graphqlError(ErrorCode.badUserInput, issues.map((issue) => issue.message).join('; '), { issues });
}

export class LotteryService {
  private readonly store: LotteryStore;
  private readonly random: RandomSource;
  private readonly winnersTicker: LotteryWinners;

  constructor(private readonly deps: LotteryDeps) {
    this.store = new LotteryStore(deps.redis, deps.scripts);
    this.winnersTicker = new LotteryWinners(deps, (activityId) => this.settings(activityId));
    this.random = deps.random ?? cryptoRandom;
    // A draw, schedule or settings change PostgreSQL turned down changed counters, stock or settings in Redis.
    const forget = ({ fields }: JournalEntry) => this.store.invalidate(fields.activity!);
    for (const handler of [drawJournalKind, scheduleJournalKind, settingsJournalKind]) deps.journal.register(handler, forget);
  }

  async create(createdBy: string, input: CreateLotteryInput): Promise<LotteryActivityView> {
    const id = randomUUID();
    const startsAtMs = input.startsAt.getTime();
    const endsAtMs = input.endsAt.getTime();
    const settings: LotterySettings = {
      version: 1,
      title: input.title,
      strategy: input.strategy,
      startsAtMs,
      endsAtMs,
      retainUntilMs: lotteryRetainUntil(endsAtMs),
      paused: false,
      noPrizeWeight: input.noPrizeWeight,
      dailyDrawLimit: input.dailyDrawLimit,
      dailyWinLimit: input.dailyWinLimit,
      timezone: input.timezone,
      utcOffsets: utcOffsetTable(input.timezone, startsAtMs, endsAtMs),
      prizes: input.prizes.map((prize) => ({
        id: randomUUID(),
        title: prize.title,
        kind: prize.kind,
        points: prize.points ?? 0,
        weight: prize.weight,
        totalStock: prize.totalStock,
        dailyStock: prize.dailyStock ?? 0,
        hourlyQuota: prize.hourlyQuota ?? [],
      })),
    };
    await insertActivity(this.deps.prisma, { id, createdBy, settings });
    const nowMs = await this.deps.clock.nowMs();
    await this.writeToRedis(emptySnapshot(id, settings, localDay(settings.utcOffsets, nowMs)));
    if (settings.strategy === 'TIMED') await this.scheduleActivity(id, nowMs);
    return (await this.get(id))!;
  }

  /**
   * One draw for the user. Resolves only once the draw is committed in PostgreSQL; the
   * same requestId gives the first draw's result and counts once.
   */
  async draw(userId: string, activityId: string, requestId: string | null): Promise<DrawOutcome> {
    for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
      const reply = await withRebuild(() => this.drawWithFreshRandom(activityId, userId, requestId), () => this.rebuild(activityId));
      if (!reply) throw new NotFound('lottery activity', activityId);
      switch (reply.kind) {
        case 'inactive':
          throw new ActivityNotActive(reply.reason, new Date(reply.startsAtMs), new Date(reply.endsAtMs));
        case 'limit':
          throw new DrawLimitReached(reply.dailyDrawLimit, new Date(reply.resetsAtMs));
        case 'repeated':
          // The first call may still be committing, or may have failed: answer only with a durable draw.
          await this.deps.journal.commitStream(lotteryKeys(activityId).journal, (entry) => entry.fields.draw === reply.drawId);
          if (!(await this.deps.prisma.lotteryDraw.findUnique({ where: { id: reply.drawId }, select: { id: true } }))) {
            throw new DrawNotConfirmedError('the first draw with this requestId is not confirmed yet; try again');
          }
          return this.outcome(activityId, userId, reply);
        case 'drawn': {
          if ((await this.deps.journal.commit(reply.entry)) === 'conflict') {
            // Redis made a grant PostgreSQL already holds (Redis lost data and was rebuilt
            // while draws were in flight). The commit dropped the activity's keys; rebuild
            // and draw again.
            this.deps.log.warn({ activityId, userId }, 'draw conflicted with a durable draw; rebuilding the activity');
            continue;
          }
          const outcome = this.outcome(activityId, userId, reply);
          if (outcome.outcome === 'win') this.winnersTicker.announce(outcome);
          return outcome;
        }
      }
    }
    throw new DrawNotConfirmedError('the lottery is being rebuilt; try again');
  }

  /** An operator's change, applied atomically for the next draw; resolves once it is committed in PostgreSQL. */
  async update(changedBy: string, activityId: string, input: UpdateLotteryInput): Promise<LotteryActivityView> {
    for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
      const current = await this.settings(activityId);
      if (!current) throw new NotFound('lottery activity', activityId);
      const change = changeSettings(current, input);
      if (change.kind === 'invalid') throw badInput(change.issues);
      const { settings, topUps } = change;
      await this.deps.journal.trackStream(lotteryKeys(activityId).journal, settings.retainUntilMs);
      const reply = await withRebuild(() => this.store.updateSettings(activityId, current.version, settings, changedBy, topUps), () => this.rebuild(activityId));
      if (!reply) throw new NotFound('lottery activity', activityId);
      if (reply.kind === 'stale') continue;
      if ((await this.deps.journal.commit(reply.entry)) === 'conflict') {
        this.deps.log.warn({ activityId }, 'settings change conflicted with a durable one; rebuilding the activity');
        continue;
      }
      return (await this.get(activityId))!;
    }
    throw new ServiceUnavailableError('the lottery changed while the change was applied; try again');
  }

  async get(activityId: string): Promise<LotteryActivityView | null> {
    const settings = await this.settings(activityId);
    if (!settings) return null;
    const [nowMs, remaining] = await Promise.all([this.deps.clock.nowMs(), remainingStock(this.deps.prisma, activityId)]);
    return {
      id: activityId,
      settings,
      status: lotteryStatus(settings, nowMs),
      prizes: settings.prizes.map((prize) => ({ ...prizeView(activityId, prize), remainingStock: remaining.get(prize.id) ?? prize.totalStock })),
    };
  }

  /** totalStock − wins persisted in PostgreSQL: every acknowledged win, and only those. */
  remainingStock(prizeId: string): Promise<number> {
    return prizeRemainingStock(this.deps.prisma, prizeId);
  }

  /** The latest `recent` wins, then every new win as it is committed; completes once the activity has ENDED. */
  winners(activityId: string, recent: number): AsyncIterableIterator<LotteryWinView> {
    return this.winnersTicker.stream(activityId, recent);
  }

  /** Replays a persisted WEIGHTED draw from its random input against the settings of its version. */
  async audit(drawId: string): Promise<DrawAudit | null> {
    const row = await loadDrawForAudit(this.deps.prisma, drawId);
    if (!row?.settings) return null;
    const { settings } = row;
    const pool = row.pool.map((position) => settings.prizes[position]);
    let replayedPrizeId = row.prizeId;
    let totalMatches = true;
    if (settings.strategy === 'WEIGHTED') {
      const choice = chooseWeighted(
        pool.map((prize) => prize?.weight ?? 0),
        settings.noPrizeWeight,
        Number(row.randomInput ?? 0),
      );
      replayedPrizeId = choice.kind === 'chosen' && choice.index !== null ? (pool[choice.index]?.id ?? null) : null;
      totalMatches = choice.kind === 'chosen' && (choice.roll === null ? row.weightTotal === null : choice.total === row.weightTotal && choice.roll === row.roll);
    }
    return {
      drawId,
      settingsVersion: row.settingsVersion,
      randomInput: row.randomInput === null ? null : String(row.randomInput),
      weightTotal: row.weightTotal,
      roll: row.roll,
      pool: pool.map((prize) => prize?.id ?? '?'),
      recordedPrizeId: row.prizeId,
      replayedPrizeId,
      matches: totalMatches && replayedPrizeId === row.prizeId,
    };
  }

  /**
   * TIMED: schedules every hour of every running activity that starts within the
   * look-ahead and is not scheduled yet, past hours included (catch-up after downtime).
   * Returns how many prizes it released.
   */
  async scheduleDue(): Promise<number> {
    const nowMs = await this.deps.clock.nowMs();
    let released = 0;
    for (const activityId of await timedActivitiesToSchedule(this.deps.prisma, nowMs, SCHEDULE_LOOK_AHEAD_MS)) {
      released += await this.scheduleActivity(activityId, nowMs);
    }
    return released;
  }

  private async scheduleActivity(activityId: string, nowMs: number): Promise<number> {
    const settings = await this.settings(activityId);
    if (!settings || settings.strategy !== 'TIMED') return 0;
    const scheduled = await this.store.scheduledHours(activityId);
    const until = Math.min(nowMs + SCHEDULE_LOOK_AHEAD_MS, settings.endsAtMs);
    let released = 0;
    for (let hour = localHourStart(settings.utcOffsets, settings.startsAtMs); hour < until; hour += ONE_HOUR_MS) {
      if (!scheduled.has(hour)) released += await this.scheduleHour(activityId, hour);
    }
    return released;
  }

  private async scheduleHour(activityId: string, hourStartMs: number): Promise<number> {
    for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
      const settings = await this.settings(activityId);
      if (!settings) return 0;
      const localHour = localHourOfDay(settings.utcOffsets, hourStartMs);
      const randoms = settings.prizes.flatMap((prize) =>
        Array.from({ length: prize.hourlyQuota[localHour] ?? 0 }, () => this.random.int(0, RELEASE_RANDOM_RANGE)),
      );
      const reply = await withRebuild(
        () => this.store.scheduleHour(activityId, randomUUID(), hourStartMs, localHour, settings.version, randoms),
        () => this.rebuild(activityId),
      );
      if (!reply || reply.kind === 'already') return 0;
      if (reply.kind === 'stale') continue;
      if ((await this.deps.journal.commit(reply.entry)) === 'conflict') {
        this.deps.log.warn({ activityId, hourStartMs }, 'hour was scheduled twice; rebuilding the activity from the durable schedule');
        continue;
      }
      return reply.released;
    }
    return 0;
  }

  /** One draw; a random input in the rejected sliver of the range is replaced by a fresh one. */
  private async drawWithFreshRandom(activityId: string, userId: string, requestId: string | null) {
    const clockOffsetMs = await this.deps.clock.offsetMs();
    for (;;) {
      const reply = await this.store.draw({ activityId, userId, drawId: randomUUID(), requestId, randomInput: this.random.int(0, DRAW_RANDOM_RANGE), clockOffsetMs });
      if (reply.kind !== 'reroll') return reply;
    }
  }

  private outcome(activityId: string, userId: string, reply: { drawId: string; prize: PrizeSnapshot | null; drawnAtMs: number; settingsVersion: number }): DrawOutcome {
    const base = { drawId: reply.drawId, activityId, userId, drawnAt: new Date(reply.drawnAtMs), settingsVersion: reply.settingsVersion };
    return reply.prize ? { ...base, outcome: 'win', prize: prizeView(activityId, reply.prize) } : { ...base, outcome: 'lose' };
  }

  /** The activity's settings from Redis, rebuilt from PostgreSQL when missing; null if it does not exist. */
  private async settings(activityId: string): Promise<LotterySettings | null> {
    const settings = await this.store.readSettings(activityId);
    if (settings) return settings;
    return (await this.rebuild(activityId)) ? this.store.readSettings(activityId) : null;
  }

  /** Rebuilds the activity's keys from PostgreSQL; false if it does not exist. */
  private rebuild(activityId: string): Promise<boolean> {
    const keys = lotteryKeys(activityId);
    return hydrate(this.deps, keys, async () => {
      // Entries still in the stream are draws Redis made before it lost the other keys;
      // persist them first so the rebuild counts them.
      await this.deps.journal.commitStream(keys.journal);
      const snapshot = await loadSnapshot(this.deps.prisma, activityId, await this.deps.clock.nowMs());
      if (!snapshot) return false;
      await this.writeToRedis(snapshot);
      return true;
    });
  }

  private async writeToRedis(snapshot: LotterySnapshot): Promise<void> {
    await this.deps.journal.trackStream(lotteryKeys(snapshot.activityId).journal, snapshot.settings.retainUntilMs);
    await this.store.write(snapshot);
  }
}
